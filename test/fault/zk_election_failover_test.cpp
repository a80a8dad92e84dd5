// Leader election across a failover of a three-server ZooKeeper ensemble:
// the scenario server_killed of test/fault/election_scenarios.hpp, the
// resource on a redis-server of its own. The workers' client picks a server
// of the URL's list itself; the session (the lease) is the lock failover
// test's (zk_failover_test.cpp): sessions survive the election when their
// clients reconnect within it, and a term whose session could not be
// confirmed in time is lost (the checker holds it to the lost signal's rules).
#include "fault/election_scenarios.hpp"
#include "support/zk_server.hpp"

#include <catch2/catch.hpp>

using namespace corolock::test;
using namespace corolock::test::fault;
namespace scenarios = corolock::test::fault::election_scenarios;

namespace {

// Long enough for the kill (after three terms and up to 3 s looking for
// its moment), ZooKeeper's election and a good run of terms after it.
constexpr auto zk_failover_duration = 14000ms;

void zk_ensemble_killed(scenarios::failover_victim which) {
    zk_server_options zo;
    zo.servers = 3;
    zk_ensemble ensemble(zo);
    redis_server resource;
    scenarios::server_killed({.backend = "zk",
                              .resource = resource,
                              .urls = {ensemble.url() + "?session_timeout_ms=2000"},
                              .lease = 2000ms,
                              .duration = zk_failover_duration},
                             ensemble, which);
}

}  // namespace

TEST_CASE("zk election: the ensemble's leader killed while a worker leads keeps one leader and "
          "rising epochs",
          "[fault][election][zk][failover]") {
    zk_ensemble_killed(scenarios::failover_victim::server_leader);
}

TEST_CASE("zk election: the server the leading worker talks to killed keeps one leader and rising "
          "epochs",
          "[fault][election][zk][failover]") {
    zk_ensemble_killed(scenarios::failover_victim::leaders_member);
}
