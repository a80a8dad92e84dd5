// The ZooKeeper backend across a leader failover: a three-server ensemble
// on loopback holds the locks; lock_worker processes (test/worker, "cycle"
// mode) take them through a URL that lists all three servers, while the
// protected resource (the non-atomic counter and the fenced oracle) lives on
// a separate redis-server. The leader is killed with SIGKILL while one
// worker of a name holds it and the others wait.
//
// What it asserts, from the merged histories (test/support/history.hpp):
//  - I1: no two holders of a name inside their safe windows, across the
//    failover; I2: tokens (zxids) still rise, and the fenced oracle refuses
//    every stale write; I3, I5; the counters end exact.
//  - waiters get through: each name is granted again after the kill, and
//    every worker exits cleanly.
// It prints the time from the kill to the first grant after it (no timed
// assertion: speed belongs to bench/).
//
// The session is the lease: sessions survive the election (the new leader
// restores them with a fresh timeout) when their clients reconnect within
// the timeout; a holder whose heartbeats go unanswered for longer is told
// lost (safe, and counted by the checker, never an overlap).
#include "fault/failover_checks.hpp"
#include "fault/fault_fleet.hpp"
#include "support/redis_server.hpp"
#include "support/zk_server.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace corolock::test;
using namespace corolock::test::fault;

TEST_CASE("zk: the leader killed while locks are held and waited on", "[zk][fault][failover]") {
    const auto seed = fault_seed("zk leader failover");
    zk_server_options zo;
    zo.servers = 3;
    zk_ensemble ensemble(zo);
    redis_server resource;
    const auto lease = 2000ms;
    const std::string url = ensemble.url() + "?session_timeout_ms=2000";

    // Two names, three workers each, cycling for long enough to span the
    // kill, the election and a good run after it.
    std::vector<std::unique_ptr<fleet>> fleets;
    for (const char* name : {"failover:a", "failover:b"}) {
        fleets.push_back(std::make_unique<fleet>(
            resource,
            fleet_options{.workers = 3, .lease = lease, .hold = 120ms, .duration = 9000ms,
                          .name = name, .urls = {url}, .separate_resource = true},
            seed));
    }
    for (auto& f : fleets) f->start();

    std::this_thread::sleep_for(2500ms);
    const auto victim = fleets[0]->worker_in_section(5s);
    REQUIRE(victim);
    const std::size_t killed = ensemble.leader();
    const long long killed_at = mono_ns();
    ensemble.kill9(killed);
    const std::size_t new_leader = ensemble.leader();
    CHECK(new_leader != killed);

    long cycles = 0;
    for (auto& f : fleets) cycles += f->finish();
    CHECK(cycles > 0);

    const long long first_grant_after = check_fleets_across_kill(fleets, killed_at);
    REQUIRE(first_grant_after >= 0);
    std::cout << "zk leader failover: server " << killed << " killed, server " << new_leader
              << " leads; first grant " << ms_of(first_grant_after - killed_at)
              << " ms after the kill; " << cycles << " cycles in all (session 2000 ms)"
              << std::endl;
}
