#include "support/etcd_server.hpp"

#include "support/child_process.hpp"
#include "support/free_ports.hpp"
#include "support/sys_util.hpp"
#include "support/test_certificates.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace corolock::test {

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using deadline_type = clock_type::time_point;

struct fd_guard {
    int fd;
    ~fd_guard() {
        if (fd >= 0) ::close(fd);
    }
};

// Joins the chunks of a chunked body; throws on a malformed one.
std::string dechunk(const std::string& raw) {
    std::string out;
    std::size_t pos = 0;
    for (int chunks = 0; chunks < 1'000'000; ++chunks) {
        const auto eol = raw.find("\r\n", pos);
        if (eol == std::string::npos) throw std::runtime_error("truncated chunked body");
        const auto size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
        if (size == 0) return out;
        if (eol + 2 + size > raw.size()) throw std::runtime_error("truncated chunk");
        out.append(raw, eol + 2, size);
        pos = eol + 2 + size + 2;
    }
    throw std::runtime_error("too many chunks");
}

// One HTTP/1.1 request with "Connection: close", read to EOF.
http_answer http_request(std::uint16_t port, const std::string& method, const std::string& path,
                         const std::string& body, const std::string& token,
                         std::chrono::milliseconds limit) {
    const auto deadline = clock_type::now() + limit;
    const std::string where = "127.0.0.1:" + std::to_string(port) + path;
    fd_guard g{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
    if (g.fd < 0) throw sys_error("socket", errno);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    try {
        if (::connect(g.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
            if (errno != EINPROGRESS) throw sys_error("connect", errno);
            wait_fd(g.fd, POLLOUT, deadline, "connecting to etcd");
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(g.fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) throw sys_error("connect", err);
        }
        std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
        if (!token.empty()) req += "Authorization: " + token + "\r\n";
        if (method == "POST") {
            req += "Content-Type: application/json\r\nContent-Length: ";
            req += std::to_string(body.size());
            req += "\r\n";
        }
        req += "\r\n";
        req += body;
        std::size_t sent = 0;
        while (sent < req.size()) {
            const ssize_t n = ::send(g.fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<std::size_t>(n);
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                wait_fd(g.fd, POLLOUT, deadline, "sending to etcd");
            } else if (n < 0 && errno != EINTR) {
                throw sys_error("send", errno);
            }
        }
        std::string raw;
        char buf[16384];
        while (true) {
            wait_fd(g.fd, POLLIN, deadline, "waiting for etcd");
            const ssize_t n = ::recv(g.fd, buf, sizeof buf, 0);
            if (n > 0) {
                raw.append(buf, static_cast<std::size_t>(n));
                if (raw.size() > (64u << 20)) throw std::runtime_error("answer too large");
            } else if (n == 0) {
                break;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                throw sys_error("recv", errno);
            }
        }
        const auto head_end = raw.find("\r\n\r\n");
        if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos)
            throw std::runtime_error("not an HTTP answer");
        http_answer a;
        a.status = static_cast<unsigned>(std::stoul(raw.substr(9, 3)));
        std::string head = raw.substr(0, head_end);
        std::transform(head.begin(), head.end(), head.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        a.body = raw.substr(head_end + 4);
        if (head.find("transfer-encoding: chunked") != std::string::npos) a.body = dechunk(a.body);
        return a;
    } catch (const std::exception& e) {
        throw std::runtime_error("etcd_server " + method + " " + where + ": " + e.what());
    }
}

std::string peer_url(std::uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

}  // namespace

etcd_cluster::etcd_cluster(etcd_server_options opts) : opts_(std::move(opts)) {
    const char* env = std::getenv("COROLOCK_ETCD");
    etcd_bin_ = find_executable(env != nullptr && *env != '\0' ? env : "etcd");
    if (etcd_bin_.empty())
        throw std::runtime_error("etcd_server: etcd not found; put it on PATH or set COROLOCK_ETCD");
    if (opts_.members == 0) throw std::runtime_error("etcd_server: no members");
    dir_ = make_temp_dir("etcd");
    cluster_token_ = "corolock-" + dir_.substr(dir_.rfind('-') + 1);
    members_.resize(opts_.members);
    for (std::size_t i = 0; i < members_.size(); ++i) {
        // Built by push_back, not `"m" + std::string&&` nor `= "m"`: g++ 12
        // at -O3 reports a false -Wrestrict for either (GCC bug 105329).
        std::string name;
        name.push_back('m');
        name += std::to_string(i);
        members_[i].name = std::move(name);
    }
    try {
        if (opts_.tls) generate_tls_files();
        // Another process can take a port between our check and etcd's bind:
        // start again on new ports, a bounded number of times.
        constexpr int attempts = 5;
        for (int attempt = 0; attempt < attempts; ++attempt) {
            if (start_all(clock_type::now() + opts_.start_timeout)) return;
        }
        throw std::runtime_error("etcd_server: ports kept being taken, attempt after attempt\n" +
                                 log_tail(0));
    } catch (...) {
        for (std::size_t i = 0; i < members_.size(); ++i) drop(i);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        throw;
    }
}

etcd_cluster::~etcd_cluster() {
    for (std::size_t i = 0; i < members_.size(); ++i) drop(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

bool etcd_cluster::start_all(deadline_type deadline) {
    const auto ports = pick_free_ports(members_.size() * 3);
    for (std::size_t i = 0; i < members_.size(); ++i) {
        members_[i].client_port = ports[3 * i];
        members_[i].peer_port = ports[3 * i + 1];
        members_[i].tls_port = opts_.tls ? ports[3 * i + 2] : 0;
        std::error_code ec;
        std::filesystem::remove_all(dir_ + "/" + members_[i].name, ec);
    }
    for (std::size_t i = 0; i < members_.size(); ++i) launch(i, false);
    auto nap = 5ms;
    while (true) {
        bool all = true;
        for (std::size_t i = 0; i < members_.size(); ++i) {
            if (!members_[i].proc->running()) {
                const auto out = members_[i].proc->output();
                for (std::size_t k = 0; k < members_.size(); ++k) drop(k);
                if (out.find("address already in use") != std::string::npos) return false;
                throw std::runtime_error("etcd_server: member " + members_[i].name +
                                         " exited during startup:\n" + out.substr(0, 4096));
            }
            all = all && healthy(i);
        }
        if (all) return true;
        if (clock_type::now() >= deadline) {
            const std::string tail = log_tail(0);
            for (std::size_t k = 0; k < members_.size(); ++k) drop(k);
            throw std::runtime_error("etcd_server: not healthy within " +
                                     std::to_string(opts_.start_timeout.count()) + " ms\n" + tail);
        }
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::milliseconds(50));
    }
}

void etcd_cluster::launch(std::size_t i, bool existing) {
    auto& m = members_[i];
    std::string initial;
    for (const auto& o : members_) {
        if (!initial.empty()) initial += ',';
        initial += o.name + "=" + peer_url(o.peer_port);
    }
    std::string client = peer_url(m.client_port);
    if (opts_.tls) client += ",https://127.0.0.1:" + std::to_string(m.tls_port);
    std::vector<std::string> argv{
        etcd_bin_,
        "--name", m.name,
        "--data-dir", dir_ + "/" + m.name,
        "--listen-client-urls", client,
        "--advertise-client-urls", client,
        "--listen-peer-urls", peer_url(m.peer_port),
        "--initial-advertise-peer-urls", peer_url(m.peer_port),
        "--initial-cluster", initial,
        "--initial-cluster-state", existing ? "existing" : "new",
        "--initial-cluster-token", cluster_token_,
        // Elections a busy machine does not set off (etcd_server_options);
        // small snapshots; quiet.
        "--heartbeat-interval", std::to_string(opts_.heartbeat_ms),
        "--election-timeout", std::to_string(opts_.election_timeout_ms),
        "--snapshot-count", "5000",
        "--logger", "zap",
        "--log-level", "error",
    };
    if (opts_.tls)
        argv.insert(argv.end(), {"--cert-file", dir_ + "/server.crt", "--key-file", dir_ + "/server.key"});
    if (opts_.auth_token_ttl_seconds > 0)
        argv.insert(argv.end(), {"--auth-token-ttl", std::to_string(opts_.auth_token_ttl_seconds)});
    argv.insert(argv.end(), opts_.extra_args.begin(), opts_.extra_args.end());
    m.proc = std::make_unique<child_process>(argv);
    m.paused = false;
}

bool etcd_cluster::healthy(std::size_t i) const {
    try {
        const auto a = http_request(members_[i].client_port, "GET", "/health", "", "", 1s);
        return a.status == 200 && a.body.find("\"true\"") != std::string::npos;
    } catch (const std::exception&) {
        return false;
    }
}

void etcd_cluster::drop(std::size_t i) noexcept {
    auto& m = members_[i];
    if (!m.proc) return;
    try {
        if (m.proc->running()) {
            m.proc->signal(SIGTERM);
            m.proc->signal(SIGCONT);
            if (!m.proc->wait_for(5s)) m.proc->kill9(2s);
        }
        m.earlier_output += m.proc->output();
    } catch (...) {
    }
    m.proc.reset();
    m.paused = false;
}

std::string etcd_cluster::endpoint(std::size_t i) const {
    return "127.0.0.1:" + std::to_string(members_.at(i).client_port);
}

std::vector<std::string> etcd_cluster::endpoints() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < members_.size(); ++i) out.push_back(endpoint(i));
    return out;
}

std::string etcd_cluster::url(std::size_t first) const {
    std::string out = "etcd://";
    for (std::size_t k = 0; k < members_.size(); ++k) {
        if (k != 0) out += ',';
        out += endpoint((first + k) % members_.size());
    }
    return out;
}

std::string etcd_cluster::tls_endpoint(std::size_t i) const {
    return "127.0.0.1:" + std::to_string(members_.at(i).tls_port);
}

// A test CA, a certificate it signs for 127.0.0.1 only (not localhost), and an
// unrelated CA, made with the openssl command ($COROLOCK_OPENSSL or PATH).
void etcd_cluster::generate_tls_files() const {
    // 127.0.0.1 only: a test reaches the server as localhost to see the
    // host name refused.
    write_test_certificates(dir_, "IP:127.0.0.1");
}

std::uint16_t etcd_cluster::client_port(std::size_t i) const { return members_.at(i).client_port; }

pid_t etcd_cluster::pid(std::size_t i) const noexcept {
    return i < members_.size() && members_[i].proc ? members_[i].proc->pid() : -1;
}

bool etcd_cluster::running(std::size_t i) const {
    return members_.at(i).proc && members_[i].proc->running();
}

http_answer etcd_cluster::post(std::size_t i, const std::string& path, const std::string& body,
                               const std::string& token) const {
    return http_request(members_.at(i).client_port, "POST", path, body, token, opts_.admin_timeout);
}

http_answer etcd_cluster::get(std::size_t i, const std::string& path) const {
    return http_request(members_.at(i).client_port, "GET", path, "", "", opts_.admin_timeout);
}

std::optional<std::size_t> etcd_cluster::leader_seen_by(std::size_t i) const {
    // Each member's own id is the member_id of its header; the leader field
    // names one of them.
    try {
        std::vector<std::string> ids(members_.size());
        std::string leader;
        for (std::size_t k = 0; k < members_.size(); ++k) {
            if (!running(k) || members_[k].paused) continue;
            const auto a = post(k, "/v3/maintenance/status");
            if (a.status != 200) continue;
            const auto v = boost::json::parse(a.body).as_object();
            ids[k] = std::string(v.at("header").as_object().at("member_id").as_string());
            if (k == i && v.contains("leader")) leader = std::string(v.at("leader").as_string());
        }
        for (std::size_t k = 0; k < ids.size(); ++k)
            if (!leader.empty() && ids[k] == leader) return k;
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

std::size_t etcd_cluster::leader() const {
    const auto deadline = clock_type::now() + opts_.start_timeout;
    while (clock_type::now() < deadline) {
        for (std::size_t i = 0; i < members_.size(); ++i) {
            if (!running(i) || members_[i].paused) continue;
            if (auto l = leader_seen_by(i)) return *l;
        }
        std::this_thread::sleep_for(20ms);
    }
    throw std::runtime_error("etcd_server: no leader elected");
}

void etcd_cluster::enable_auth(const std::string& password) {
    namespace json = boost::json;
    const auto call = [&](const std::string& path, const json::object& body) {
        const auto a = post(0, path, json::serialize(body));
        if (a.status != 200)
            throw std::runtime_error("etcd_server: " + path + ": HTTP " + std::to_string(a.status) +
                                     ": " + a.body);
    };
    call("/v3/auth/user/add", {{"name", "root"}, {"password", password}});
    call("/v3/auth/role/add", {{"name", "root"}});
    call("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}});
    call("/v3/auth/enable", {});
}

std::string etcd_cluster::authenticate(std::size_t i, const std::string& user,
                                       const std::string& password) const {
    const auto a = post(i, "/v3/auth/authenticate",
                        boost::json::serialize(boost::json::object{{"name", user}, {"password", password}}));
    if (a.status != 200) throw std::runtime_error("etcd_server: authenticate: " + a.body);
    return std::string(boost::json::parse(a.body).as_object().at("token").as_string());
}

void etcd_cluster::kill9(std::size_t i) {
    auto& m = members_.at(i);
    if (!m.proc) return;
    if (!m.proc->kill9(5s))
        throw std::runtime_error("etcd_server: pid " + std::to_string(m.proc->pid()) +
                                 " survived SIGKILL for 5 s");
    m.earlier_output += m.proc->output();
    m.proc.reset();
    m.paused = false;
}

void etcd_cluster::stop(std::size_t i) { drop(i); }

void etcd_cluster::pause(std::size_t i) {
    auto& m = members_.at(i);
    if (!m.proc || m.paused) return;
    m.paused = true;
    const char state = m.proc->stop();
    if (state != 'T' && state != 't')
        throw std::runtime_error("etcd_server: member did not stop after SIGSTOP");
}

void etcd_cluster::resume(std::size_t i) {
    auto& m = members_.at(i);
    if (!m.proc || !m.paused) return;
    m.proc->signal(SIGCONT);
    m.paused = false;
}

void etcd_cluster::restart(std::size_t i) {
    drop(i);
    launch(i, true);
    const auto deadline = clock_type::now() + opts_.start_timeout;
    while (!healthy(i)) {
        if (!members_[i].proc->running() || clock_type::now() >= deadline)
            throw std::runtime_error("etcd_server: member " + members_[i].name +
                                     " did not come back:\n" + log_tail(i));
        std::this_thread::sleep_for(20ms);
    }
}

std::string etcd_cluster::log_tail(std::size_t i, std::size_t max_bytes) const {
    const auto& m = members_.at(i);
    std::string out = m.earlier_output + (m.proc ? m.proc->output() : std::string());
    if (out.size() > max_bytes) out = out.substr(out.size() - max_bytes);
    return "--- etcd " + m.name + " output ---\n" + out;
}

}  // namespace corolock::test
