// Child processes of corolock_bench: started with a pipe on stdout, read
// until they finish or a deadline passes, and stopped by their own PID.
#pragma once

#include "bench.hpp"

#include <sys/types.h>

#include <string>
#include <vector>

namespace bench {

struct child {
    pid_t pid = -1;
    int out_fd = -1;
    std::string out;      // everything the child wrote to stdout
    int exit_status = -1; // WEXITSTATUS, or -1 when it was killed or crashed
    bool killed = false;  // we ended it at the deadline
};

// Starts argv[0] with argv; stderr is shared with this process. Throws
// std::runtime_error when the process cannot be started.
child spawn_child(const std::vector<std::string>& argv);

// Reads every child's stdout until each closes it, then reaps them. A child
// still running at `deadline` is killed (SIGKILL, by PID) and marked killed.
void collect_children(std::vector<child*> children, clock::time_point deadline);

}  // namespace bench
