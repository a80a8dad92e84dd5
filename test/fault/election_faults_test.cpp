// Leader election under the process-level faults (test/fault/fault_fleet.hpp):
// lock_worker processes in elect-cycle mode, each cycle a term (campaign,
// the section as leader with the term's epoch as its token, resign). The
// history checker reads the terms as it reads a lock's holders: at most one
// leader in the safe window, epochs strictly increasing and fencing off a
// late leader's write, every lost signal before the server could end the
// term. Each case prints the time from the fault to the next leader.
// (A partitioned leader: network_faults_test.cpp; a Sentinel failover:
// sentinel_failover_test.cpp.)
#include "fault/fault_fleet.hpp"

#include <catch2/catch.hpp>

#include <iostream>
#include <thread>

using namespace corolock::test::fault;
using corolock::test::mono_ns;
using corolock::test::redis_server;

namespace {
fleet_options election_fleet(const char* name) {
    // A rest after each resign, so that a waiting candidate is the one the
    // resign hands over to (the queue is first come, first served).
    return {.workers = 4, .lease = 1000ms, .hold = 200ms, .duration = 4000ms, .name = name,
            .elect = true, .rest = 100ms};
}

// Epochs of the terms in the order they were won: strictly increasing.
bool epochs_rise(const corolock::test::history::check_result& r) {
    std::vector<const corolock::test::history::holder_info*> terms;
    for (const auto& h : r.holder_list) terms.push_back(&h);
    std::sort(terms.begin(), terms.end(),
              [](const auto* a, const auto* b) { return a->acquire_ok < b->acquire_ok; });
    for (std::size_t i = 1; i < terms.size(); ++i)
        if (terms[i]->token <= terms[i - 1]->token) return false;
    return true;
}
}  // namespace

TEST_CASE("election: a leader paused past its lease loses its term in time and is fenced off",
          "[fault][process][election]") {
    const auto seed = fault_seed("election leader paused");
    redis_server server;
    fleet f(server, election_fleet("elect-paused"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 200ms, 600ms));  // pacing: let some terms run
    const auto [index, pid, paused_at, resumed_at] = pause_past_lease(f, 1000ms);
    f.finish();

    const auto r = f.check(f.counted());
    INFO(r.report());
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto* held = holder_at(r, pid, paused_at);
    REQUIRE(held);
    CHECK(held->window_end < resumed_at);
    CHECK(held->lost >= resumed_at);
    INFO("the late write: " << held->write_outcome << " " << held->write_error);
    CHECK(held->write_outcome == "rejected");
    const auto* successor = first_acquire_after(r, paused_at, pid);
    REQUIRE(successor);
    CHECK(successor->token > held->token);
    std::cout << "election pause: next leader " << ms_of(successor->acquire_ok - paused_at)
              << " ms after the pause (lease " << f.options().lease.count() << " ms)" << std::endl;
}

TEST_CASE("election: a leader killed with kill -9 is followed within its lease",
          "[fault][process][election]") {
    const auto seed = fault_seed("election leader killed");
    redis_server server;
    fleet f(server, election_fleet("elect-killed"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 200ms, 600ms));
    const auto victim = f.worker_in_section(5s);
    REQUIRE(victim);
    const long long pid = f.worker(*victim).pid();
    const long long killed_at = mono_ns();
    f.kill9(*victim);
    f.finish();

    const auto r = f.check(f.counted());
    INFO(r.report());
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto* dead = holder_at(r, pid, killed_at);
    REQUIRE(dead);
    const auto* successor = first_acquire_after(r, killed_at, pid);
    REQUIRE(successor);
    CHECK(successor->token > dead->token);
    // Not before the dead leader's term could have ended on the server...
    CHECK(successor->acquire_ok >= dead->window_end);
    // ...and, loosely, about then: the waiting candidates are woken by the
    // lease's end, not by the end of their own waits (5 s). A lease of slack
    // for a loaded machine.
    const double after_ms = ms_of(successor->acquire_ok - killed_at);
    std::cout << "election kill -9: next leader " << after_ms << " ms after the kill (lease "
              << f.options().lease.count() << " ms)" << std::endl;
    const auto lease_ms = f.options().lease.count();
    CHECK(after_ms <= static_cast<double>(2 * lease_ms));
}

TEST_CASE("election: a redis-server restart during a term hangs no candidate and reuses no epoch",
          "[fault][process][election]") {
    const auto seed = fault_seed("election restart");
    // With its append-only file the restarted server has the term, the
    // queue and the fence counter back: epochs go on rising.
    redis_server server(durable_server());
    fleet f(server, election_fleet("elect-restart"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 500ms, 1000ms));
    const auto held = f.worker_in_section(5s);
    REQUIRE(held);
    const long long up_at = restart_server(f, server);
    f.finish();

    const auto r = f.check(f.counted());
    INFO(r.report());
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto after = acquired_after(r, up_at);
    const auto* first = first_acquire_after(r, up_at);
    std::cout << "election restart: " << r.holders << " terms, " << after.size()
              << " workers led after the restart"
              << (first ? ", the first " + std::to_string(ms_of(first->acquire_ok - up_at)) +
                              " ms after it answered again"
                        : std::string())
              << std::endl;
    CHECK(after.size() >= 2);
}
