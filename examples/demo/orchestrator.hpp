// The demo's conductor: starts the workers, freezes one of them while it
// holds the lock, and turns their event lines into the summary.
#pragma once

#include "scenario.hpp"

namespace demo {

// Runs the whole scenario and prints the summary on stdout. Returns 0 when
// everything the demo claims held, 1 when a claim failed, 2 when the run
// itself could not be completed (Redis unreachable, a worker died, a
// deadline passed), 130 when interrupted.
int run_orchestrator(const scenario& sc);

}  // namespace demo
