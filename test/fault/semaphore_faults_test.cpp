// corolock::semaphore under process faults: lock_worker processes cycling
// on one semaphore (--semaphore=K/N) while the test pauses one holder past
// its lease and kills another, or restarts the redis-server, under a seeded
// schedule (COROLOCK_FAULT_SEED replays one). The history checker's permits rule: at no moment more than
// N permits inside safe windows.
#include "fault/fault_fleet.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <set>
#include <utility>
#include <vector>

using namespace corolock::test::fault;
using corolock::test::mono_ns;
using corolock::test::redis_server;
using corolock::test::redis_server_options;

TEST_CASE("semaphore: a paused and a killed holder, never more than N permits in windows",
          "[fault][process][semaphore]") {
    const auto seed = fault_seed("semaphore faults");
    redis_server server;
    fleet f(server,
            {.workers = 5, .lease = 1000ms, .hold = 300ms, .duration = 6000ms, .name = "semfault",
             .semaphore = "1/3"},
            seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 300ms, 900ms));

    const auto victim = f.pause_in_section(5s);
    REQUIRE(victim);
    const std::size_t paused = victim->index;
    const long long paused_pid = f.worker(paused).pid();
    const long long paused_at = victim->at;
    const auto killed = f.worker_in_section(5s, {paused});
    REQUIRE(killed);
    const long long killed_pid = f.worker(*killed).pid();
    const long long killed_at = mono_ns();
    f.kill9(*killed);
    std::this_thread::sleep_for(f.options().lease + draw(f.rng(), 800ms, 1200ms));
    const long long resumed_at = mono_ns();
    f.resume(paused);
    f.finish();

    // No counter: a semaphore's holders overlap, so a non-atomic increment
    // inside their sections is not protected.
    const auto r = f.check({});
    INFO(r.report());
    CHECK(r.ok());
    const int most = most_at_once(r);
    std::cout << "semaphore of 3: at most " << most << " windows open at once, " << r.holders
              << " grants" << std::endl;
    CHECK(most >= 2);  // the holders did overlap
    CHECK(most <= 3);
    const auto* held = holder_at(r, paused_pid, paused_at);
    REQUIRE(held);
    CHECK(held->window_end < resumed_at);
    CHECK(held->lost >= resumed_at);
    REQUIRE(holder_at(r, killed_pid, killed_at));
}

TEST_CASE("semaphore: a redis-server restart while permits are held and waited for",
          "[fault][process][semaphore]") {
    const auto seed = fault_seed("semaphore restart");
    // With its append-only file the restarted server has the grants back
    // (and the fence counter): no more than N permits at once, before and
    // after, and nobody hangs.
    redis_server_options so;
    so.extra_args = {"--appendonly", "yes", "--appendfsync", "always"};
    redis_server server(so);
    fleet f(server,
            {.workers = 5, .lease = 1000ms, .hold = 300ms, .duration = 6000ms,
             .name = "semrestart", .semaphore = "1/3"},
            seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 1000ms, 2000ms));
    const auto held = f.worker_in_section(5s);
    REQUIRE(held);
    const long long up_at = restart_server(f, server);
    f.finish();

    // No counter, as above: the holders overlap.
    const auto r = f.check({});
    INFO(r.report());
    CHECK(r.ok());
    CHECK(r.count("permits") == 0);
    CHECK(most_at_once(r) <= 3);
    std::set<long long> after;
    for (const auto& x : r.holder_list)
        if (x.acquire_ok > up_at) after.insert(x.pid);
    std::cout << "semaphore restart: " << r.holders << " holders, " << after.size()
              << " workers held after the restart" << std::endl;
    CHECK(after.size() >= 3);
}
