#include "support/test_certificates.hpp"

#include "support/child_process.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace corolock::test {

using namespace std::chrono_literals;

void write_test_certificates(const std::string& dir, const std::string& names,
                             const std::string& ca_dir_in) {
    const std::string ca_dir = ca_dir_in.empty() ? dir : ca_dir_in;
    const char* env = std::getenv("COROLOCK_OPENSSL");
    const std::string openssl = find_executable(env != nullptr && *env != '\0' ? env : "openssl");
    if (openssl.empty()) throw std::runtime_error("test certificates: no openssl command on PATH");
    const std::string cnf = dir + "/openssl.cnf";
    {
        std::ofstream out(cnf);
        out << "# written by corolock's test fixtures\n"
               "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = corolock-test\n"
               "[v3_ca]\nbasicConstraints = critical,CA:TRUE\n"
               "keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n"
               "[v3_server]\nbasicConstraints = critical,CA:FALSE\n"
               "keyUsage = critical,digitalSignature,keyEncipherment\n"
               "extendedKeyUsage = serverAuth,clientAuth\n"
               "subjectAltName = "
            << names << "\nsubjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n";
        if (!out) throw std::runtime_error("test certificates: cannot write " + cnf);
    }
    auto run = [&](std::vector<std::string> args) {
        args.insert(args.begin(), openssl);
        child_process p(args, {{"OPENSSL_CONF", cnf}});
        const auto st = p.wait_for(30s);
        if (!st || child_process::exit_code(*st) != 0) {
            std::string line;
            for (const auto& a : args) line += a + " ";
            throw std::runtime_error("test certificates: openssl failed: " + line + "\n" + p.output());
        }
    };
    const std::vector<std::string> new_key{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                           "-nodes"};
    auto make_ca = [&](const std::string& name, const std::string& cn) {
        std::vector<std::string> a{"req", "-x509", "-config", cnf, "-extensions", "v3_ca"};
        a.insert(a.end(), new_key.begin(), new_key.end());
        a.insert(a.end(), {"-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".crt",
                           "-days", "3", "-subj", "/CN=" + cn});
        run(a);
    };
    if (ca_dir == dir) {
        make_ca("ca", "corolock test CA");
        make_ca("wrong-ca", "corolock unrelated CA");
    }
    std::vector<std::string> csr{"req", "-new", "-config", cnf};
    csr.insert(csr.end(), new_key.begin(), new_key.end());
    csr.insert(csr.end(), {"-keyout", dir + "/server.key", "-out", dir + "/server.csr", "-subj",
                           "/CN=corolock test server"});
    run(csr);
    // A serial of its own: a CA's certificates should not share one.
    static std::atomic<unsigned> signed_so_far{0};
    run({"x509", "-req", "-in", dir + "/server.csr", "-CA", ca_dir + "/ca.crt", "-CAkey",
         ca_dir + "/ca.key", "-set_serial", std::to_string(signed_so_far.fetch_add(1) + 1),
         "-extfile", cnf, "-extensions", "v3_server", "-days", "3", "-out", dir + "/server.crt"});
}

}  // namespace corolock::test
