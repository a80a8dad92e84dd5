// One worker process of the demo: `corolock_demo worker ...`, started by the
// orchestrator, never by hand.
#pragma once

#include "scenario.hpp"

namespace demo {

struct worker_options {
    scenario sc;
    int id = 0;
    bool victim = false;  // the worker the orchestrator will freeze
    // Gives up (and reports what is stuck) after this long; the
    // orchestrator sets it a little below its own deadline.
    milliseconds deadline{60000};
};

// Runs the worker until every coroutine found the stock sold out. Prints
// event lines on stdout; returns the process exit code.
int run_worker(const worker_options& opt);

}  // namespace demo
