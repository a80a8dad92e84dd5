// A child process for the multi-process tests: it runs a program with its
// stdout and stderr captured, and every wait on it is bounded in time.
//
// Only the process this object started is ever signalled, and only while it
// has not been reaped, so a recycled PID can never be hit by mistake.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace corolock::test {

// The path of an executable: name itself when it contains a '/', else the
// first match on PATH. Empty when there is none.
std::string find_executable(const std::string& name);

// The process state letter from /proc/PID/stat ('T' when stopped), '?' when
// it cannot be read.
char process_state(pid_t pid);

class child_process {
public:
    // Variables set (or replaced) in the child's environment, on top of ours.
    using environment = std::vector<std::pair<std::string, std::string>>;

    // Starts argv[0] (a path; a bare name is looked up on PATH) with the
    // given arguments. stdin is /dev/null; stdout and stderr go, merged,
    // into output(). Throws std::runtime_error when the program cannot be
    // started. The child is killed (SIGKILL) if the thread that created it
    // ends, so a test binary that dies cannot leave it running.
    explicit child_process(std::vector<std::string> argv, environment env = {});

    // Kills the child (SIGKILL) if it still runs, reaps it, and stops the
    // output reader. Bounded in time; never throws.
    ~child_process();

    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    pid_t pid() const noexcept { return pid_; }

    // Everything the child wrote so far (a copy; safe from any thread).
    std::string output() const;

    // True until the child has exited (reaps it when it has). When it
    // returns false for a child that exited by itself, output() holds all
    // it wrote (as after wait_for()).
    bool running();

    // Sends sig to the child. Returns false, sending nothing, once the child
    // has been reaped.
    bool signal(int sig);

    // SIGSTOP, then waits (bounded) until the kernel reports the child
    // stopped: SIGSTOP takes effect asynchronously, and a test's next step
    // must meet a frozen process. Returns its state letter from
    // /proc/PID/stat ('T' or 't' when stopped; another when `limit` passed).
    char stop(std::chrono::milliseconds limit = std::chrono::seconds(2));

    // SIGKILL, then waits (bounded) for the child to be reaped. Returns its
    // wait status, or nullopt if it was still not gone after the limit.
    std::optional<int> kill9(std::chrono::milliseconds limit = std::chrono::seconds(5));

    // Waits up to limit for the child to exit. Returns the raw wait status
    // (use WIFEXITED/WEXITSTATUS/WTERMSIG, or exit_code()), or nullopt on
    // timeout. Once the child has exited, returns the same status again.
    // After an exit of its own, output() then holds all it wrote: the
    // first such return waits (at most a second more) until the reader has
    // met the pipe's end, since the last lines may still be in the pipe
    // when the child is reaped.
    std::optional<int> wait_for(std::chrono::milliseconds limit);

    // The wait status if the child has been reaped already; never waits.
    std::optional<int> status() const;

    // A shell-style exit code from a wait status: the exit status, or
    // 128 + signal number for a child killed by a signal.
    static int exit_code(int wait_status) noexcept;

private:
    bool try_reap_locked();  // waitpid(WNOHANG); call with mu_ held
    // After the child was reaped: the first time, if it exited by itself,
    // waits (at most a second) until the reader met the pipe's end, so that
    // output() holds all it wrote. `lock` holds mu_.
    void await_output_locked(std::unique_lock<std::mutex>& lock);
    void read_output();

    pid_t pid_ = -1;
    int out_fd_ = -1;  // read end of the child's stdout/stderr pipe

    mutable std::mutex mu_;  // guards output_ and status_, and orders signal() against reaping
    std::string output_;
    std::optional<int> status_;

    std::condition_variable read_all_cv_;  // with mu_
    bool read_all_ = false;                 // the reader met the pipe's end (mu_)
    bool waited_for_output_ = false;        // await_output_locked ran (mu_)
    std::atomic<bool> stop_reading_{false};
    std::thread reader_;
};

}  // namespace corolock::test
