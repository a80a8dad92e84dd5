#include "support/zk_server.hpp"

#include "support/child_process.hpp"
#include "support/free_ports.hpp"
#include "support/sys_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace corolock::test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// A four-letter word to 127.0.0.1:port; the whole answer (the server closes
// the connection after it), or "" when it cannot be had within a second.
std::string four_letters(std::uint16_t port, const char* word) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::send(fd, word, 4, MSG_NOSIGNAL) == 4) {
        char buf[1024];
        for (int i = 0; i < 64; ++i) {
            const auto n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            out.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return out;
}

// Whether another socket is bound to 127.0.0.1:port: a bind with
// SO_REUSEADDR (as ZooKeeper binds) fails with EADDRINUSE only then.
bool port_taken(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    const int err = errno;
    ::close(fd);
    return rc != 0 && err == EADDRINUSE;
}

// A server's output saying it could not bind one of its ports (the client
// port: it exits; the election port: it exits after a few tries; the
// quorum port of a server elected leader: it logs and stays up, leading
// nothing).
bool says_address_in_use(const std::string& out) {
    return out.find("Address already in use") != std::string::npos ||
           out.find("BindException") != std::string::npos;
}

std::string tail_of(const std::string& s, std::size_t max_bytes = 4096) {
    return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace

zk_ensemble::zk_ensemble(zk_server_options opts) : opts_(opts) {
    java_ = find_executable(env_or("COROLOCK_JAVA", "java"));
    jar_ = env_or("COROLOCK_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar");
    if (java_.empty() || !std::filesystem::exists(jar_))
        throw std::runtime_error("zk_server: java or " + jar_ +
                                 " not found; run scripts/setup.sh (zookeeper, "
                                 "default-jre-headless)");
    if (opts_.servers == 0) throw std::runtime_error("zk_server: no servers");
    dir_ = make_temp_dir("zk");
    servers_.resize(opts_.servers);
    try {
        // Another process can take a port between pick_free_ports' check
        // and a server's bind: each such loss costs one more attempt, on
        // new ports (as redis_server and etcd_cluster do).
        constexpr int attempts = 5;
        std::string why;
        for (int attempt = 0; attempt < attempts; ++attempt)
            if (start_all(clock_type::now() + opts_.start_timeout, why)) return;
        throw std::runtime_error("zk_server: ports kept being taken, attempt after attempt\n" +
                                 why);
    } catch (...) {
        for (std::size_t i = 0; i < servers_.size(); ++i) drop(i);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        throw;
    }
}

zk_ensemble::~zk_ensemble() {
    for (std::size_t i = 0; i < servers_.size(); ++i) drop(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

// One attempt: new ports, fresh data directories, every server launched;
// true once each of them serves clients (its "srvr" answer reports a mode:
// a protocol answer, not a pause). False, with every server dropped and
// `why` set, when a server could not bind one of its ports; throws when a
// server exits for another reason or they do not serve by the deadline.
bool zk_ensemble::start_all(clock_type::time_point deadline, std::string& why) {
    const auto ports = pick_free_ports(servers_.size() * 3);
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        servers_[i].client_port = ports[3 * i];
        servers_[i].peer_port = ports[3 * i + 1];
        servers_[i].election_port = ports[3 * i + 2];
        std::error_code ec;
        std::filesystem::remove_all(dir_ + "/s" + std::to_string(i + 1), ec);
    }
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        write_config(i);
        launch(i);
    }
    const auto drop_all = [&] {
        for (std::size_t k = 0; k < servers_.size(); ++k) drop(k);
    };
    auto nap = 5ms;
    while (true) {
        bool all = true;
        for (std::size_t i = 0; i < servers_.size(); ++i) {
            auto& s = servers_[i];
            // running() first: once it reports an exit, output() is complete.
            const bool alive = s.proc->running();
            const std::string out = s.proc->output();
            const bool ports_lost = says_address_in_use(out) ||
                                    (!alive && (port_taken(s.client_port) ||
                                                port_taken(s.peer_port) ||
                                                port_taken(s.election_port)));
            if (ports_lost) {
                std::ostringstream msg;
                msg << "server " << i << " could not bind its ports (" << s.client_port << ", "
                    << s.peer_port << ", " << s.election_port << "):\n" << tail_of(out);
                why = msg.str();
                drop_all();
                return false;
            }
            if (!alive) {
                std::ostringstream msg;
                msg << "zk_server: server " << i << " exited during startup:\n" << tail_of(out);
                drop_all();
                throw std::runtime_error(msg.str());
            }
            all = all && mode(i).has_value();
        }
        if (all) return true;
        const auto now = clock_type::now();
        if (now >= deadline) {
            std::ostringstream msg;
            msg << "zk_server: not serving within " << opts_.start_timeout.count() << " ms\n"
                << log_tail(0);
            drop_all();
            throw std::runtime_error(msg.str());
        }
        std::this_thread::sleep_for(std::min<clock_type::duration>(nap, deadline - now));
        nap = std::min(nap * 2, std::chrono::milliseconds(50));
    }
}

void zk_ensemble::write_config(std::size_t i) const {
    const auto data = dir_ + "/s" + std::to_string(i + 1);
    std::filesystem::create_directories(data);
    std::ofstream cfg(data + "/zoo.cfg");
    cfg << "tickTime=" << opts_.tick_ms << "\n"
        // Generous limits for a follower to sync (10 s) and to stay in step
        // (3 s) with the leader: a busy machine that stalls a server for a
        // second must not end the leadership (a spurious election). A
        // killed server's connections close at once, so failover does not
        // wait for them.
        << "initLimit=50\nsyncLimit=15\n"
        << "dataDir=" << data << "\n"
        << "clientPort=" << servers_[i].client_port << "\n"
        << "clientPortAddress=127.0.0.1\n"
        << "maxClientCnxns=0\n"
        << "minSessionTimeout=" << 2 * opts_.tick_ms << "\n"
        << "maxSessionTimeout=" << 300 * opts_.tick_ms << "\n"
        << "admin.enableServer=false\n"
        << "4lw.commands.whitelist=srvr,ruok,dump\n"
        << "forceSync=no\n"
        // The ensemble removes empty lock directories (container nodes)
        // within a second, so that tests see them go.
        << "znode.container.checkIntervalMs=1000\n";
    if (servers_.size() > 1) {
        for (std::size_t k = 0; k < servers_.size(); ++k)
            cfg << "server." << k + 1 << "=127.0.0.1:" << servers_[k].peer_port << ":"
                << servers_[k].election_port << "\n";
        std::ofstream(data + "/myid") << i + 1 << "\n";
    }
}

void zk_ensemble::launch(std::size_t i) {
    const auto data = dir_ + "/s" + std::to_string(i + 1);
    std::string cp = jar_;
    // A logger binding, when Debian ships it: warnings reach log_tail().
    if (std::filesystem::exists("/usr/share/java/slf4j-simple.jar"))
        cp += ":/usr/share/java/slf4j-simple.jar";
    servers_[i].proc = std::make_unique<child_process>(std::vector<std::string>{
        java_, "-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.log.dir=" + data,
        "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", data + "/zoo.cfg"});
    servers_[i].paused = false;
}

void zk_ensemble::drop(std::size_t i) noexcept {
    auto& s = servers_[i];
    if (!s.proc) return;
    if (s.paused) s.proc->signal(SIGCONT);
    s.proc->kill9();
    s.proc.reset();
    s.paused = false;
}

std::string zk_ensemble::hosts() const {
    std::string out;
    for (const auto& s : servers_) {
        if (!out.empty()) out += ',';
        out += "127.0.0.1:" + std::to_string(s.client_port);
    }
    return out;
}

std::string zk_ensemble::url(const std::string& root) const { return "zk://" + hosts() + root; }

pid_t zk_ensemble::pid(std::size_t i) const noexcept {
    const auto& s = servers_[i];
    return s.proc ? s.proc->pid() : -1;
}

bool zk_ensemble::running(std::size_t i) const {
    const auto& s = servers_.at(i);
    return s.proc && s.proc->running();
}

std::optional<std::string> zk_ensemble::mode(std::size_t i) const {
    if (!running(i) || servers_[i].paused) return std::nullopt;
    const auto answer = four_letters(servers_[i].client_port, "srvr");
    const auto at = answer.find("Mode: ");
    if (at == std::string::npos) return std::nullopt;
    const auto end = answer.find('\n', at);
    return answer.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

bool zk_ensemble::wait_serving(std::chrono::milliseconds limit) const {
    const auto deadline = clock_type::now() + limit;
    while (true) {
        bool all = true;
        for (std::size_t i = 0; i < servers_.size(); ++i) {
            if (!running(i)) continue;
            all = all && mode(i).has_value();
        }
        if (all) return true;
        if (clock_type::now() >= deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
}

std::size_t zk_ensemble::leader() const {
    const auto deadline = clock_type::now() + opts_.start_timeout;
    while (true) {
        for (std::size_t i = 0; i < servers_.size(); ++i) {
            const auto m = mode(i);
            if (m && (*m == "leader" || *m == "standalone")) return i;
        }
        if (clock_type::now() >= deadline) throw std::runtime_error("zk_server: no leader");
        std::this_thread::sleep_for(20ms);
    }
}

std::vector<std::string> zk_ensemble::ephemerals() const {
    const auto answer = four_letters(servers_.at(leader()).client_port, "dump");
    if (answer.find("ephemeral") == std::string::npos)
        throw std::runtime_error("zk_server: no answer to dump: " + answer.substr(0, 200));
    std::vector<std::string> out;
    std::size_t pos = answer.find("ephemeral");
    while (pos < answer.size()) {
        const auto end = std::min(answer.find('\n', pos), answer.size());
        auto line = answer.substr(pos, end - pos);
        const auto first = line.find_first_not_of(" \t");
        if (first != std::string::npos && line[first] == '/') out.push_back(line.substr(first));
        pos = end + 1;
    }
    return out;
}

void zk_ensemble::kill9(std::size_t i) {
    auto& s = servers_.at(i);
    if (!s.proc) return;
    if (s.paused) s.proc->signal(SIGCONT);
    s.proc->kill9();
    s.paused = false;
}

void zk_ensemble::pause(std::size_t i) {
    auto& s = servers_.at(i);
    if (!s.proc || s.paused) return;
    s.paused = true;
    const char state = s.proc->stop();
    if (state != 'T' && state != 't')
        throw std::runtime_error("zk_server: server did not stop after SIGSTOP");
}

void zk_ensemble::resume(std::size_t i) {
    auto& s = servers_.at(i);
    if (!s.proc || !s.paused) return;
    s.proc->signal(SIGCONT);
    s.paused = false;
}

void zk_ensemble::restart(std::size_t i) {
    if (running(i)) kill9(i);
    launch(i);
    if (!wait_serving(opts_.start_timeout))
        throw std::runtime_error("zk_server: server " + std::to_string(i) +
                                 " not serving after a restart\n" + log_tail(i));
}

std::string zk_ensemble::log_tail(std::size_t i, std::size_t max_bytes) const {
    const auto& s = servers_.at(i);
    if (!s.proc) return {};
    const auto out = s.proc->output();
    return out.size() > max_bytes ? out.substr(out.size() - max_bytes) : out;
}

}  // namespace corolock::test
