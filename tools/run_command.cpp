// corolock run: hold a lock while a child process runs.
//
// One thread, one io_context. The lock is a corolock::backend: a Redis
// client's (redis://, rediss://, redis+sentinel://), a Redis Cluster backend
// (redis+cluster://: a client is one connection), or an etcd, ZooKeeper
// or PostgreSQL backend (etcd://, etcds://, zk://, postgresql://). The
// phases, in order:
//   starting   check that the server answers (Redis: a PING; a Cluster:
//              the lock's status, on the node of its slot; etcd: a range
//              of the lock's keys; ZooKeeper: a session of the admin's own;
//              PostgreSQL: a connection of the admin's own), then acquire
//              (waiting via pub/sub on Redis, a watch on etcd and
//              ZooKeeper, the server's lock queue on PostgreSQL);
//              a signal cancels whichever of the two is in progress
//   running    the child runs; signals are passed on to it; the watchdog
//              renews; a lost lease stops the child (or is only reported)
//   finishing  the child has been reaped: release, explicitly and bounded
// A single coroutine (the signal pump) receives SIGINT/SIGTERM/SIGHUP for the
// whole life of the command and acts according to the phase, so that no
// signal is ever dropped between two waits.
//
// Child exit is detected with a SIGCHLD signal_set plus waitpid(pid, WNOHANG)
// rather than a pidfd: signal handling through Asio is needed anyway for the
// forwarded signals, SIGCHLD works on every POSIX system and kernel (pidfd_open
// needs Linux 5.3 and is refused by some sandboxes' seccomp filters), and the
// set is registered before the child is spawned, so its SIGCHLD cannot be
// missed. We only ever have one child, so waitpid on its pid is exact; a
// SIGCHLD for a stop/continue just leads to one more WNOHANG check.
//
// The child is started with fork + execve rather than posix_spawn, because
// it needs three things posix_spawn cannot do: PR_SET_PDEATHSIG (the
// command dies with corolock, even when corolock is SIGKILLed), a process
// group of its own (so a lost lease stops the whole job, grandchildren
// included) and, in a terminal's foreground, the terminal for that group.
// Between fork and exec the child makes only async-signal-safe calls; PATH
// is searched before fork.
#include "cli.hpp"

#include "etcd/etcd_admin.hpp"
#include "redlock/redlock_backend.hpp"

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/election.hpp>
#include <corolock/fair_mutex.hpp>
#include <corolock/guard.hpp>
#include <corolock/metrics.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>
#include <corolock/semaphore.hpp>
#include <corolock/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <corolock/printable.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <optional>
#include <tuple>
#include <set>

extern char** environ;

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// The holder label the lock records: --label, --no-label, or COMMAND's
// program name.
std::string holder_label(const run_options& o) {
    return o.label ? *o.label : command_label(o.command);
}

// The signals passed on to the child. SIGQUIT is left at its default (core
// dump of corolock itself), as the "really stop now" escape hatch.
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};

// ---- file descriptors ----

// The open descriptors of this process. /proc (or /dev/fd) lists them
// exactly; without either, the low range is probed, which covers everything
// a single-connection tool opens.
std::set<int> open_descriptors() {
    std::set<int> fds;
    for (const char* dir_path : {"/proc/self/fd", "/dev/fd"}) {
        DIR* dir = ::opendir(dir_path);
        if (dir == nullptr) continue;
        const int own = ::dirfd(dir);
        while (const dirent* entry = ::readdir(dir)) {
            if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
            const int fd = std::atoi(entry->d_name);
            if (fd != own) fds.insert(fd);
        }
        ::closedir(dir);
        return fds;
    }
    for (int fd = 0; fd < 1024; ++fd)
        if (::fcntl(fd, F_GETFD) != -1) fds.insert(fd);
    return fds;
}

// Asio opens its sockets without FD_CLOEXEC, so without this the child would
// inherit the Redis connection (and keep it open in any daemon it leaves
// behind). Descriptors corolock inherited itself are passed on untouched:
// passing descriptors through is part of running a command.
void close_own_descriptors_on_exec(const std::set<int>& inherited) {
    for (int fd : open_descriptors()) {
        if (inherited.count(fd) != 0) continue;
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags != -1 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

// ---- the child ----

// How COMMAND is started.
struct spawn_options {
    bool own_process_group = true;  // a process group of its own, signalled as a whole
    int terminal_fd = -1;           // >= 0: hand this terminal's foreground to the group
    bool restore_sigpipe = false;   // SIGPIPE back to its default in the child
};

// The places execvp(3) would try for argv[0], computed before fork so that
// the child does nothing between fork and exec that is not
// async-signal-safe (the resolver may run a thread of Asio's).
std::vector<std::string> exec_candidates(const std::string& file) {
    if (file.find('/') != std::string::npos) return {file};
    const char* path_env = std::getenv("PATH");
    const std::string path = path_env != nullptr ? path_env : "/bin:/usr/bin";
    std::vector<std::string> out;
    std::size_t start = 0;
    for (;;) {
        const auto colon = path.find(':', start);
        std::string dir = path.substr(start, colon == std::string::npos ? colon : colon - start);
        if (dir.empty()) dir = ".";  // an empty PATH entry is the current directory
        out.push_back(dir + "/" + file);
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return out;
}

// Takes the terminal's foreground back for corolock's own process group.
// Called from the background (the child's group had it), where tcsetpgrp
// would stop us with SIGTTOU unless it is blocked.
void take_terminal_back(int fd) {
    if (fd < 0) return;
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &old);
    ::tcsetpgrp(fd, ::getpgrp());
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

class child_process {
public:
    child_process() = default;
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    // Starts argv[0] (looked up on PATH) with `env` as its whole
    // environment. Returns 0 or an errno value.
    int spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const spawn_options& opts) {
        std::vector<std::string> env_storage(env);
        std::vector<char*> envp;
        for (auto& e : env_storage) envp.push_back(e.data());
        envp.push_back(nullptr);
        std::vector<std::string> argv_storage(argv);
        std::vector<char*> argvp;
        for (auto& a : argv_storage) argvp.push_back(a.data());
        argvp.push_back(nullptr);
        const auto candidates = exec_candidates(argv[0]);

        // The child reports a failed exec through this pipe; a successful
        // exec closes it (O_CLOEXEC), and the parent reads end-of-file.
        int report[2];
        if (::pipe2(report, O_CLOEXEC) != 0) return errno;

        // Every signal stays blocked across fork until the child has reset
        // the dispositions: a signal caught in the child before exec would
        // run Asio's handler there, which writes into a pipe shared with us.
        sigset_t all, old_mask;
        sigfillset(&all);
        ::sigprocmask(SIG_BLOCK, &all, &old_mask);
        const pid_t parent = ::getpid();
        const int terminal_fd = opts.own_process_group ? opts.terminal_fd : -1;
        const pid_t pid = ::fork();
        if (pid == 0) {
            // The child: async-signal-safe calls only, until exec.
            ::close(report[0]);
            if (opts.own_process_group) {
                ::setpgid(0, 0);
                // Blocked SIGTTOU lets a background group take the terminal.
                if (terminal_fd >= 0) ::tcsetpgrp(terminal_fd, ::getpid());
            }
            // If corolock dies (even by SIGKILL), the command must not run on
            // without the lock. Checked again after setting it: corolock may
            // have died before, and then the signal will never come.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(exit_status::os_error);
            for (int signo : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
                struct sigaction current {};
                if (::sigaction(signo, nullptr, &current) == 0 && current.sa_handler != SIG_IGN)
                    ::signal(signo, SIG_DFL);
            }
            if (opts.restore_sigpipe) ::signal(SIGPIPE, SIG_DFL);
            ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
            int err = ENOENT;
            bool denied = false;
            for (const auto& file : candidates) {
                ::execve(file.c_str(), argvp.data(), envp.data());
                err = errno;
                if (err == EACCES) denied = true;
                else if (err != ENOENT && err != ENOTDIR) break;
            }
            if (denied && (err == ENOENT || err == ENOTDIR)) err = EACCES;
            [[maybe_unused]] const auto written = ::write(report[1], &err, sizeof err);
            ::_exit(exit_status::not_found);
        }
        const int fork_error = pid < 0 ? errno : 0;
        ::close(report[1]);
        if (pid > 0 && opts.own_process_group) {
            // Also from here, so that the group exists whichever runs first.
            ::setpgid(pid, pid);
        }
        int exec_error = 0;
        if (pid > 0) {
            ssize_t n = -1;
            for (int attempt = 0; attempt < 100; ++attempt) {
                n = ::read(report[0], &exec_error, sizeof exec_error);
                if (n != -1 || errno != EINTR) break;
            }
            if (n != static_cast<ssize_t>(sizeof exec_error)) exec_error = 0;
        }
        ::close(report[0]);
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        if (fork_error != 0) return fork_error;
        if (exec_error != 0) {
            int ignored = 0;
            while (::waitpid(pid, &ignored, 0) == -1 && errno == EINTR) {}
            take_terminal_back(terminal_fd);
            return exec_error;
        }
        pid_ = pid;
        group_ = opts.own_process_group;
        terminal_fd_ = terminal_fd;
        return 0;
    }

    pid_t pid() const noexcept { return pid_; }
    bool running() const noexcept { return pid_ > 0; }
    bool own_group() const noexcept { return group_; }
    int terminal_fd() const noexcept { return terminal_fd_; }

    // To COMMAND's process group (or to its process alone, with
    // --no-process-group). Only while the child is unreaped: after waitpid
    // the pid may be reused by an unrelated process, which must never get
    // our signals.
    void signal(int signo) const noexcept {
        if (pid_ <= 0) return;
        if (group_) ::kill(-pid_, signo);
        else ::kill(pid_, signo);
    }

    // After the child was reaped: SIGKILL to what is left of its group (a
    // background job of a shell script). The group's id cannot be reused
    // while any member lives; when none does, this finds nothing.
    void kill_leftovers() noexcept {
        if (group_ && last_pid_ > 0) ::kill(-last_pid_, SIGKILL);
    }

    // The wait status once the child has exited; empty while it runs. A stop
    // (Ctrl-Z, when the child has the terminal) is passed on to corolock
    // itself, so the shell sees the job stopped, and undone on SIGCONT.
    std::optional<int> try_reap() noexcept {
        if (pid_ <= 0) return std::nullopt;
        int status = 0;
        pid_t r = -1;
        // EINTR: a signal arrived during the call; a few retries suffice.
        for (int attempt = 0; attempt < 100; ++attempt) {
            r = ::waitpid(pid_, &status, WNOHANG | WUNTRACED);
            if (r != -1 || errno != EINTR) break;
        }
        if (r == pid_ && WIFSTOPPED(status)) {
            if (terminal_fd_ >= 0) {
                take_terminal_back(terminal_fd_);
                ::kill(0, SIGSTOP);  // our own group: the shell sees the job stop
                // Continued (fg): give the terminal back and wake the command.
                ::tcsetpgrp(terminal_fd_, pid_);
                ::kill(-pid_, SIGCONT);
            }
            return std::nullopt;
        }
        if (r == pid_) {
            last_pid_ = pid_;
            pid_ = -1;
            take_terminal_back(terminal_fd_);
            return status;
        }
        if (r == -1 && errno == ECHILD) {
            // Someone else reaped it (cannot happen unless SIGCHLD was set to
            // SIG_IGN behind our back); report it as a failure, never hang.
            pid_ = -1;
            take_terminal_back(terminal_fd_);
            return (exit_status::os_error & 0xff) << 8;
        }
        return std::nullopt;
    }

private:
    pid_t pid_ = -1;
    pid_t last_pid_ = -1;
    bool group_ = false;
    int terminal_fd_ = -1;
};

// COMMAND's environment: ours, with what run holds (elect: COROLOCK_NAME,
// COROLOCK_EPOCH and COROLOCK_LEADER_VALUE; one NAME:
// COROLOCK_NAME and COROLOCK_TOKEN; several: COROLOCK_LOCKS and
// COROLOCK_NAME_<i>, COROLOCK_TOKEN_<i> in canonical order; no token under
// RedLock, whose token is no fencing token), every inherited variable of
// those families removed, and (unless --pass-credentials) no password:
// COROLOCK_PASSWORD removed and REDIS_URL without its user name and password.
std::vector<std::string> child_environment(
    const run_options& o, const std::vector<std::pair<std::string, std::uint64_t>>& tokens) {
    const bool fencing = !o.common.redlock();
    std::vector<std::pair<std::string, std::string>> set;
    if (o.elect()) {
        set.emplace_back("COROLOCK_NAME", tokens.front().first);
        set.emplace_back("COROLOCK_EPOCH", std::to_string(tokens.front().second));
        set.emplace_back("COROLOCK_LEADER_VALUE", *o.leader_value);
    } else if (!o.several()) {
        set.emplace_back("COROLOCK_NAME", tokens.front().first);
        if (fencing) set.emplace_back("COROLOCK_TOKEN", std::to_string(tokens.front().second));
    } else {
        set.emplace_back("COROLOCK_LOCKS", std::to_string(tokens.size()));
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            const auto index = std::to_string(i + 1);
            set.emplace_back("COROLOCK_NAME_" + index, tokens[i].first);
            if (fencing)
                set.emplace_back("COROLOCK_TOKEN_" + index, std::to_string(tokens[i].second));
        }
    }
    auto has_key = [](std::string_view entry, std::string_view key) {
        return entry.size() > key.size() && entry.substr(0, key.size()) == key &&
               entry[key.size()] == '=';
    };
    // COROLOCK_NAME_7, COROLOCK_TOKEN_12: a numbered variable of a family.
    auto numbered = [](std::string_view entry, std::string_view family) {
        if (entry.substr(0, family.size()) != family) return false;
        const auto key = entry.substr(family.size(), entry.find('=') - family.size());
        return !key.empty() && key.find_first_not_of("0123456789") == std::string_view::npos;
    };
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view entry(*e);
        if (has_key(entry, "COROLOCK_NAME") || has_key(entry, "COROLOCK_TOKEN") ||
            has_key(entry, "COROLOCK_LOCKS") || has_key(entry, "COROLOCK_EPOCH") ||
            has_key(entry, "COROLOCK_LEADER_VALUE") || numbered(entry, "COROLOCK_NAME_") ||
            numbered(entry, "COROLOCK_TOKEN_"))
            continue;
        if (!o.pass_credentials) {
            if (has_key(entry, "COROLOCK_PASSWORD")) continue;
            if (has_key(entry, "REDIS_URL")) {
                const auto clean = url_without_credentials(entry.substr(10));
                if (!clean.empty()) env.push_back("REDIS_URL=" + clean);
                continue;
            }
        }
        env.emplace_back(entry);
    }
    for (const auto& [key, value] : set) env.push_back(key + "=" + value);
    return env;
}

int status_of(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return exit_status::signal_base + WTERMSIG(wait_status);
    return exit_status::os_error;
}

std::string signal_name(int signo) {
    const char* abbrev = ::sigabbrev_np(signo);
    return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

// ---- the run ----

// What run holds: one NAME's guard, or the multi_guard of several NAMEs;
// elect: a term (the same calls on each; its release is the resignation).
class held_lock {
public:
    held_lock() = default;
    explicit held_lock(guard g) noexcept : one_(std::move(g)) {}
    explicit held_lock(multi_guard g) noexcept : many_(std::move(g)), several_(true) {}
    explicit held_lock(leadership t) noexcept : term_(std::move(t)), elected_(true) {}

    explicit operator bool() const noexcept {
        if (elected_) return static_cast<bool>(term_);
        return several_ ? many_.owns_lock() : one_.owns_lock();
    }
    guard::clock::time_point lease_deadline() const noexcept {
        if (elected_) return term_.lease_deadline();
        return several_ ? many_.lease_deadline() : one_.lease_deadline();
    }
    // Each name with its token, in canonical order (elect: the epoch).
    std::vector<std::pair<std::string, std::uint64_t>> tokens(const run_options& o) const {
        if (elected_) return {{o.names.front(), term_.epoch()}};
        if (several_) return many_.tokens();
        return {{o.names.front(), one_.token()}};
    }
    // The tokens for -v: "42", or "a=42, b=7".
    std::string tokens_text() const {
        if (elected_) return "epoch " + std::to_string(term_.epoch());
        if (!several_) return std::to_string(one_.token());
        std::string out;
        for (const auto& [name, token] : many_.tokens())
            out += (out.empty() ? "" : ", ") + printable(name) + "=" + std::to_string(token);
        return out;
    }
    template <class Token>
    auto async_until_lost(Token&& token) const {
        if (elected_) return term_.async_until_lost(std::forward<Token>(token));
        if (several_) return many_.async_until_lost(std::forward<Token>(token));
        return one_.async_until_lost(std::forward<Token>(token));
    }
    template <class Token>
    auto async_release(Token&& token) {
        if (elected_) return term_.async_resign(std::forward<Token>(token));
        if (several_) return many_.async_release(std::forward<Token>(token));
        return one_.async_release(std::forward<Token>(token));
    }

private:
    guard one_;
    multi_guard many_;
    leadership term_;
    bool several_ = false;
    bool elected_ = false;
};

enum class phase { starting, running, finishing };

// The release after a lost lease: Redis is often unreachable then (that is
// why the lease was lost), and a release that cannot happen must not keep
// corolock from exiting, so it gets this long and no more. Whatever it does
// not finish, the lease's end does.
constexpr duration lost_release_bound = std::chrono::milliseconds(200);

struct run_state {
    run_state(const run_options& opts, client* c, detail::etcd::admin* e, const backend& b,
              asio::signal_set& fwd, asio::signal_set& chld)
        : o(opts), redis(c), etcd(e), locks(b), forwarded(fwd), sigchld(chld) {}

    const run_options& o;
    client* redis;               // a Redis URL: the client behind `locks`
    std::vector<client>* nodes = nullptr;  // several --url: RedLock's, one per node
    detail::etcd::admin* etcd;   // an etcd URL: for the first look at the lock
    store_admin* store = nullptr;  // a zk:// or postgresql:// URL: the same
    const backend& locks;        // the lock's backend, either way
    asio::signal_set& forwarded;
    asio::signal_set& sigchld;
    std::shared_ptr<spdlog::logger> log;

    phase current = phase::starting;
    int pending_signal = 0;                 // received while starting
    asio::cancellation_signal cancel_start; // cancels the PING or the acquire
    child_process child;
    spawn_options spawn;
    bool lost = false;
    const held_lock* held = nullptr;        // while running: for -vv's renewal notes
    const std::set<int>* inherited_fds = nullptr;

    template <class... Args>
    void note(spdlog::format_string_t<Args...> fmt, Args&&... args) {
        if (log) log->info(fmt, std::forward<Args>(args)...);
    }
    template <class... Args>
    void detail(spdlog::format_string_t<Args...> fmt, Args&&... args) {
        if (log) log->debug(fmt, std::forward<Args>(args)...);
    }
    // "lock 'NAME'" or "locks 'A', 'B'" (elect: "the leadership of
    // 'NAME'"), printable, for messages.
    std::string name() const {
        std::string out = o.elect() ? "the leadership of " : o.several() ? "locks " : "lock ";
        for (std::size_t i = 0; i < o.names.size(); ++i)
            out += (i > 0 ? ", '" : "'") + printable(o.names[i]) + "'";
        return out;
    }
    // The command, for messages: "run" or "elect".
    std::string command() const { return o.elect() ? "elect" : "run"; }
    // "pid 123" or "process group 123".
    std::string target() const {
        return (child.own_group() ? "process group " : "pid ") + std::to_string(child.pid());
    }
};

// Who holds a lock, for a person (-v, and a conflict's message, the line a
// cron mail shows): host:pid, since when, for how long and its label; the
// owner id when the lock records no holder (written by an older corolock).
std::string who_holds(const lock_status& st) {
    if (!st.holder) return "owner " + printable(st.owner);
    const auto& h = *st.holder;
    return holder_text(h) + " since " + format_time(h.since) + " (held for " +
           format_held_for(h.held_for) + ", " +
           (h.label.empty() ? std::string("no label") : "label '" + printable(h.label) + "'") +
           ")";
}

std::string seconds_text(std::chrono::steady_clock::duration d) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld.%03lld s", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000));
    return buf;
}

asio::awaitable<void> signal_pump(run_state& s) {
    for (;;) {
        auto [ec, signo] = co_await s.forwarded.async_wait(use_nothrow);
        if (ec) co_return;  // cancelled: the run is over
        switch (s.current) {
        case phase::starting:
            if (s.pending_signal == 0) s.pending_signal = signo;
            s.cancel_start.emit(asio::cancellation_type::terminal);
            break;
        case phase::running:
            s.note("passing {} on to {}", signal_name(signo), s.target());
            s.child.signal(signo);
            break;
        case phase::finishing:
            // The child is gone; releasing is bounded and must finish.
            s.note("{} received while releasing; finishing the release first",
                   signal_name(signo));
            break;
        }
    }
}

asio::awaitable<int> wait_for_child(run_state& s) {
    for (;;) {
        if (auto status = s.child.try_reap()) co_return *status;
        auto [ec, signo] = co_await s.sigchld.async_wait(use_nothrow);
        if (ec) {
            // Not expected; poll slowly rather than spin on a failing wait.
            asio::steady_timer poll(co_await asio::this_coro::executor, std::chrono::milliseconds(100));
            co_await poll.async_wait(use_nothrow);
        }
    }
}

// Runs detached beside the wait for the child, and is never cancelled: it
// acts only while the child runs, so when the child is gone it has nothing
// left to do, and its pending wait dies with the event loop. (Cancelling it
// instead would race: a cancellation emitted before the wait's cancellation
// handler is installed is silently lost, which left the run hanging.)
asio::awaitable<void> handle_loss(run_state& s, const held_lock& g) {
    auto [ec] = co_await g.async_until_lost(use_nothrow);
    if (ec != error::lock_lost) co_return;  // released, or the client stopped: nothing to watch
    if (s.current != phase::running) {
        // Lost after the child exited: the release reports it.
        co_return;
    }
    s.lost = true;
    if (s.o.on_lost == on_lost_action::ignore) {
        report_warning("lost the lease on " + s.name() + " while " + s.target() +
                       " runs; the command is no longer protected (--on-lost ignore: letting "
                       "it run)");
        co_return;
    }
    report_warning("lost the lease on " + s.name() + "; sending SIGTERM to " + s.target());
    s.child.signal(SIGTERM);
    asio::steady_timer grace(co_await asio::this_coro::executor, s.o.grace);
    co_await grace.async_wait(use_nothrow);
    if (s.current != phase::running || !s.child.running()) co_return;  // it exited in time
    report_warning(s.target() + " still runs " + format_duration(s.o.grace) +
                   " after SIGTERM; sending SIGKILL");
    s.child.signal(SIGKILL);
}

// -vv: every renewal, seen as the guard's lease deadline moving forward (the
// library has no renewal callback; its deadline is what a renewal changes).
asio::awaitable<void> note_renewals(run_state& s) {
    const auto poll_every =
        std::clamp<duration>(s.o.lease / 10, std::chrono::milliseconds(20), std::chrono::seconds(1));
    auto last = s.held != nullptr ? s.held->lease_deadline() : guard::clock::time_point{};
    asio::steady_timer tick(co_await asio::this_coro::executor);
    for (;;) {
        tick.expires_after(poll_every);
        co_await tick.async_wait(use_nothrow);
        if (s.current != phase::running || s.held == nullptr || s.lost) co_return;
        const auto deadline = s.held->lease_deadline();
        if (deadline > last) {
            last = deadline;
            s.detail("renewed the lease on {}; valid for {} ms from now", s.name(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         deadline - guard::clock::now())
                         .count());
        }
    }
}

// Gives a level back, bounded by the client's command timeout. Returns the
// release's result.
asio::awaitable<error_code> release(held_lock& g) {
    auto [ec] = co_await g.async_release(use_nothrow);
    co_return ec;
}

// A release given at most `bound`: returns its result, or
// operation_aborted when it had not finished by then (it may still finish
// while corolock exits; the lease's end frees the lock otherwise).
asio::awaitable<error_code> bounded_release(held_lock& g, duration bound) {
    struct race {
        explicit race(asio::any_io_executor ex) : timer(std::move(ex)) {}
        asio::steady_timer timer;
        std::optional<error_code> result;
    };
    auto r = std::make_shared<race>(co_await asio::this_coro::executor);
    r->timer.expires_after(bound);
    g.async_release([r](error_code ec) {
        r->result = ec;
        r->timer.cancel();
    });
    if (!r->result) co_await r->timer.async_wait(use_nothrow);
    co_return r->result ? *r->result : error_code(asio::error::operation_aborted);
}

// An acquire given up (a signal, --wait's end, --no-wait, an error) may
// leave clean-up to the backend: on Redis the release of a grant whose
// script was still on its way, on etcd the guarded delete of the acquire's key
// (its key would otherwise wait ahead of every later waiter). The process
// is about to exit, so it waits for that, bounded by the request timeout.
asio::awaitable<void> drain_abandoned(run_state& s) {
    auto [ec] = co_await s.locks.async_drain(request_timeout(s.o.common), use_nothrow);
    if (ec)
        report_warning("could not confirm that the abandoned acquire left nothing behind (" +
                       ec.message() + "); if it did, " + std::string(service_name(s.o.common)) +
                       " frees " + s.name() + " within " + s.o.lease_text);
}

// RedLock: one PING to every node at once. Returns ok as soon as a majority
// answered (the others are left to answer in the background, -v notes it),
// or, once a majority is out of reach, reports the unreachable nodes and
// returns the exit status. A signal (cancel_start) ends it early.
asio::awaitable<int> check_majority_reachable(run_state& s) {
    struct tally {
        explicit tally(asio::any_io_executor ex, std::size_t n)
            : wake(std::move(ex), asio::steady_timer::time_point::max()), cancels(n) {}
        asio::steady_timer wake;  // a condition variable: cancelled at each answer
        std::size_t answered = 0;
        std::vector<std::string> failures;  // "host:port (why)"
        error_code first_error;
        std::vector<asio::cancellation_signal> cancels;
    };
    auto& nodes = *s.nodes;
    const std::size_t n = nodes.size();
    const std::size_t majority = n / 2 + 1;
    const auto ex = co_await asio::this_coro::executor;
    auto t = std::make_shared<tally>(ex, n);
    for (std::size_t i = 0; i < n; ++i) {
        asio::co_spawn(
            ex,
            [&s, t, i, c = &nodes[i]]() -> asio::awaitable<void> {
                const error_code ec = co_await check_reachable(*c, t->cancels[i].slot());
                const std::string where = describe_server(s.o.common.nodes[i]);
                if (ec) {
                    const std::string why =
                        c->last_error().message.empty() ? ec.message() : c->last_error().message;
                    if (!t->first_error) t->first_error = ec;
                    t->failures.push_back(where + " (" + why + ")");
                    s.note("RedLock node {} did not answer: {}", where, printable(why));
                } else {
                    ++t->answered;
                    s.detail("RedLock node {} answered", where);
                }
                t->wake.cancel();
            },
            asio::detached);
    }
    while (t->answered < majority && t->failures.size() <= n - majority) {
        co_await t->wake.async_wait(
            asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
        s.cancel_start.slot().clear();
        if (s.pending_signal != 0) {
            for (auto& c : t->cancels) c.emit(asio::cancellation_type::terminal);
            co_return exit_status::ok;  // the caller sees the signal
        }
        t->wake.expires_at(asio::steady_timer::time_point::max());
    }
    if (t->answered >= majority) co_return exit_status::ok;
    std::string list;
    for (const auto& f : t->failures) list += (list.empty() ? "" : ", ") + f;
    report_error(s.command() + ": cannot reach a majority of the " + std::to_string(n) +
                 " RedLock nodes (" + std::to_string(majority) + " needed, " +
                 std::to_string(n - t->failures.size()) + " left): " + list);
    const int status = exit_status_for(t->first_error);
    co_return status == exit_status::ok ? exit_status::unavailable : status;
}

// The lock `run` takes: a mutex, a fair_mutex (--fair), a semaphore
// (--capacity), a shared mutex's level (-s, -x) or, for several NAMEs, a
// multi_lock; one of them made from the options.
class run_lock {
public:
    run_lock(const backend& b, const run_options& o) : permits_(o.permits), level_(o.level) {
        if (o.elect()) {
            election_.emplace(b, o.names.front());
            leader_value_ = *o.leader_value;
        } else if (o.several())
            multi_.emplace(b, o.names);
        else if (o.capacity > 0)
            semaphore_.emplace(b, o.names.front(), o.capacity);
        else if (o.level != lock_level::mutex)
            shared_.emplace(b, o.names.front());
        else if (o.fair)
            fair_.emplace(b, o.names.front());
        else
            plain_.emplace(b, o.names.front());
    }
    // The owner id of the one lock; empty for several NAMEs (one per name).
    const std::string& owner_id() const noexcept {
        static const std::string none;
        if (multi_ || election_) return none;
        if (semaphore_) return semaphore_->owner_id();
        if (shared_) return shared_->owner_id();
        return fair_ ? fair_->owner_id() : plain_->owner_id();
    }
    // A semaphore's or shared mutex's holders are many: there is no one
    // holder to look up.
    bool has_many_holders() const noexcept { return semaphore_ || shared_; }
    template <class Token>
    auto async_acquire(lock_options opts, Token&& token) {
        if (semaphore_)
            return semaphore_->async_acquire(permits_, opts, std::forward<Token>(token));
        if (shared_ && level_ == lock_level::shared)
            return shared_->async_acquire_shared(opts, std::forward<Token>(token));
        if (shared_) return shared_->async_acquire(opts, std::forward<Token>(token));
        if (fair_) return fair_->async_acquire(opts, std::forward<Token>(token));
        return plain_->async_acquire(opts, std::forward<Token>(token));
    }
    // Acquires, cancelled through `slot`.
    asio::awaitable<std::tuple<error_code, held_lock>> acquire(lock_options opts,
                                                               asio::cancellation_slot slot) {
        if (election_) {
            auto [ec, t] = co_await election_->async_campaign(
                leader_value_, opts, asio::bind_cancellation_slot(slot, use_nothrow));
            co_return std::tuple<error_code, held_lock>{ec, held_lock(std::move(t))};
        }
        if (multi_) {
            auto [ec, g] = co_await multi_->async_acquire(
                opts, asio::bind_cancellation_slot(slot, use_nothrow));
            co_return std::tuple<error_code, held_lock>{ec, held_lock(std::move(g))};
        }
        auto [ec, g] = co_await async_acquire(opts, asio::bind_cancellation_slot(slot, use_nothrow));
        co_return std::tuple<error_code, held_lock>{ec, held_lock(std::move(g))};
    }

private:
    std::uint32_t permits_;
    lock_level level_;
    std::optional<shared_mutex> shared_;
    std::optional<mutex> plain_;
    std::optional<fair_mutex> fair_;
    std::optional<semaphore> semaphore_;
    std::optional<multi_lock> multi_;
    std::optional<election> election_;  // elect
    std::string leader_value_;
};

// Errors a failover causes while no primary answers yet: worth another look
// within --wait.
bool during_failover(const error_code& ec) {
    return ec == error::no_primary || ec == error::never_connected ||
           ec == error::connection_lost || ec == error::not_connected || ec == error::timeout;
}

asio::awaitable<int> run_flow(run_state& s) {
    const auto& o = s.o;
    // --wait counts from here: the reachability check below may wait out a
    // failover, and the acquire has what is left.
    const auto wait_end = o.wait ? std::chrono::steady_clock::now() + *o.wait
                                 : std::chrono::steady_clock::time_point::max();
    auto interrupted = [&](std::string_view while_doing) {
        report_error("got " + signal_name(s.pending_signal) + " while " +
                     std::string(while_doing) + "; nothing is held");
        return exit_status::signal_base + s.pending_signal;
    };

    // 1. Is the server there at all? Asked separately, so that a wrong URL
    // or a stopped server is reported within seconds instead of looking like
    // a lock that never frees up.
    run_lock lock(s.locks, o);
    const std::string& owner = lock.owner_id();
    if (s.etcd != nullptr) {
        // One range of the lock's keys: the reachability check and -v's
        // look at the holder at once. Bounded by the request timeout; a
        // signal meanwhile is acted on when it ends.
        auto [reach, st] = co_await s.etcd->status(o.names.front());
        if (s.pending_signal != 0) co_return interrupted("connecting to etcd");
        if (reach)
            co_return report_redis_failure(o.common, s.command(), reach,
                                           s.etcd->last_error().message);
        if (o.several()) {
            // Several NAMEs: the range was the reachability check only.
        } else if (st.held && st.holder.owner != owner) {
            const auto& h = st.holder.holder;
            std::string who = "owner " + printable(st.holder.owner);
            if (h)
                who = holder_text(*h) + " since " + format_time(h->since) + " (" +
                      (h->label.empty() ? std::string("no label")
                                        : "label '" + printable(h->label) + "'") +
                      ")";
            s.note("{} is held by {} (lease ends in {} s unless renewed, {} waiting); "
                   "waiting {}",
                   s.name(), who, st.ttl.count(), st.waiters.size(),
                   o.wait ? (o.wait->count() == 0 ? std::string("not at all (--no-wait)")
                                                  : "up to " + o.wait_text)
                          : std::string("until it is free"));
        } else if (!st.held) {
            s.note("{} is free (store revision {})", s.name(), st.revision);
        }
    } else if (s.store != nullptr) {
        // The admin's own session (ZooKeeper) or connection (PostgreSQL),
        // then one read of the lock for -v. Each bounded by the request
        // timeout; a signal meanwhile is acted on when it ends.
        const std::string service(service_name(o.common));
        const error_code reach = co_await s.store->connect();
        if (s.pending_signal != 0) co_return interrupted("connecting to " + service);
        if (reach)
            co_return report_redis_failure(o.common, s.command(), reach, s.store->last_error());
        if (s.log && !o.several()) {
            auto [sec, st] = co_await s.store->status(o.names.front());
            if (s.pending_signal != 0) co_return interrupted("connecting to " + service);
            if (sec) {
                s.note("could not read {}: {}", s.name(), printable(s.store->last_error()));
            } else if (st.held) {
                std::string who = "owner " + printable(st.owner);
                if (st.holder)
                    who = holder_text(*st.holder) + " since " + format_time(st.holder->since) +
                          " (" +
                          (st.holder->label.empty() ? std::string("no label")
                                                    : "label '" + printable(st.holder->label) + "'") +
                          ")";
                s.note("{} is held by {} ({} waiting); waiting {}", s.name(), who, st.waiters,
                       o.wait ? (o.wait->count() == 0 ? std::string("not at all (--no-wait)")
                                                      : "up to " + o.wait_text)
                              : std::string("until it is free"));
            } else {
                s.note("{} is free (last token {})", s.name(), st.last_token);
            }
        }
        s.store->stop();
    } else if (s.nodes != nullptr) {
        const int status = co_await check_majority_reachable(s);
        if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
        if (status != exit_status::ok) co_return status;
    } else if (s.redis != nullptr) {
        // A Sentinel deployment fails over: while no Sentinel names a primary
        // (or the one named does not answer yet), the check is made again
        // through --wait, and only then is the cause reported. A single
        // server that does not answer is reported at once.
        const bool fails_over = o.common.cfg.mode == topology::sentinel;
        // Without --wait (wait until acquired) a failover still ends: a
        // minute covers Sentinel's (seconds, with its default timeouts less
        // than a minute); a deployment that names no primary for longer is
        // reported, not waited on in silence.
        const auto look_until =
            o.wait ? wait_end : std::chrono::steady_clock::now() + std::chrono::minutes(1);
        error_code reach;
        for (int look = 0; look < 1'000'000; ++look) {
            reach = co_await check_reachable(*s.redis, s.cancel_start.slot());
            s.cancel_start.slot().clear();
            if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
            const auto now = std::chrono::steady_clock::now();
            if (!reach || !fails_over || !during_failover(reach) || now >= look_until) break;
            if (look == 0)
                s.note("no primary answers ({}); trying again for up to {}: the deployment may "
                       "be failing over",
                       printable(s.redis->last_error().message.empty()
                                     ? reach.message()
                                     : s.redis->last_error().message),
                       o.wait ? o.wait_text : std::string("a minute (no --wait)"));
            asio::steady_timer again(co_await asio::this_coro::executor,
                                     std::min<std::chrono::steady_clock::duration>(
                                         look_until - now, std::chrono::milliseconds(500)));
            co_await again.async_wait(
                asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
            s.cancel_start.slot().clear();
            if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
        }
        if (reach)
            co_return report_redis_failure(o.common, s.command(), reach,
                                           s.redis->last_error().message);
    } else {
        // A Redis Cluster: no client to PING through; the lock's status,
        // sent to the primary serving its slot, is the check (which also
        // waits for the slot map). A NOPERM there reads as rejected
        // credentials, as no PING told the two apart.
        auto [reach, st] = co_await async_lock_status(
            s.locks, o.names.front(),
            asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
        s.cancel_start.slot().clear();
        if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
        if (reach) co_return report_redis_failure(o.common, s.command(), reach, {});
    }

    // -v: who holds the lock, if anyone, before waiting for it: the holder
    // the lock records (host, pid, since when, its label or command), or its
    // owner id when it records none (a lock written by an older corolock).
    // (A semaphore's or shared mutex's holders are many, several NAMEs are
    // several locks, a RedLock's are on several servers: no status lookup.)
    if (s.log && o.common.redis() && !lock.has_many_holders() && !o.several() &&
        s.nodes == nullptr) {
        auto [sec, st] = co_await async_lock_status(s.locks, o.names.front(), use_nothrow);
        if (!sec && st.held && st.owner != owner) {
            const std::string who = who_holds(st);
            s.note("{} is held by {} (lease ends in {} ms unless renewed, levels {}); "
                   "waiting {}",
                   s.name(), who, st.ttl.count(), st.levels,
                   o.wait ? (o.wait->count() == 0 ? std::string("not at all (--no-wait)")
                                                  : "up to " + o.wait_text)
                          : std::string("until it is free"));
        } else if (!sec && !st.held) {
            s.note("{} is free (last token {})", s.name(), st.last_token);
        }
    }

    // 2. Acquire, waiting via the unlock channel (Redis), a watch (etcd,
    // ZooKeeper) or the server's lock queue (PostgreSQL).
    lock_options opts;
    opts.lease = o.lease;
    opts.replicas = o.replicas;
    opts.lock_delay = o.lock_delay;
    // What is left of --wait (a failover waited out above took its part).
    if (o.wait)
        opts.wait = std::chrono::duration_cast<duration>(
            std::max(wait_end - std::chrono::steady_clock::now(),
                     std::chrono::steady_clock::duration::zero()));
    const auto wait_start = std::chrono::steady_clock::now();
    error_code aec;
    held_lock g;
    std::tie(aec, g) = co_await lock.acquire(opts, s.cancel_start.slot());
    const auto waited = std::chrono::steady_clock::now() - wait_start;
    s.cancel_start.slot().clear();
    if (s.pending_signal != 0) {
        if (g)
            co_await release(g);  // granted just before the signal was seen
        else
            co_await drain_abandoned(s);
        co_return interrupted("waiting for " + s.name());
    }
    if (aec) co_await drain_abandoned(s);
    if (aec == error::wait_timeout || aec == error::lock_held) {
        s.note("gave up on {} after {}", s.name(), seconds_text(waited));
        if (!o.quiet) {
            // Who holds it, without -v: what a cron mail should say. Where
            // one status names the holder: the backend-neutral admin status,
            // on Redis, etcd, ZooKeeper and PostgreSQL alike; on RedLock the
            // first node that answers with another owner's hold (the holder
            // record is written with the grant on each node).
            std::string holder;
            if (!lock.has_many_holders() && !o.several() && s.nodes == nullptr) {
                auto [sec, st] = co_await async_lock_status(s.locks, o.names.front(), use_nothrow);
                if (!sec && st.held && st.owner != owner) holder = who_holds(st);
            } else if (!lock.has_many_holders() && !o.several()) {
                for (const auto& node : *s.nodes) {
                    auto [sec, st] = co_await async_lock_status(node, o.names.front(), use_nothrow);
                    if (sec || !st.held || st.owner == owner) continue;
                    holder = who_holds(st);
                    break;
                }
            }
            if (o.wait && o.wait->count() == 0)
                report_error(s.name() +
                             (o.several() ? " are not all free (--no-wait)"
                                          : " is held by another owner (--no-wait)") +
                             (holder.empty() ? "" : ": " + holder));
            else
                report_error(s.name() + " not acquired within " + o.wait_text +
                             (holder.empty() ? "" : "; held by " + holder));
        }
        co_return o.conflict_exit_code;
    }
    if (aec == error::wrong_type && o.common.redis() && o.capacity == 0 && !o.several() &&
        s.nodes == nullptr) {
        // The name is another kind of lock: say which, and what to add.
        auto [sec, st] = co_await async_lock_status(s.locks, o.names.front(), use_nothrow);
        if (!sec && st.type == lock_type::semaphore) {
            const std::string n = st.capacity > 0 ? std::to_string(st.capacity) : "N";
            report_error("acquire " + s.name() + ": the name is a semaphore" +
                         (st.capacity > 0 ? " of " + n + " permits" : std::string()) +
                         ", not a lock: add --capacity " + n + " to take one of its permits");
            co_return exit_status::remote_error;
        }
    }
    if (aec == error::not_supported && o.elect()) {
        report_error("elect: " + service_at(o.common) + " offers no leader election" +
                     (o.common.redlock() ? " (RedLock has no fair mutex and no fencing token)"
                                         : std::string()) +
                     "; docs/election.md lists the backends that do");
        co_return exit_status::remote_error;
    }
    if (aec == error::not_supported && o.lock_delay.count() > 0) {
        report_error("acquire " + s.name() + ": --lock-delay is not supported by " +
                     service_at(o.common) + "; run without it");
        co_return exit_status::remote_error;
    }
    if (aec)
        co_return report_redis_failure(o.common, "acquire " + s.name(), aec,
                                       // etcd: the backend's own cause is not at hand
                                       s.redis != nullptr ? s.redis->last_error().message
                                                          : std::string(),
                                       true);
    s.note("acquired {} (token {}, lease {}) after waiting {}", s.name(), g.tokens_text(),
           o.lease_text, seconds_text(waited));

    // 3. Start the command.
    close_own_descriptors_on_exec(*s.inherited_fds);
    const int spawn_error = s.child.spawn(o.command, child_environment(o, g.tokens(o)), s.spawn);
    if (spawn_error != 0) {
        s.current = phase::finishing;
        co_await release(g);
        if (spawn_error == ENOENT) {
            report_error(printable(o.command[0]) + ": command not found");
            co_return exit_status::not_found;
        }
        report_error(printable(o.command[0]) + ": " + std::strerror(spawn_error));
        if (spawn_error == EACCES || spawn_error == ENOEXEC || spawn_error == EISDIR ||
            spawn_error == EPERM)
            co_return exit_status::cannot_execute;
        co_return exit_status::os_error;
    }
    s.current = phase::running;
    s.held = &g;
    s.note("started {}: {}", s.target(), printable(o.command[0]));

    // 4. Wait for it; a lost lease is handled alongside.
    const auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, handle_loss(s, g), asio::detached);
    if (s.log && s.log->should_log(spdlog::level::debug))
        asio::co_spawn(ex, note_renewals(s), asio::detached);
    const int wait_status = co_await wait_for_child(s);
    s.current = phase::finishing;
    s.held = nullptr;
    const int child_status = status_of(wait_status);
    s.note("command exited with status {}", child_status);

    // 5. Release, explicitly: bounded by the command timeout, or by far less
    // once the lease is lost.
    if (s.lost) {
        if (o.on_lost == on_lost_action::kill) {
            // What the command left in its group (a background job that
            // ignored SIGTERM) must not run on without the lock either.
            s.child.kill_leftovers();
            const error_code rec = co_await bounded_release(g, lost_release_bound);
            if (rec == asio::error::operation_aborted)
                s.note("no answer to the release within {}; not waiting for it",
                       format_duration(lost_release_bound));
            report_error(s.name() + " was lost while the command ran (exit " +
                         std::to_string(exit_status::lease_lost) + ")");
            co_return exit_status::lease_lost;
        }
        co_await bounded_release(g, lost_release_bound);
        co_return child_status;
    }
    const error_code rec = co_await release(g);
    if (rec == error::expired || rec == error::not_owner) {
        report_warning("the lease on " + s.name() +
                       " had ended before the command finished (" + rec.message() +
                       "): part of its work may have run unprotected");
        if (o.on_lost == on_lost_action::kill) co_return exit_status::lease_lost;
    } else if (rec) {
        report_warning("could not confirm the release of " + s.name() + " (" +
                       rec.message() + "); " + std::string(service_name(o.common)) +
                       " frees it within " + o.lease_text +
                       " at the latest");
    } else {
        s.note("released {}", s.name());
    }
    co_return child_status;
}

// The run itself; `m` gets the client's metrics at its end.
int run_measured(const run_options& o, metrics_snapshot& m) {
    // Taken before anything of ours is open: these are passed on to COMMAND.
    const auto inherited = open_descriptors();

    asio::io_context ioc(1);
    asio::signal_set forwarded(ioc);
    for (int signo : forwarded_signals) {
        // A signal ignored when we start (nohup, or SIGINT for a background
        // job of a non-interactive shell) stays ignored, for us and for the
        // child alike, as it would without corolock in between.
        struct sigaction current {};
        if (::sigaction(signo, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
        forwarded.add(signo);
    }
    // Registered before the child exists, so its SIGCHLD cannot be missed.
    asio::signal_set sigchld(ioc, SIGCHLD);
    // A closed stderr must not kill corolock while it holds the lock and
    // supervises the child (the lock would then only free at lease end, and
    // the child would run on unsupervised). The child gets SIGPIPE's
    // default back; one that was ignored when we started stays ignored.
    bool sigpipe_was_default = false;
    if (struct sigaction current {}; ::sigaction(SIGPIPE, nullptr, &current) == 0 &&
                                     current.sa_handler == SIG_DFL) {
        sigpipe_was_default = true;
        ::signal(SIGPIPE, SIG_IGN);
    }

    // Redis: a client, whose lock backend the mutex uses; a Redis Cluster,
    // which a client cannot speak to: a backend from the same config. etcd:
    // a backend of its own, plus an admin for the first look at the lock.
    // Either way the holder label is --label, or COMMAND's program name.
    std::optional<client> redis;
    std::vector<client> nodes;  // several --url: RedLock's
    std::unique_ptr<detail::etcd::admin> etcd;
    std::unique_ptr<store_admin> store;  // zk://, postgresql://
    std::optional<backend> locks;
    std::shared_ptr<spdlog::logger> log;
    try {
        if (!o.common.redis()) {
            // etcd, ZooKeeper and PostgreSQL offer the plain mutex (and
            // multi_lock over it), each granted in order of arrival.
            const std::string at = " (" + service_at(o.common) + ")";
            const std::string service(service_name(o.common));
            std::string refused;
            if (o.capacity > 0)
                refused = "--capacity is not supported on " + service + at +
                          ": semaphores need Redis";
            else if (o.level != lock_level::mutex)
                refused = std::string(o.level == lock_level::shared ? "-s (--shared)"
                                                                    : "-x (--exclusive)") +
                          " is not supported on " + service + at + ": shared mutexes need Redis";
            else if (o.fair)
                refused = "--fair is offered on Redis only: " + service +
                          "'s lock is granted in order of arrival already";
            else if (o.replicas > 0 && o.common.kind != url_kind::etcd)
                refused = "--replicas is not supported on " + service + at +
                          ": replica acknowledgement needs Redis (" +
                          (o.common.kind == url_kind::zk
                               ? "a ZooKeeper write is committed by a quorum already"
                               : "PostgreSQL's synchronous_standby_names decides it") +
                          ")";
            if (!refused.empty()) {
                report_error(refused);
                return exit_status::usage;
            }
            log = make_logger(o.common.verbosity);
            if (o.common.kind == url_kind::etcd)
                etcd = make_etcd_admin(ioc.get_executor(), o.common);
            else
                store = make_store_admin(ioc.get_executor(), o.common);
            backend_config bc;
            bc.holder_label = holder_label(o);
            locks.emplace(ioc.get_executor(), o.common.url, bc);
        } else if (o.common.redlock()) {
            // One client per node (the reachability check PINGs each), each
            // with the tool's short bounds and logger; the RedLock backend
            // over their lock backends. Options the parser checked.
            log = make_logger(o.common.verbosity);
            std::vector<backend> node_backends;
            nodes.reserve(o.common.nodes.size());
            for (const auto& node : o.common.nodes) {
                config cfg = tool_config(node, 0);
                cfg.logger = log;
                cfg.holder_label = holder_label(o);
                nodes.emplace_back(ioc.get_executor(), cfg);
                node_backends.push_back(nodes.back().lock_backend());
            }
            detail::redlock_options ro;
            if (o.common.redlock_node_timeout) ro.node_timeout = *o.common.redlock_node_timeout;
            locks.emplace(detail::backend_access::handle(
                std::make_shared<detail::redlock_backend>(ioc.get_executor(),
                                                          std::move(node_backends), ro),
                true));
        } else {
            config cfg = tool_config(o.common);
            cfg.holder_label = holder_label(o);
            log = cfg.logger;
            if (cfg.mode == topology::cluster) {
                // Refused by the library too, but only once connected, at
                // the acquire: said here at once, as a usage error.
                if (o.replicas > 0) {
                    std::string why = "--replicas is not supported on a Redis Cluster (";
                    why += service_at(o.common);
                    why += "): replica acknowledgement needs one primary (redis:// or "
                           "redis+sentinel://)";
                    report_error(why);
                    return exit_status::usage;
                }
                locks.emplace(ioc.get_executor(), cfg);
            } else {
                redis.emplace(ioc.get_executor(), cfg);
                locks.emplace(redis->lock_backend());
            }
        }
    } catch (const std::exception& e) {
        report_error(std::string("bad configuration: ") + e.what());
        return exit_status::usage;
    }

    run_state s(o, redis ? &*redis : nullptr, etcd.get(), *locks, forwarded, sigchld);
    s.nodes = nodes.empty() ? nullptr : &nodes;
    s.store = store.get();
    s.log = log;
    s.inherited_fds = &inherited;
    s.spawn.restore_sigpipe = sigpipe_was_default;
    s.spawn.own_process_group = o.own_process_group;
    // In the foreground of a terminal, COMMAND's group gets the terminal
    // (reads, Ctrl-C, Ctrl-Z reach it as they would without corolock).
    if (o.own_process_group && ::isatty(STDIN_FILENO) == 1 &&
        ::tcgetpgrp(STDIN_FILENO) == ::getpgrp())
        s.spawn.terminal_fd = STDIN_FILENO;

    asio::co_spawn(ioc, signal_pump(s), asio::detached);
    int status = exit_status::os_error;
    asio::co_spawn(ioc, run_flow(s), [&](std::exception_ptr e, int result) {
        status = result;
        if (e) {
            status = report_internal_error(e);
            if (s.child.running()) {
                // Never leave the command running without its lock.
                s.child.signal(SIGKILL);
                int ignored = 0;
                ::waitpid(s.child.pid(), &ignored, 0);
                take_terminal_back(s.child.terminal_fd());
            }
        }
        forwarded.cancel();
        sigchld.cancel();
        if (redis) redis->stop();
        for (auto& c : nodes) c.stop();
        locks->stop();
        if (etcd) etcd->stop();
        if (store) store->stop();
        // The client's reconnect loop never runs out of work by itself.
        ioc.stop();
    });
    ioc.run();
    m = redis ? redis->metrics() : locks->metrics();
    return status;
}

}  // namespace

int run_command(const run_options& o) {
    metrics_snapshot m;
    const int status = run_measured(o, m);
    if (!o.metrics_file.empty()) {
        // Written whatever the outcome (a conflict, a failure), and never
        // changing the exit status: a cron job's metrics are secondary.
        if (auto why = write_file_atomically(o.metrics_file, run_metrics_text(o.name, m, status)))
            report_warning("could not write --metrics-file '" + o.metrics_file + "': " + *why);
    }
    return status;
}

}  // namespace corolock::cli
