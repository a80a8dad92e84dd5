#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace bench {

child spawn_child(const std::vector<std::string>& argv) {
    int fds[2];
    // Close-on-exec, so that a second child never inherits the first one's
    // pipe (it would keep the pipe open and hide the first child's EOF).
    if (::pipe2(fds, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);

    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);

    child c;
    const int rc = ::posix_spawn(&c.pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
    }
    c.out_fd = fds[0];
    return c;
}

void collect_children(std::vector<child*> children, clock::time_point deadline) {
    std::vector<child*> open;
    for (auto* c : children)
        if (c->out_fd >= 0) open.push_back(c);
    char buf[64 * 1024];
    // Bounded by the deadline: after it, the children are killed and their
    // pipes closed, which ends the loop.
    while (!open.empty()) {
        const auto now = clock::now();
        if (now >= deadline) {
            for (auto* c : open) {
                ::kill(c->pid, SIGKILL);
                c->killed = true;
                ::close(c->out_fd);
                c->out_fd = -1;
            }
            open.clear();
            break;
        }
        std::vector<pollfd> pfds;
        for (auto* c : open) pfds.push_back(pollfd{c->out_fd, POLLIN, 0});
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        const int wait_ms = static_cast<int>(std::clamp<long long>(left.count(), 1, 200));
        const int n = ::poll(pfds.data(), pfds.size(), wait_ms);
        if (n < 0 && errno != EINTR) throw std::runtime_error("poll failed");
        if (n <= 0) continue;
        for (std::size_t i = 0; i < pfds.size(); ++i) {
            if (pfds[i].revents == 0) continue;
            const ssize_t got = ::read(open[i]->out_fd, buf, sizeof buf);
            if (got > 0) {
                open[i]->out.append(buf, static_cast<std::size_t>(got));
            } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                ::close(open[i]->out_fd);
                open[i]->out_fd = -1;
            }
        }
        std::erase_if(open, [](child* c) { return c->out_fd < 0; });
    }
    for (auto* c : children) {
        if (c->pid <= 0) continue;
        int status = 0;
        // A child that closed stdout exits right after; if it does not within
        // a few seconds it is killed, so this wait is bounded too.
        for (int i = 0; i < 300; ++i) {
            const pid_t r = ::waitpid(c->pid, &status, WNOHANG);
            if (r == c->pid) break;
            if (r < 0) break;
            if (i == 299) {
                ::kill(c->pid, SIGKILL);
                c->killed = true;
                ::waitpid(c->pid, &status, 0);
                break;
            }
            ::usleep(10'000);
        }
        c->exit_status = WIFEXITED(status) && !c->killed ? WEXITSTATUS(status) : -1;
        c->pid = -1;
    }
}

}  // namespace bench
