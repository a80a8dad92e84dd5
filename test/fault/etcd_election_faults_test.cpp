// Leader election on etcd under faults: the scenarios of
// test/fault/election_scenarios.hpp on one etcd member (started by
// support/lock_server.hpp as the conformance suite's), the resource on a
// redis-server of its own. A term is a key under a lease (docs/election.md):
// a killed or paused leader's term ends with its lease on the server, which
// etcd rounds up to whole seconds (lock_server::expiry_slack()).
#include "fault/election_scenarios.hpp"

#include <catch2/catch.hpp>

using namespace corolock::test;
using namespace corolock::test::fault;
namespace scenarios = corolock::test::fault::election_scenarios;

namespace {
// Longer than Redis's runs: a restarted member takes a second or two to
// answer, and a lost term is free only at its lease's end on the server.
constexpr auto etcd_duration = 10000ms;
}  // namespace

TEST_CASE("etcd election: a leader paused past its lease loses its term in time and is fenced off",
          "[fault][process][election][etcd]") {
    redis_server resource;
    auto server = start_lock_server("etcd");
    scenarios::leader_paused(
        {.backend = "etcd", .resource = resource, .lock = server.get(), .duration = etcd_duration});
}

TEST_CASE("etcd election: a leader killed with kill -9 is followed at its lease end",
          "[fault][process][election][etcd]") {
    redis_server resource;
    auto server = start_lock_server("etcd");
    scenarios::leader_killed(
        {.backend = "etcd", .resource = resource, .lock = server.get(), .duration = etcd_duration});
}

TEST_CASE("etcd election: a leader partitioned by the fault proxy loses its term before the next "
          "leader's",
          "[fault][network][election][etcd]") {
    redis_server resource;
    auto server = start_lock_server("etcd");
    scenarios::leader_partitioned(
        {.backend = "etcd", .resource = resource, .lock = server.get(), .duration = etcd_duration});
}

TEST_CASE("etcd election: the member restarted with its data during a term hangs no candidate and "
          "reuses no epoch",
          "[fault][process][election][etcd]") {
    redis_server resource;
    auto server = start_lock_server("etcd");
    scenarios::server_restarted(
        {.backend = "etcd", .resource = resource, .lock = server.get(), .duration = etcd_duration});
}
