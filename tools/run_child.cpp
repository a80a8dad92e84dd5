// corolock run's child (run_child.hpp).
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

#include "run_child.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <utility>

extern char** environ;

namespace corolock::cli {

namespace {

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
        // Built piece by piece: here g++ 12 at -O3 reports a false -Wrestrict
        // for assigning or adding strings (GCC bug 105329).
        if (dir.empty()) dir.push_back('.');  // an empty PATH entry is the current directory
        dir += '/';
        dir += file;
        out.push_back(std::move(dir));
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return out;
}

}  // namespace

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

void close_own_descriptors_on_exec(const std::set<int>& inherited) {
    for (int fd : open_descriptors()) {
        if (inherited.count(fd) != 0) continue;
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags != -1 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

void take_terminal_back(int fd) {
    if (fd < 0) return;
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &old);
    ::tcsetpgrp(fd, ::getpgrp());
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

int child_process::spawn(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env, const spawn_options& opts) {
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

void child_process::signal(int signo) const noexcept {
    if (pid_ <= 0) return;
    if (group_) ::kill(-pid_, signo);
    else ::kill(pid_, signo);
}

void child_process::kill_leftovers() noexcept {
    if (group_ && last_pid_ > 0) ::kill(-last_pid_, SIGKILL);
}

std::optional<int> child_process::try_reap() noexcept {
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

}  // namespace corolock::cli
