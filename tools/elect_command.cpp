// corolock elect: campaign for a name's leadership and run COMMAND while
// leader (docs/cli.md, docs/election.md "From the shell").
//
// elect is run's flow with a campaign in place of the acquire: the same
// reachability check, signal handling, child supervision and loss handling
// (run_command.cpp), where the held lock is the term (run_lock and held_lock
// in run_lock.hpp hold a corolock::election and its leadership), the token is the
// epoch, and the release is the resignation. What is elect's own: its
// parser (run_arguments.cpp, parse_run with cmd "elect"), COMMAND's
// COROLOCK_EPOCH and COROLOCK_LEADER_VALUE, and the refusal of a backend
// without election (exit 76).
#include "cli.hpp"

namespace corolock::cli {

int elect_command(const run_options& o) {
    // The parser sets the leader's value for elect only.
    if (!o.elect()) return exit_status::os_error;
    return run_command(o);
}

}  // namespace corolock::cli
