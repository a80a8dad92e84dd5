// Leader election on Redis under the process-level faults: the scenarios of
// test/fault/election_scenarios.hpp (a leader paused past its lease, killed
// with kill -9, the server restarted), with one redis-server as both the
// election's server and the resource. The same scenarios run on etcd
// (etcd_election_faults_test.cpp) and ZooKeeper (zk_election_faults_test.cpp).
// (A partitioned Redis leader: network_faults_test.cpp; a Sentinel failover:
// sentinel_failover_test.cpp.)
#include "fault/election_scenarios.hpp"

#include <catch2/catch.hpp>

using namespace corolock::test::fault;
using corolock::test::redis_server;
namespace scenarios = corolock::test::fault::election_scenarios;

TEST_CASE("election: a leader paused past its lease loses its term in time and is fenced off",
          "[fault][process][election]") {
    redis_server server;
    scenarios::leader_paused({.backend = "redis", .resource = server});
}

TEST_CASE("election: a leader killed with kill -9 is followed within its lease",
          "[fault][process][election]") {
    redis_server server;
    scenarios::leader_killed({.backend = "redis", .resource = server});
}

TEST_CASE("election: a redis-server restart during a term hangs no candidate and reuses no epoch",
          "[fault][process][election]") {
    // With its append-only file the restarted server has the term, the
    // queue and the fence counter back: epochs go on rising.
    redis_server server(durable_server());
    scenarios::server_restarted({.backend = "redis", .resource = server});
}
