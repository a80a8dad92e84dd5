#include "support/pg_server.hpp"

#include "support/child_process.hpp"
#include "support/free_ports.hpp"
#include "support/test_certificates.hpp"

#include <libpq-fe.h>

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace corolock::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

bool is_program(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0; }

}  // namespace

std::string find_pg_bindir() {
    if (const char* env = std::getenv("COROLOCK_PG_BINDIR"); env != nullptr && *env != '\0')
        return is_program(fs::path(env) / "postgres") ? env : "";
    if (auto p = find_executable("postgres"); !p.empty() && is_program(fs::path(p).parent_path() / "initdb"))
        return fs::path(p).parent_path().string();
    std::error_code ec;
    std::string best;
    int best_version = -1;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
        const auto name = e.path().filename().string();
        int v = -1;
        try {
            v = std::stoi(name);
        } catch (...) {
            continue;
        }
        if (v > best_version && is_program(e.path() / "bin" / "postgres")) {
            best_version = v;
            best = (e.path() / "bin").string();
        }
    }
    return best;
}

pg_server::pg_server() : bindir_(find_pg_bindir()) {
    if (bindir_.empty())
        throw std::runtime_error("pg_server: postgres not found; set COROLOCK_PG_BINDIR or PATH");
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/corolock-pg-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("pg_server: mkdtemp failed");
    dir_ = fs::absolute(tmpl).string();
    try {
        if (::geteuid() == 0) {
            const passwd* pw = ::getpwnam("postgres");
            if (pw == nullptr) pw = ::getpwnam("nobody");
            if (pw == nullptr) throw std::runtime_error("pg_server: as root, needs a user postgres or nobody");
            run_as_ = pw->pw_name;
            if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
                throw std::runtime_error("pg_server: chown of the temporary directory failed");
        }
        child_process init(as_owner({bindir_ + "/initdb", "-D", dir_ + "/data", "-U", "corolock",
                                     "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"}));
        const auto st = init.wait_for(60s);
        if (!st || child_process::exit_code(*st) != 0)
            throw std::runtime_error("pg_server: initdb failed:\n" + init.output());
        for (int attempt = 0;; ++attempt) {
            port_ = pick_free_ports(1).at(0);
            try {
                start();
                break;
            } catch (const std::exception&) {
                if (attempt >= 2) throw;
            }
        }
    } catch (...) {
        if (proc_) proc_->kill9(5s);
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

pg_server::~pg_server() {
    try {
        stop();
    } catch (...) {
    }
    proc_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::vector<std::string> pg_server::as_owner(std::vector<std::string> argv) const {
    if (run_as_.empty()) return argv;
    std::vector<std::string> out{"setpriv", "--reuid=" + run_as_, "--regid=" + run_as_,
                                 "--clear-groups", "--"};
    // setpriv takes a group name only for --regid when it exists; the
    // user's primary group is looked up by name.
    if (const passwd* pw = ::getpwnam(run_as_.c_str()))
        out[2] = "--regid=" + std::to_string(pw->pw_gid);
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

void pg_server::start() {
    proc_ = std::make_unique<child_process>(as_owner(
        {bindir_ + "/postgres", "-D", dir_ + "/data", "-p", std::to_string(port_), "-k", dir_,
         "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
         "-c", "shared_buffers=16MB", "-c", "log_min_messages=fatal"}));
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    const std::string probe = "host=127.0.0.1 port=" + std::to_string(port_) +
                              " user=corolock dbname=postgres connect_timeout=2";
    for (;;) {
        PGconn* c = PQconnectdb(probe.c_str());
        const bool ok = PQstatus(c) == CONNECTION_OK;
        PQfinish(c);
        if (ok) return;
        if (!proc_->running() || std::chrono::steady_clock::now() >= deadline) {
            const auto out = proc_->output();
            earlier_output_ += out;
            proc_->kill9(5s);
            proc_.reset();
            throw std::runtime_error("pg_server: postgres did not start:\n" + out);
        }
        std::this_thread::sleep_for(20ms);
    }
}

std::string pg_server::url() const { return url_via(port_); }

std::string pg_server::url_via(std::uint16_t port) const {
    return "postgresql://corolock@127.0.0.1:" + std::to_string(port) + "/postgres";
}

std::string pg_server::ca_file() const { return dir_ + "/tls/ca.crt"; }
std::string pg_server::wrong_ca_file() const { return dir_ + "/tls/wrong-ca.crt"; }

void pg_server::enable_tls() {
    const std::string tls = dir_ + "/tls";
    fs::create_directories(tls);
    write_test_certificates(tls, "IP:127.0.0.1,DNS:localhost");
    // postgres refuses a key that others may read, and reads it as its own user.
    fs::permissions(tls + "/server.key", fs::perms::owner_read | fs::perms::owner_write);
    if (!run_as_.empty()) {
        const passwd* pw = ::getpwnam(run_as_.c_str());
        for (const char* f : {"/server.key", "/server.crt"})
            if (pw == nullptr || ::chown((tls + f).c_str(), pw->pw_uid, pw->pw_gid) != 0)
                throw std::runtime_error("pg_server: cannot give the TLS files to " + run_as_);
    }
    query("ALTER SYSTEM SET ssl_cert_file = '" + tls + "/server.crt'");
    query("ALTER SYSTEM SET ssl_key_file = '" + tls + "/server.key'");
    query("ALTER SYSTEM SET ssl = on");
    query("SELECT pg_reload_conf()");
    // The reload is asynchronous: ready once a TLS connection is accepted.
    const std::string probe = "host=127.0.0.1 port=" + std::to_string(port_) +
                              " user=corolock dbname=postgres connect_timeout=2 sslmode=require";
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        PGconn* c = PQconnectdb(probe.c_str());
        const bool ok = PQstatus(c) == CONNECTION_OK && PQsslInUse(c) == 1;
        std::string why = PQerrorMessage(c);
        PQfinish(c);
        if (ok) return;
        if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("pg_server: TLS not accepted after the reload: " + why + log());
        std::this_thread::sleep_for(20ms);
    }
}

pid_t pg_server::pid() const noexcept { return proc_ ? proc_->pid() : -1; }

bool pg_server::running() const { return proc_ && proc_->running(); }

pg_server::rows pg_server::query(const std::string& sql) const {
    const std::string info = "host=127.0.0.1 port=" + std::to_string(port_) +
                             " user=corolock dbname=postgres connect_timeout=5";
    PGconn* c = PQconnectdb(info.c_str());
    if (PQstatus(c) != CONNECTION_OK) {
        std::string why = PQerrorMessage(c);
        PQfinish(c);
        throw std::runtime_error("pg_server: connect: " + why);
    }
    PGresult* r = PQexec(c, sql.c_str());
    const auto st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        std::string why = PQresultErrorMessage(r);
        PQclear(r);
        PQfinish(c);
        throw std::runtime_error("pg_server: " + sql + ": " + why);
    }
    rows out;
    for (int i = 0; i < PQntuples(r); ++i) {
        out.emplace_back();
        for (int j = 0; j < PQnfields(r); ++j) {
            if (PQgetisnull(r, i, j))
                out.back().emplace_back(std::nullopt);
            else
                out.back().emplace_back(std::string(PQgetvalue(r, i, j)));
        }
    }
    PQclear(r);
    PQfinish(c);
    return out;
}

void pg_server::kill9() {
    if (!proc_) return;
    if (!proc_->kill9(5s)) throw std::runtime_error("pg_server: postgres survived SIGKILL");
    earlier_output_ += proc_->output();
    proc_.reset();
}

void pg_server::stop() {
    if (!proc_) return;
    if (proc_->running()) {
        proc_->signal(SIGCONT);
        proc_->signal(SIGINT);  // fast shutdown: ends sessions, writes a checkpoint
        if (!proc_->wait_for(15s)) proc_->kill9(5s);
    }
    earlier_output_ += proc_->output();
    proc_.reset();
}

void pg_server::pause() {
    if (!proc_) return;
    proc_->signal(SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (process_state(proc_->pid()) != 'T' && process_state(proc_->pid()) != 't') {
        if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("pg_server: postgres did not stop after SIGSTOP");
        std::this_thread::sleep_for(1ms);
    }
}

void pg_server::resume() {
    if (proc_) proc_->signal(SIGCONT);
}

void pg_server::restart() {
    stop();
    // After a SIGKILL, orphaned backends hold the shared memory until they
    // notice the postmaster's death: start again until they are gone.
    for (int attempt = 0;; ++attempt) {
        try {
            start();
            return;
        } catch (const std::exception&) {
            if (attempt >= 20) throw;
            std::this_thread::sleep_for(250ms);
        }
    }
}

std::string pg_server::log() const { return earlier_output_ + (proc_ ? proc_->output() : ""); }

}  // namespace corolock::test
