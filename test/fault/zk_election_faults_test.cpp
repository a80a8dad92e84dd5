// Leader election on ZooKeeper under faults: the scenarios of
// test/fault/election_scenarios.hpp on one standalone server (started by
// support/lock_server.hpp as the conformance suite's, with a one-second
// session), the resource on a redis-server of its own. A term is an
// ephemeral node (docs/election.md): a killed or paused leader's term ends
// with its session on the server, at a tick after its timeout
// (lock_server::expiry_slack()).
#include "fault/election_scenarios.hpp"

#include <catch2/catch.hpp>

using namespace corolock::test;
using namespace corolock::test::fault;
namespace scenarios = corolock::test::fault::election_scenarios;

namespace {
// Longer than Redis's runs: a restarted server (a JVM) takes seconds to
// answer, and a lost term is free only at its session's end on the server.
constexpr auto zk_duration = 12000ms;
}  // namespace

TEST_CASE("zk election: a leader paused past its lease loses its term in time and is fenced off",
          "[fault][process][election][zk]") {
    redis_server resource;
    auto server = start_lock_server("zk");
    scenarios::leader_paused(
        {.backend = "zk", .resource = resource, .lock = server.get(), .duration = zk_duration});
}

TEST_CASE("zk election: a leader killed with kill -9 is followed at its session end",
          "[fault][process][election][zk]") {
    redis_server resource;
    auto server = start_lock_server("zk");
    scenarios::leader_killed(
        {.backend = "zk", .resource = resource, .lock = server.get(), .duration = zk_duration});
}

TEST_CASE("zk election: a leader partitioned by the fault proxy loses its term before the next "
          "leader's",
          "[fault][network][election][zk]") {
    redis_server resource;
    auto server = start_lock_server("zk");
    scenarios::leader_partitioned(
        {.backend = "zk", .resource = resource, .lock = server.get(), .duration = zk_duration});
}

TEST_CASE("zk election: the server restarted during a term hangs no candidate and "
          "reuses no epoch",
          "[fault][process][election][zk]") {
    redis_server resource;
    auto server = start_lock_server("zk");
    scenarios::server_restarted(
        {.backend = "zk", .resource = resource, .lock = server.get(), .duration = zk_duration});
}
