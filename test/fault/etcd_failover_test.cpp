// The etcd backend across a leader failover: a three-member etcd cluster on
// loopback holds the locks; lock_worker processes (test/worker, "cycle"
// mode) take them through a URL that lists all three members, while the
// protected resource (the non-atomic counter and the fenced oracle) lives on
// a separate redis-server. The leader is killed with SIGKILL while one
// worker of a name holds it and the others wait.
//
// What it asserts, from the merged histories (test/support/history.hpp):
//  - I1: no two holders of a name inside their safe windows, across the
//    failover; I2: tokens (etcd revisions) still rise, and the fenced oracle
//    refuses every stale write; I3, I5; the counters end exact.
//  - waiters get through: each name is granted again after the kill, and
//    every worker exits cleanly.
// It prints the time from the kill to the first grant after it (no timed
// assertion: speed belongs to bench/).
//
// Workers do not all list the members in the same order: two of each name
// list the leader first, so their transport (requests and the shared watch)
// must fail over to another endpoint when the leader's connections die,
// whether they hold or wait at the kill; the third lists a follower first,
// which forwards to whichever member the election makes leader.
#include "fault/failover_checks.hpp"
#include "fault/fault_fleet.hpp"
#include "support/etcd_server.hpp"
#include "support/redis_server.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace h = corolock::test::history;
using namespace corolock::test;
using namespace corolock::test::fault;

TEST_CASE("etcd: the leader killed while locks are held and waited on",
          "[etcd][fault][failover]") {
    const auto seed = fault_seed("etcd leader failover");
    etcd_server_options eo;
    eo.members = 3;
    etcd_cluster cluster(eo);
    redis_server resource;
    const std::size_t leader = cluster.leader();
    // Workers 0 and 1 of each name list the leader first, worker 2 a follower.
    const std::vector<std::string> urls = {cluster.url(leader), cluster.url(leader),
                                           cluster.url(leader + 1)};

    // Two names, three workers each, cycling for long enough to span the
    // kill, the election and a good run after it. The workers' duration is
    // fixed when they start (lock_worker's DURATION_MS): the kill comes as
    // soon as both names cycle, so most of it lies after the kill.
    const auto lease = 2000ms;
    std::vector<std::unique_ptr<fleet>> fleets;
    for (const char* name : {"failover:a", "failover:b"}) {
        fleets.push_back(std::make_unique<fleet>(
            resource,
            fleet_options{.workers = 3, .lease = lease, .hold = 120ms, .duration = 12000ms,
                          .name = name, .urls = urls, .separate_resource = true},
            seed));
    }
    for (auto& f : fleets) f->start();

    // Both names cycle: each has passed its lock around (three grants).
    const bool cycling = wait_for_grants(fleets, 3, 0, 30s);
    REQUIRE(cycling);
    // Whom to kill, known before the moment comes (the query takes a
    // while, and a section lasts 60 to 120 ms); then the kill at once when
    // a worker of the first name is inside its critical section and
    // another waits for the lock.
    const std::size_t killed = cluster.leader();
    const auto victim = worker_in_section_with_waiter(*fleets[0], 10s);
    REQUIRE(victim);
    const long long killed_at = mono_ns();
    cluster.kill9(killed);
    // The survivors elect a new leader (bounded by the cluster's start timeout).
    const std::size_t new_leader = cluster.leader();
    CHECK(new_leader != killed);

    // Waiters get through: each name is granted again after the kill. Wait
    // for it (bounded; it gives up once a name's workers have all ended)
    // rather than count on the run lasting long enough.
    const bool granted_again = wait_for_grants(fleets, 1, killed_at, 60s);
    CHECK(granted_again);

    long cycles = 0;
    for (auto& f : fleets) cycles += f->finish();
    CHECK(cycles > 0);

    const long long first_grant_after = check_fleets_across_kill(fleets, killed_at);
    REQUIRE(first_grant_after >= 0);
    std::cout << "leader failover: member " << killed << " killed, member " << new_leader
              << " leads; first grant " << ms_of(first_grant_after - killed_at)
              << " ms after the kill; " << cycles << " cycles in all (lease " << lease.count()
              << " ms)" << std::endl;
}
