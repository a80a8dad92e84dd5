// Leader election on PostgreSQL under faults: the scenarios of
// test/fault/election_scenarios.hpp on one PostgreSQL server (started by
// support/lock_server.hpp as the conformance suite's), the resource on a
// redis-server of its own. A term is a session-level advisory lock
// (docs/election.md, "On PostgreSQL"): a killed leader's lock ends with its
// connection, at once; a paused or cut-off leader's ends when the server's
// idle timeout, set to the lease, ends its session (docs/postgresql.md).
#include "fault/election_scenarios.hpp"

#include <catch2/catch.hpp>

using namespace corolock::test;
using namespace corolock::test::fault;
namespace scenarios = corolock::test::fault::election_scenarios;

namespace {
// A restarted server takes a second or so to answer.
constexpr auto pg_duration = 8000ms;
}  // namespace

TEST_CASE("pg election: a leader paused past its lease loses its term in time and is fenced off",
          "[fault][process][election][pg]") {
    redis_server resource;
    auto server = start_lock_server("postgresql");
    scenarios::leader_paused({.backend = "postgresql",
                              .resource = resource,
                              .lock = server.get(),
                              .duration = pg_duration});
}

TEST_CASE("pg election: a leader killed with kill -9 is followed as its session ends",
          "[fault][process][election][pg]") {
    redis_server resource;
    auto server = start_lock_server("postgresql");
    scenarios::leader_killed({.backend = "postgresql",
                              .resource = resource,
                              .lock = server.get(),
                              .duration = pg_duration});
}

TEST_CASE("pg election: a leader partitioned by the fault proxy loses its term before the next "
          "leader's",
          "[fault][network][election][pg]") {
    redis_server resource;
    auto server = start_lock_server("postgresql");
    scenarios::leader_partitioned({.backend = "postgresql",
                                   .resource = resource,
                                   .lock = server.get(),
                                   .duration = pg_duration});
}

TEST_CASE("pg election: the server restarted during a term hangs no candidate and reuses no epoch",
          "[fault][process][election][pg]") {
    redis_server resource;
    auto server = start_lock_server("postgresql");
    scenarios::server_restarted({.backend = "postgresql",
                                 .resource = resource,
                                 .lock = server.get(),
                                 .duration = pg_duration});
}
