#include "support/redis_server.hpp"

#include "support/child_process.hpp"
#include "support/free_ports.hpp"
#include "support/sys_util.hpp"
#include "support/test_certificates.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

namespace corolock::test {

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using deadline_type = clock_type::time_point;

// Owns one file descriptor.
class unique_fd {
public:
    explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
    ~unique_fd() { reset(); }
    unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
    unique_fd& operator=(unique_fd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = other.release();
        }
        return *this;
    }
    int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_;
};

// ---------------------------------------------------------------------------
// The admin connection: a minimal blocking RESP2 client, independent of the
// library under test. The socket is non-blocking and every wait goes through
// poll() against one deadline per command, so a paused or dead server costs
// at most admin_timeout, however the bytes trickle in.

unique_fd connect_loopback(std::uint16_t port, deadline_type deadline) {
    unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) throw sys_error("socket", errno);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const std::string where = "connect 127.0.0.1:" + std::to_string(port);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        if (errno != EINPROGRESS) throw sys_error(where, errno);
        wait_fd(fd.get(), POLLOUT, deadline, ("in " + where).c_str());
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err != 0) throw sys_error(where, err);
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

void send_all(int fd, const std::string& data, deadline_type deadline) {
    std::size_t sent = 0;
    while (sent < data.size()) {
        const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_fd(fd, POLLOUT, deadline, "sending a command");
        } else if (n < 0 && errno != EINTR) {
            throw sys_error("send", errno);
        }
    }
}

// Appends piece by piece: GCC 12 at -O3 misreports `"$" + std::to_string(n)`
// as an overlapping memcpy (-Wrestrict, GCC bug 105329).
std::string encode(const std::vector<std::string>& args) {
    std::string out;
    out += '*';
    out += std::to_string(args.size());
    out += "\r\n";
    for (const auto& a : args) {
        out += '$';
        out += std::to_string(a.size());
        out += "\r\n";
        out += a;
        out += "\r\n";
    }
    return out;
}

class reply_reader {
public:
    reply_reader(int fd, deadline_type deadline) : fd_(fd), deadline_(deadline) {}

    // Reads one whole reply, flattened into out. An error reply, even one
    // nested in an array, is thrown only after the whole reply is read, so
    // the connection stays in step and can be reused.
    void read(std::vector<std::string>& out) {
        std::optional<std::string> error;
        read_value(out, error, 0);
        if (error) throw redis_reply_error(*error);
        if (pos_ != buf_.size())  // RESP2 without pub/sub sends nothing unasked
            throw std::runtime_error("unexpected bytes after the reply");
    }

private:
    void read_value(std::vector<std::string>& out, std::optional<std::string>& error, int depth) {
        if (depth > 32) throw std::runtime_error("reply nested too deeply");
        const std::string l = line();
        if (l.empty()) throw std::runtime_error("malformed reply: empty line");
        const std::string rest = l.substr(1);
        switch (l[0]) {
            case '+':
            case ':':
                out.push_back(rest);
                return;
            case '-':
                if (!error) error = rest;
                return;
            case '$': {
                const long long n = number(rest);
                if (n < 0) {
                    out.emplace_back();  // nil bulk string
                    return;
                }
                if (n > 512LL * 1024 * 1024) throw std::runtime_error("bulk string too long");
                out.push_back(bytes(static_cast<std::size_t>(n)));
                return;
            }
            case '*': {
                const long long n = number(rest);
                for (long long i = 0; i < n; ++i) read_value(out, error, depth + 1);
                return;  // n < 0: a nil array adds nothing
            }
            default:
                throw std::runtime_error("unexpected reply type '" + l.substr(0, 1) + "'");
        }
    }

    static long long number(const std::string& s) {
        long long v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || end != s.data() + s.size())
            throw std::runtime_error("malformed length in reply: " + s);
        return v;
    }

    void fill() {
        wait_fd(fd_, POLLIN, deadline_, "waiting for a reply");
        char tmp[16384];
        const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
        if (n > 0) {
            buf_.append(tmp, static_cast<std::size_t>(n));
        } else if (n == 0) {
            throw std::runtime_error("connection closed by the server");
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            throw sys_error("recv", errno);
        }
    }

    std::string line() {
        while (true) {
            const auto end = buf_.find("\r\n", pos_);
            if (end != std::string::npos) {
                std::string l = buf_.substr(pos_, end - pos_);
                pos_ = end + 2;
                return l;
            }
            if (buf_.size() - pos_ > (1u << 20)) throw std::runtime_error("reply line too long");
            fill();
        }
    }

    std::string bytes(std::size_t n) {
        while (buf_.size() - pos_ < n + 2) fill();
        if (buf_.compare(pos_ + n, 2, "\r\n") != 0)
            throw std::runtime_error("malformed bulk string in reply");
        std::string s = buf_.substr(pos_, n);
        pos_ += n + 2;
        return s;
    }

    int fd_;
    deadline_type deadline_;
    std::string buf_;
    std::size_t pos_ = 0;
};

std::vector<std::string> roundtrip(int fd, const std::vector<std::string>& args,
                                   deadline_type deadline) {
    send_all(fd, encode(args), deadline);
    std::vector<std::string> out;
    reply_reader(fd, deadline).read(out);
    return out;
}

// A kept connection is reusable if nothing is waiting on it: readable means
// the server closed it (killed, restarted, CLIENT KILL) or sent stray bytes.
bool still_usable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
}

// ---------------------------------------------------------------------------
// Files and processes.

std::uintmax_t file_size_or_zero(const std::string& path) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(path, ec);
    return ec ? 0 : n;
}

std::string read_file_from(const std::string& path, std::uintmax_t offset) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    in.seekg(static_cast<std::streamoff>(offset));
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string tail(const std::string& s, std::size_t max_bytes) {
    return s.size() <= max_bytes ? s : s.substr(s.size() - max_bytes);
}

std::string describe_status(std::optional<int> st) {
    if (!st) return "still running";
    if (WIFEXITED(*st)) return "exit status " + std::to_string(WEXITSTATUS(*st));
    if (WIFSIGNALED(*st)) return std::string("killed by signal ") + ::strsignal(WTERMSIG(*st));
    return "wait status " + std::to_string(*st);
}

}  // namespace

// ---------------------------------------------------------------------------

bool restricted_user::enabled() {
    const char* env = std::getenv("COROLOCK_TEST_AS_ACL_USER");
    return env != nullptr && std::string_view(env) == "1";
}

std::vector<std::string> restricted_user::documented_rules(const std::string& pass) {
    const std::string doc_path = std::string(COROLOCK_SOURCE_DIR) + "/docs/security.md";
    std::ifstream doc(doc_path);
    std::string line;
    bool in_section = false, in_block = false;
    std::vector<std::string> words;
    while (std::getline(doc, line)) {
        if (line.rfind("## ", 0) == 0) in_section = line == "## The minimal ACL";
        if (!in_section) continue;
        if (line.rfind("```", 0) == 0) {
            if (in_block) break;  // the section's first block is the ACL
            in_block = true;
            continue;
        }
        if (!in_block) continue;
        std::istringstream in(line);
        for (std::string w; in >> w;) words.push_back(w == ">PASSWORD" ? ">" + pass : w);
    }
    const std::vector<std::string> head{"ACL", "SETUSER", "locks"};
    if (words.size() <= head.size() || !std::equal(head.begin(), head.end(), words.begin()))
        throw std::runtime_error(
            "no \"ACL SETUSER locks ...\" block under \"## The minimal ACL\" in " + doc_path);
    return {words.begin() + static_cast<std::ptrdiff_t>(head.size()), words.end()};
}

redis_server::redis_server(redis_server_options opts)
    : opts_(std::move(opts)), admin_timeout_(opts_.admin_timeout) {
    const char* env = std::getenv("COROLOCK_REDIS_SERVER");
    redis_bin_ = find_executable(env != nullptr && *env != '\0' ? env : "redis-server");
    if (redis_bin_.empty())
        throw std::runtime_error(
            "redis_server: redis-server not found; put it on PATH or set COROLOCK_REDIS_SERVER");
    // Absolute: redis-server resolves --logfile before it changes to --dir.
    dir_ = make_temp_dir("redis");
    log_file_ = dir_ + "/redis.log";
    try {
        tls_dir_ = opts_.tls_files_from.empty() ? dir_ : opts_.tls_files_from;
        // A certificate of its own: the first server's, or one with other names.
        cert_dir_ = opts_.tls_files_from.empty() || !opts_.tls_names.empty() ? dir_ : tls_dir_;
        if (opts_.tls && cert_dir_ == dir_) generate_tls_files();
        // Another process can take the port between our check and the
        // server's bind; each such loss costs one more attempt.
        constexpr int attempts = 5;
        for (int i = 0; i < attempts; ++i) {
            const auto ports = pick_free_ports(opts_.tls ? 2 : 1);
            port_ = ports[0];
            tls_port_ = opts_.tls ? ports[1] : 0;
            if (start_once(clock_type::now() + opts_.start_timeout) == start_result::ready) return;
        }
        throw std::runtime_error("redis_server: every port tried was taken\n" + log_tail());
    } catch (...) {
        drop_process();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        throw;
    }
}

redis_server::~redis_server() {
    close_admin();
    drop_process();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);  // best effort; a leftover temp dir is harmless
}

std::string redis_server::url() const {
    if (opts_.tls) return "rediss://127.0.0.1:" + std::to_string(tls_port_);
    return "redis://127.0.0.1:" + std::to_string(port_);
}

pid_t redis_server::pid() const noexcept { return proc_ ? proc_->pid() : -1; }

std::string redis_server::ca_file() const { return opts_.tls ? tls_dir_ + "/ca.crt" : std::string(); }

std::string redis_server::wrong_ca_file() const {
    return opts_.tls ? tls_dir_ + "/wrong-ca.crt" : std::string();
}

bool redis_server::running() const { return proc_ && proc_->running(); }

void redis_server::set_admin_timeout(std::chrono::milliseconds t) {
    std::lock_guard lock(admin_mu_);
    admin_timeout_ = t;
}

namespace {

// AUTH as the default user when it has a password, else as the ACL user if
// there is one; with neither, the default user needs no AUTH.
std::optional<std::vector<std::string>> auth_command(const redis_server_options& o) {
    if (!o.password.empty()) return std::vector<std::string>{"AUTH", o.password};
    if (!o.acl_user.empty() && !o.acl_password.empty())
        return std::vector<std::string>{"AUTH", o.acl_user, o.acl_password};
    return std::nullopt;
}

unique_fd open_admin(std::uint16_t port, const redis_server_options& o, deadline_type deadline) {
    unique_fd fd = connect_loopback(port, deadline);
    if (auto auth = auth_command(o)) roundtrip(fd.get(), *auth, deadline);
    return fd;
}

}  // namespace

std::vector<std::string> redis_server::cmd(const std::vector<std::string>& args) const {
    std::lock_guard lock(admin_mu_);
    const auto deadline = clock_type::now() + admin_timeout_;
    if (admin_fd_ >= 0 && !still_usable(admin_fd_)) {
        ::close(admin_fd_);
        admin_fd_ = -1;
    }
    try {
        if (admin_fd_ < 0) admin_fd_ = open_admin(port_, opts_, deadline).release();
        return roundtrip(admin_fd_, args, deadline);
    } catch (const redis_reply_error&) {
        throw;  // the reply was read whole: the connection is still good
    } catch (const std::exception& e) {
        // Timed out or broken: the connection's state is unknown, so drop it.
        // (A command that timed out may still run once a paused server resumes.)
        if (admin_fd_ >= 0) ::close(admin_fd_);
        admin_fd_ = -1;
        const std::string name = args.empty() ? std::string("(empty)") : args.front();
        throw std::runtime_error("redis_server 127.0.0.1:" + std::to_string(port_) + " " + name +
                                 ": " + e.what());
    }
}

std::string redis_server::cmd1(const std::vector<std::string>& args) const {
    auto r = cmd(args);
    return r.empty() ? std::string() : std::move(r.front());
}

void redis_server::close_admin() const noexcept {
    std::lock_guard lock(admin_mu_);
    if (admin_fd_ >= 0) ::close(admin_fd_);
    admin_fd_ = -1;
}

redis_server::start_result redis_server::start_once(deadline_type deadline) {
    std::vector<std::string> argv{redis_bin_};
    const bool sentinel = !opts_.sentinel_config.empty();
    if (sentinel) {
        // A Sentinel's config file must come first, and be writable.
        const std::string conf = dir_ + "/sentinel.conf";
        if (!std::filesystem::exists(conf)) {
            std::ofstream out(conf);
            for (const auto& line : opts_.sentinel_config) out << line << '\n';
            if (!out) throw std::runtime_error("redis_server: cannot write " + conf);
        }
        argv.insert(argv.end(), {conf, "--sentinel"});
    }
    argv.insert(argv.end(), {"--port", std::to_string(port_),
                                  "--bind", "127.0.0.1",
                                  "--save", "",
                                  "--appendonly", "no",
                                  "--daemonize", "no",
                                  "--dir", dir_,
                                  "--logfile", log_file_});
    if (opts_.tls) {
        argv.insert(argv.end(), {"--tls-port", std::to_string(tls_port_),
                                 "--tls-cert-file", cert_dir_ + "/server.crt",
                                 "--tls-key-file", cert_dir_ + "/server.key",
                                 "--tls-ca-cert-file", tls_dir_ + "/ca.crt",
                                 "--tls-auth-clients", "no"});
    }
    if (!opts_.password.empty()) argv.insert(argv.end(), {"--requirepass", opts_.password});
    if (!opts_.acl_user.empty()) {
        // redis 7 joins the words after --user into one "user ..." directive.
        argv.insert(argv.end(), {"--user", opts_.acl_user, "on",
                                 opts_.acl_password.empty() ? "nopass" : ">" + opts_.acl_password,
                                 "~*", "&*", "+@all"});
    }
    if (restricted_user::enabled() && !sentinel) {
        argv.insert(argv.end(), {"--user", restricted_user::name});
        const auto rules = restricted_user::documented_rules();
        argv.insert(argv.end(), rules.begin(), rules.end());
    }
    argv.insert(argv.end(), opts_.extra_args.begin(), opts_.extra_args.end());

    close_admin();
    const auto log_offset = file_size_or_zero(log_file_);
    proc_ = std::make_unique<child_process>(argv);
    paused_ = false;

    std::string last_error = "no attempt";
    auto nap = 2ms;
    while (true) {
        if (!proc_->running()) {
            const std::string said = read_file_from(log_file_, log_offset) + proc_->output();
            const auto st = proc_->status();
            drop_process();
            if (said.find("Address already in use") != std::string::npos)
                return start_result::address_in_use;
            throw std::runtime_error("redis_server: redis-server exited during startup (" +
                                     describe_status(st) + "):\n" + log_tail());
        }
        try {
            const auto attempt_deadline = std::min(deadline, clock_type::now() + 1s);
            unique_fd fd = open_admin(port_, opts_, attempt_deadline);
            const auto pong = roundtrip(fd.get(), {"PING"}, attempt_deadline);
            if (pong.size() == 1 && pong[0] == "PONG") {
                std::lock_guard lock(admin_mu_);
                admin_fd_ = fd.release();  // keep it for cmd()
                return start_result::ready;
            }
            last_error = "unexpected PING reply";
        } catch (const std::exception& e) {
            last_error = e.what();  // not listening yet, or LOADING: try again
        }
        const auto now = clock_type::now();
        if (now >= deadline) {
            const auto limit_ms = std::to_string(opts_.start_timeout.count());
            drop_process();
            throw std::runtime_error("redis_server: no PONG from 127.0.0.1:" +
                                     std::to_string(port_) + " within " + limit_ms +
                                     " ms (last error: " + last_error + "):\n" + log_tail());
        }
        std::this_thread::sleep_for(std::min<clock_type::duration>(nap, deadline - now));
        nap = std::min(nap * 2, std::chrono::milliseconds(50));
    }
}

void redis_server::drop_process() noexcept {
    if (!proc_) return;
    try {
        if (proc_->running()) {
            // A stopped process would leave SIGTERM pending forever.
            proc_->signal(SIGTERM);
            proc_->signal(SIGCONT);
            if (!proc_->wait_for(5s)) proc_->kill9(2s);
        }
        earlier_output_ += proc_->output();
    } catch (...) {
        // Nothing more can be done; child_process's destructor SIGKILLs.
    }
    proc_.reset();
    paused_ = false;
}

void redis_server::stop() {
    close_admin();
    drop_process();
}

void redis_server::kill9() {
    close_admin();
    if (!proc_) return;
    const auto st = proc_->kill9(5s);
    if (!st) throw std::runtime_error("redis_server: pid " + std::to_string(proc_->pid()) +
                                      " survived SIGKILL for 5 s");
    earlier_output_ += proc_->output();
    proc_.reset();
    paused_ = false;
}

void redis_server::restart() {
    stop();
    // The old server's socket is closed once it is reaped, and redis sets
    // SO_REUSEADDR, so the port is normally free at once; the retry covers
    // anything else briefly holding it. The whole restart is bounded.
    const auto deadline = clock_type::now() + opts_.start_timeout;
    while (true) {
        if (start_once(deadline) == start_result::ready) return;
        if (clock_type::now() >= deadline)
            throw std::runtime_error("redis_server: port " + std::to_string(port_) +
                                     " stayed in use; cannot restart\n" + log_tail());
        std::this_thread::sleep_for(50ms);
    }
}

void redis_server::pause() {
    if (!proc_ || paused_) return;
    paused_ = true;
    const char state = proc_->stop();
    if (state != 'T' && state != 't')
        throw std::runtime_error("redis_server: pid " + std::to_string(proc_->pid()) +
                                 " did not stop after SIGSTOP (state " + state + ")");
}

void redis_server::resume() {
    if (!proc_ || !paused_) return;
    proc_->signal(SIGCONT);
    paused_ = false;
}

std::string redis_server::log_tail(std::size_t max_bytes) const {
    std::string out = "--- " + log_file_ + " ---\n";
    const auto size = file_size_or_zero(log_file_);
    out += read_file_from(log_file_, size > max_bytes ? size - max_bytes : 0);
    const std::string printed = earlier_output_ + (proc_ ? proc_->output() : std::string());
    if (!printed.empty()) out += "--- redis-server stdout/stderr ---\n" + tail(printed, max_bytes);
    return out;
}

void redis_server::generate_tls_files() {
    const std::string names =
        opts_.tls_names.empty() ? std::string(default_tls_names) : opts_.tls_names;
    write_test_certificates(dir_, names, tls_dir_);
}

}  // namespace corolock::test
