#include "support/child_process.hpp"

#include "support/sys_util.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace corolock::test {

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void close_fd(int& fd) noexcept {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// How long the reader keeps draining after it was told to stop: a grandchild
// that inherited the pipe could otherwise keep it open (and us waiting) forever.
constexpr auto drain_limit = 1s;

}  // namespace

char process_state(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const auto paren = stat.rfind(')');  // the command name may itself hold ')'
    if (paren == std::string::npos || paren + 2 >= stat.size()) return '?';
    return stat[paren + 2];
}

std::string find_executable(const std::string& name) {
    if (name.empty()) return {};
    if (name.find('/') != std::string::npos) return name;
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        const auto colon = dirs.find(':');
        const std::string_view dir = dirs.substr(0, colon);
        // An empty PATH entry means the current directory. Built piecewise:
        // GCC 12 at -O2 misreports `dir + "/" + name` and `dir = "."` as an
        // overlapping memcpy (-Wrestrict, GCC bug 105329).
        std::string candidate(dir.empty() ? std::string_view(".") : dir);
        candidate += '/';
        candidate += name;
        if (is_executable_file(candidate)) return candidate;
        if (colon == std::string_view::npos) return {};
        dirs.remove_prefix(colon + 1);
    }
}

child_process::child_process(std::vector<std::string> argv, environment env) {
    if (argv.empty()) throw std::invalid_argument("child_process: empty argv");
    const std::string path = find_executable(argv[0]);
    if (path.empty()) throw std::runtime_error("child_process: cannot find executable " + argv[0]);

    // Everything the child needs is built here: between fork and exec it may
    // only make async-signal-safe calls, so it must not allocate.
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);

    std::vector<std::string> env_strings;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view entry(*e);
        const std::string_view name = entry.substr(0, entry.find('='));
        const bool replaced =
            std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
        if (!replaced) env_strings.emplace_back(entry);
    }
    for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);

    // All descriptors are close-on-exec, so children started concurrently
    // from other threads never inherit (and hold open) each other's pipes.
    int out[2] = {-1, -1};
    int exec_err[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0) throw sys_error("child_process: pipe2", errno);
    if (::pipe2(exec_err, O_CLOEXEC) != 0) {
        const int e = errno;
        close_fd(out[0]);
        close_fd(out[1]);
        throw sys_error("child_process: pipe2", e);
    }
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    auto close_all = [&] {
        close_fd(out[0]);
        close_fd(out[1]);
        close_fd(exec_err[0]);
        close_fd(exec_err[1]);
        close_fd(devnull);
    };
    if (devnull < 0) {
        const int e = errno;
        close_all();
        throw sys_error("child_process: open /dev/null", e);
    }

    const char* const exe = path.c_str();
    const pid_t parent = ::getpid();
    // For the child's fallback when close_range() is missing (sysconf is
    // not async-signal-safe, so it is asked here).
    const long open_max = ::sysconf(_SC_OPEN_MAX);
    const int max_fd = open_max > 0 && open_max < 65536 ? static_cast<int>(open_max) : 65536;
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int e = errno;
        close_all();
        throw sys_error("child_process: fork", e);
    }
    if (pid == 0) {
        // The child. The forking thread's signal mask and any ignored signals
        // would survive exec (a blocked SIGTERM would make a graceful stop
        // hang), so start the program with defaults.
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);  // fails harmlessly for KILL/STOP
        // Die with the test: a test binary killed by a ctest timeout must not
        // leave servers or workers behind. The getppid() check closes the race
        // where the parent died before prctl took effect.
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) _exit(127);
        if (::dup2(devnull, STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0 ||
            ::dup2(out[1], STDERR_FILENO) < 0)
            _exit(127);
        // Nothing else of the parent's goes to the program: sockets made
        // without close-on-exec (Asio's, a fault proxy's) would otherwise
        // stay open in every child, and a connection the parent closes or
        // resets would stay up.
        if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
            for (int fd = 3; fd < max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        ::execve(exe, args.data(), envp.data());
        const int e = errno;
        if (::write(exec_err[1], &e, sizeof e) < 0) {
            // Nothing else can be reported from here.
        }
        _exit(127);
    }

    // The parent.
    pid_ = pid;
    close_fd(out[1]);
    close_fd(exec_err[1]);
    close_fd(devnull);
    out_fd_ = out[0];

    // The error pipe closes on a successful exec, or carries exec's errno.
    pollfd p{exec_err[0], POLLIN, 0};
    int ready = 0;
    const auto deadline = clock_type::now() + 10s;
    while (clock_type::now() < deadline) {
        ready = ::poll(&p, 1, 100);
        if (ready != 0 && !(ready < 0 && errno == EINTR)) break;
    }
    int child_errno = 0;
    bool exec_failed = ready <= 0;  // still not exec'd after the limit counts as a failure
    if (ready > 0) {
        ssize_t n = 0;
        do {
            n = ::read(exec_err[0], &child_errno, sizeof child_errno);
        } while (n < 0 && errno == EINTR);
        exec_failed = n == static_cast<ssize_t>(sizeof child_errno);
    }
    close_fd(exec_err[0]);
    if (exec_failed) {
        kill9();
        close_fd(out_fd_);
        throw std::runtime_error("child_process: cannot execute " + path + ": " +
                                 (child_errno != 0 ? std::strerror(child_errno) : "timed out"));
    }

    try {
        reader_ = std::thread([this] { read_output(); });
    } catch (...) {
        kill9();
        close_fd(out_fd_);
        throw;
    }
}

child_process::~child_process() {
    try {
        if (running()) kill9();
    } catch (...) {
        // A destructor must not throw; the child got SIGKILL at worst.
    }
    stop_reading_ = true;
    if (reader_.joinable()) reader_.join();
    close_fd(out_fd_);
}

std::string child_process::output() const {
    std::lock_guard lock(mu_);
    return output_;
}

bool child_process::running() {
    std::unique_lock lock(mu_);
    if (!try_reap_locked()) return true;
    await_output_locked(lock);
    return false;
}

void child_process::await_output_locked(std::unique_lock<std::mutex>& lock) {
    // Once, after an exit of its own (a killed child's last words matter
    // less); a grandchild holding the pipe open holds us a second at most.
    if (!waited_for_output_ && status_ && WIFEXITED(*status_))
        read_all_cv_.wait_for(lock, drain_limit, [this] { return read_all_; });
    waited_for_output_ = true;
}

bool child_process::signal(int sig) {
    // Holding the lock keeps the child from being reaped meanwhile, so the
    // PID still names our (possibly zombie) child when kill() runs.
    std::lock_guard lock(mu_);
    if (status_ || pid_ <= 0) return false;
    return ::kill(pid_, sig) == 0;
}

char child_process::stop(std::chrono::milliseconds limit) {
    signal(SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    char state = '?';
    while (true) {
        std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
        std::string stat;
        std::getline(in, stat);
        const auto paren = stat.rfind(')');  // the command name may itself hold ')'
        state = paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
        if (state == 'T' || state == 't' || std::chrono::steady_clock::now() >= deadline)
            return state;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

std::optional<int> child_process::kill9(std::chrono::milliseconds limit) {
    signal(SIGKILL);
    return wait_for(limit);
}

std::optional<int> child_process::wait_for(std::chrono::milliseconds limit) {
    const auto deadline = clock_type::now() + limit;
    // Polls with a short, growing sleep: there is no portable way to wait
    // for one particular child with a timeout, and this keeps the latency
    // after an exit at a few milliseconds.
    auto nap = std::chrono::milliseconds(1);
    while (true) {
        {
            std::unique_lock lock(mu_);
            if (try_reap_locked()) {
                await_output_locked(lock);
                return status_;
            }
        }
        const auto now = clock_type::now();
        if (now >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::min<clock_type::duration>(nap, deadline - now));
        nap = std::min(nap * 2, std::chrono::milliseconds(20));
    }
}

std::optional<int> child_process::status() const {
    std::lock_guard lock(mu_);
    return status_;
}

int child_process::exit_code(int wait_status) noexcept {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return -1;
}

bool child_process::try_reap_locked() {
    if (status_) return true;
    if (pid_ <= 0) return true;
    int st = 0;
    pid_t r = 0;
    do {
        r = ::waitpid(pid_, &st, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
        status_ = st;
        return true;
    }
    if (r < 0) {
        // ECHILD: someone else reaped it (SIGCHLD ignored, or a stray
        // waitpid(-1)). The PID is no longer ours to signal; report exit 255.
        status_ = 255 << 8;
        return true;
    }
    return false;
}

void child_process::read_output() {
    char buf[4096];
    std::optional<clock_type::time_point> drain_until;
    while (true) {
        if (stop_reading_ && !drain_until) drain_until = clock_type::now() + drain_limit;
        if (drain_until && clock_type::now() >= *drain_until) return;
        pollfd p{out_fd_, POLLIN, 0};
        const int r = ::poll(&p, 1, 50);  // wakes up now and then to see stop_reading_
        if (r < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (r == 0) {
            if (stop_reading_) return;
            continue;
        }
        const ssize_t n = ::read(out_fd_, buf, sizeof buf);
        if (n > 0) {
            std::lock_guard lock(mu_);
            output_.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        // End of file: every writer has exited.
        std::lock_guard lock(mu_);
        read_all_ = true;
        read_all_cv_.notify_all();
        return;
    }
}

}  // namespace corolock::test
