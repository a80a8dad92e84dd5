// corolock run: hold a lock while a child process runs.
//
// One thread, one io_context. The phases, in order:
//   starting   check that Redis answers, then acquire (waiting via pub/sub);
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
#include "cli.hpp"

#include <corolock/admin.hpp>
#include <corolock/client.hpp>
#include <corolock/guard.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

extern char** environ;

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

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

class child_process {
public:
    child_process() = default;
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    // Starts argv[0] (looked up on PATH) with `extra_env` added to (or
    // replacing in) this process's environment. Returns 0 or an errno value.
    int spawn(const std::vector<std::string>& argv,
              const std::vector<std::pair<std::string, std::string>>& extra_env) {
        std::vector<std::string> env_storage;
        for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
            const std::string_view entry(*e);
            const bool replaced = std::any_of(extra_env.begin(), extra_env.end(), [&](const auto& kv) {
                return entry.substr(0, kv.first.size() + 1) == kv.first + "=";
            });
            if (!replaced) env_storage.emplace_back(entry);
        }
        for (const auto& [key, value] : extra_env) env_storage.push_back(key + "=" + value);

        std::vector<char*> envp;
        for (auto& s : env_storage) envp.push_back(s.data());
        envp.push_back(nullptr);
        std::vector<std::string> argv_storage(argv);
        std::vector<char*> argvp;
        for (auto& s : argv_storage) argvp.push_back(s.data());
        argvp.push_back(nullptr);

        // The child stays in our process group, so that an interactive
        // COMMAND keeps the terminal (reads, job control) exactly as it would
        // without corolock. Signals we catch are reset to their defaults by
        // exec; signals ignored when we started stay ignored, as with exec.
        posix_spawnattr_t attr;
        if (const int rc = ::posix_spawnattr_init(&attr); rc != 0) return rc;
        if (restore_sigpipe) {
            sigset_t defaults;
            sigemptyset(&defaults);
            sigaddset(&defaults, SIGPIPE);
            ::posix_spawnattr_setsigdefault(&attr, &defaults);
            ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
        }
        pid_t pid = -1;
        const int rc = ::posix_spawnp(&pid, argvp[0], nullptr, &attr, argvp.data(), envp.data());
        ::posix_spawnattr_destroy(&attr);
        if (rc != 0) return rc;
        pid_ = pid;
        return 0;
    }

    pid_t pid() const noexcept { return pid_; }
    bool running() const noexcept { return pid_ > 0; }

    // Set when corolock ignores SIGPIPE only for itself: the child gets the
    // default disposition back.
    bool restore_sigpipe = false;

    // Only while the child is unreaped: after waitpid the pid may be reused
    // by an unrelated process, which must never get our signals.
    void signal(int signo) const noexcept {
        if (pid_ > 0) ::kill(pid_, signo);
    }

    // The wait status once the child has exited; empty while it runs.
    std::optional<int> try_reap() noexcept {
        if (pid_ <= 0) return std::nullopt;
        int status = 0;
        pid_t r = -1;
        // EINTR: a signal arrived during the call; a few retries suffice.
        for (int attempt = 0; attempt < 100; ++attempt) {
            r = ::waitpid(pid_, &status, WNOHANG);
            if (r != -1 || errno != EINTR) break;
        }
        if (r == pid_) {
            pid_ = -1;
            return status;
        }
        if (r == -1 && errno == ECHILD) {
            // Someone else reaped it (cannot happen unless SIGCHLD was set to
            // SIG_IGN behind our back); report it as a failure, never hang.
            pid_ = -1;
            return (exit_status::os_error & 0xff) << 8;
        }
        return std::nullopt;
    }

private:
    pid_t pid_ = -1;
};

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

enum class phase { starting, running, finishing };

struct run_state {
    run_state(const run_options& opts, client& c, asio::signal_set& fwd, asio::signal_set& chld)
        : o(opts), redis(c), forwarded(fwd), sigchld(chld) {}

    const run_options& o;
    client& redis;
    asio::signal_set& forwarded;
    asio::signal_set& sigchld;
    std::shared_ptr<spdlog::logger> log;

    phase current = phase::starting;
    int pending_signal = 0;                 // received while starting
    asio::cancellation_signal cancel_start; // cancels the PING or the acquire
    child_process child;
    bool lost = false;
    const std::set<int>* inherited_fds = nullptr;

    template <class... Args>
    void note(spdlog::format_string_t<Args...> fmt, Args&&... args) {
        if (log) log->info(fmt, std::forward<Args>(args)...);
    }
};

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
            s.note("passing {} on to pid {}", signal_name(signo), s.child.pid());
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
asio::awaitable<void> handle_loss(run_state& s, const guard& g) {
    auto [ec] = co_await g.async_until_lost(use_nothrow);
    if (ec != error::lock_lost) co_return;  // released, or the client stopped: nothing to watch
    if (s.current != phase::running) {
        // Lost after the child exited: the release reports it.
        co_return;
    }
    s.lost = true;
    if (s.o.on_lost == on_lost_action::ignore) {
        report_warning("lost the lease on lock '" + s.o.name + "' while pid " +
                       std::to_string(s.child.pid()) +
                       " runs; the command is no longer protected (--on-lost ignore: letting "
                       "it run)");
        co_return;
    }
    report_warning("lost the lease on lock '" + s.o.name + "'; sending SIGTERM to pid " +
                   std::to_string(s.child.pid()));
    s.child.signal(SIGTERM);
    asio::steady_timer grace(co_await asio::this_coro::executor, s.o.grace);
    co_await grace.async_wait(use_nothrow);
    if (s.current != phase::running || !s.child.running()) co_return;  // it exited in time
    report_warning("pid " + std::to_string(s.child.pid()) + " still runs " +
                   format_duration(s.o.grace) + " after SIGTERM; sending SIGKILL");
    s.child.signal(SIGKILL);
}

// Gives a level back, bounded by the client's command timeout. Returns the
// release's result.
asio::awaitable<error_code> release(guard& g) {
    auto [ec] = co_await g.async_release(use_nothrow);
    co_return ec;
}

asio::awaitable<int> run_flow(run_state& s) {
    const auto& o = s.o;
    auto interrupted = [&](std::string_view while_doing) {
        report_error("got " + signal_name(s.pending_signal) + " while " +
                     std::string(while_doing) + "; nothing is held");
        return exit_status::signal_base + s.pending_signal;
    };

    // 1. Is Redis there at all? Asked separately, so that a wrong URL or a
    // stopped server is reported within seconds instead of looking like a
    // lock that never frees up.
    const error_code reach = co_await check_reachable(s.redis, s.cancel_start.slot());
    s.cancel_start.slot().clear();
    if (s.pending_signal != 0) co_return interrupted("connecting to Redis");
    if (reach) co_return report_redis_failure(o.common, "run", reach);

    // 2. Acquire, waiting via the unlock channel.
    mutex lock(s.redis, o.name);
    lock_options opts;
    opts.lease = o.lease;
    if (o.wait) opts.wait = *o.wait;
    auto [aec, g] = co_await lock.async_acquire(
        opts, asio::bind_cancellation_slot(s.cancel_start.slot(), use_nothrow));
    s.cancel_start.slot().clear();
    if (s.pending_signal != 0) {
        if (g) {
            // Granted just before the signal was seen.
            co_await release(g);
        } else {
            // The acquire was abandoned, but its script may still be on the
            // way and grant the lock after all (the library then releases
            // it in the background, which a process about to exit cannot
            // wait for). This owner-checked release is queued behind any
            // such script, so when it answers, nothing of ours is left.
            auto [rec] = co_await async_release_owner(s.redis, o.name, lock.owner_id(), use_nothrow);
            if (rec && rec != error::expired && rec != error::not_owner)
                report_warning("could not confirm that the abandoned acquire left nothing behind (" +
                               rec.message() + "); if it did, Redis frees lock '" + o.name +
                               "' within " + o.lease_text);
            else if (!rec)
                s.note("the abandoned acquire had been granted; released it");
        }
        co_return interrupted("waiting for lock '" + o.name + "'");
    }
    if (aec == error::wait_timeout || aec == error::lock_held) {
        if (o.wait && o.wait->count() == 0)
            report_error("lock '" + o.name + "' is held by another owner (--no-wait)");
        else
            report_error("lock '" + o.name + "' not acquired within " + o.wait_text);
        co_return exit_status::not_acquired;
    }
    if (aec) co_return report_redis_failure(o.common, "acquire lock '" + o.name + "'", aec);
    s.note("acquired lock '{}' (token {})", o.name, g.token());

    // 3. Start the command.
    close_own_descriptors_on_exec(*s.inherited_fds);
    const int spawn_error = s.child.spawn(
        o.command, {{"COROLOCK_TOKEN", std::to_string(g.token())}, {"COROLOCK_NAME", o.name}});
    if (spawn_error != 0) {
        s.current = phase::finishing;
        co_await release(g);
        if (spawn_error == ENOENT) {
            report_error(o.command[0] + ": command not found");
            co_return exit_status::not_found;
        }
        report_error(o.command[0] + ": " + std::strerror(spawn_error));
        if (spawn_error == EACCES || spawn_error == ENOEXEC || spawn_error == EISDIR ||
            spawn_error == EPERM)
            co_return exit_status::cannot_execute;
        co_return exit_status::os_error;
    }
    s.current = phase::running;
    s.note("started pid {}: {}", s.child.pid(), o.command[0]);

    // 4. Wait for it; a lost lease is handled alongside.
    asio::co_spawn(co_await asio::this_coro::executor, handle_loss(s, g), asio::detached);
    const int wait_status = co_await wait_for_child(s);
    s.current = phase::finishing;
    const int child_status = status_of(wait_status);
    s.note("command exited with status {}", child_status);

    // 5. Release, explicitly: bounded by the command timeout.
    const error_code rec = co_await release(g);
    if (s.lost) {
        if (o.on_lost == on_lost_action::kill) {
            report_error("lock '" + o.name + "' was lost while the command ran (exit " +
                         std::to_string(exit_status::lease_lost) + ")");
            co_return exit_status::lease_lost;
        }
        co_return child_status;
    }
    if (rec == error::expired || rec == error::not_owner) {
        report_warning("the lease on lock '" + o.name + "' had ended before the command finished (" +
                       rec.message() + "): part of its work may have run unprotected");
        if (o.on_lost == on_lost_action::kill) co_return exit_status::lease_lost;
    } else if (rec) {
        report_warning("could not confirm the release of lock '" + o.name + "' (" +
                       rec.message() + "); Redis frees it within " + o.lease_text +
                       " at the latest");
    } else {
        s.note("released lock '{}'", o.name);
    }
    co_return child_status;
}

}  // namespace

int run_command(const run_options& o) {
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

    const config cfg = tool_config(o.common);
    std::optional<client> redis;
    try {
        redis.emplace(ioc.get_executor(), cfg);
    } catch (const std::exception& e) {
        report_error(std::string("bad configuration: ") + e.what());
        return exit_status::usage;
    }

    run_state s(o, *redis, forwarded, sigchld);
    s.log = cfg.logger;
    s.inherited_fds = &inherited;
    s.child.restore_sigpipe = sigpipe_was_default;

    asio::co_spawn(ioc, signal_pump(s), asio::detached);
    int status = exit_status::os_error;
    asio::co_spawn(ioc, run_flow(s), [&](std::exception_ptr e, int result) {
        status = result;
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                report_error(std::string("internal error: ") + ex.what());
            } catch (...) {
                report_error("internal error");
            }
            status = exit_status::os_error;
            if (s.child.running()) {
                // Never leave the command running without its lock.
                s.child.signal(SIGKILL);
                int ignored = 0;
                ::waitpid(s.child.pid(), &ignored, 0);
            }
        }
        forwarded.cancel();
        sigchld.cancel();
        redis->stop();
        // The client's reconnect loop never runs out of work by itself.
        ioc.stop();
    });
    ioc.run();
    return status;
}

}  // namespace corolock::cli
