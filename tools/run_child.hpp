// corolock run's child: COMMAND started (fork + execve), signalled and
// reaped, the descriptors it inherits and its environment (run_child.cpp).
#pragma once

#include "cli.hpp"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace corolock::cli {

// ---- file descriptors ----

// The open descriptors of this process. /proc (or /dev/fd) lists them
// exactly; without either, the low range is probed, which covers everything
// a single-connection tool opens.
std::set<int> open_descriptors();

// Asio opens its sockets without FD_CLOEXEC, so without this the child would
// inherit the Redis connection (and keep it open in any daemon it leaves
// behind). Descriptors corolock inherited itself are passed on untouched:
// passing descriptors through is part of running a command.
void close_own_descriptors_on_exec(const std::set<int>& inherited);

// ---- the child ----

// How COMMAND is started.
struct spawn_options {
    bool own_process_group = true;  // a process group of its own, signalled as a whole
    int terminal_fd = -1;           // >= 0: hand this terminal's foreground to the group
    bool restore_sigpipe = false;   // SIGPIPE back to its default in the child
};

// Takes the terminal's foreground back for corolock's own process group.
// Called from the background (the child's group had it), where tcsetpgrp
// would stop us with SIGTTOU unless it is blocked.
void take_terminal_back(int fd);

class child_process {
public:
    child_process() = default;
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    // Starts argv[0] (looked up on PATH) with `env` as its whole
    // environment. Returns 0 or an errno value.
    int spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const spawn_options& opts);

    pid_t pid() const noexcept { return pid_; }
    bool running() const noexcept { return pid_ > 0; }
    bool own_group() const noexcept { return group_; }
    int terminal_fd() const noexcept { return terminal_fd_; }

    // To COMMAND's process group (or to its process alone, with
    // --no-process-group). Only while the child is unreaped: after waitpid
    // the pid may be reused by an unrelated process, which must never get
    // our signals.
    void signal(int signo) const noexcept;

    // After the child was reaped: SIGKILL to what is left of its group (a
    // background job of a shell script). The group's id cannot be reused
    // while any member lives; when none does, this finds nothing.
    void kill_leftovers() noexcept;

    // The wait status once the child has exited; empty while it runs. A stop
    // (Ctrl-Z, when the child has the terminal) is passed on to corolock
    // itself, so the shell sees the job stopped, and undone on SIGCONT.
    std::optional<int> try_reap() noexcept;

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
    const run_options& o, const std::vector<std::pair<std::string, std::uint64_t>>& tokens);

// The exit status of a wait status: the code, or signal_base + the signal.
int status_of(int wait_status);
// "SIGTERM", for messages.
std::string signal_name(int signo);

}  // namespace corolock::cli
