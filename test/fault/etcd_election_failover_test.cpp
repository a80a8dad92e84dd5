// Leader election across a failover of a three-member etcd cluster: the
// scenario server_killed of test/fault/election_scenarios.hpp, the resource
// on a redis-server of its own. Each worker lists the members from another
// one on (etcd_cluster::url), so that leaders talk to followers as well as
// to the Raft leader; the lease is the lock failover test's
// (etcd_failover_test.cpp). A new Raft leader extends every lease, so a
// term may outlive the kill; one that does not is lost in time (the checker).
#include "fault/election_scenarios.hpp"
#include "support/etcd_server.hpp"

#include <catch2/catch.hpp>

using namespace corolock::test;
using namespace corolock::test::fault;
namespace scenarios = corolock::test::fault::election_scenarios;

namespace {

// Long enough for the kill (after three terms and up to 3 s looking for
// its moment), the Raft election (a request sent while there is no leader
// may wait out its 5 s timeout) and a good run of terms after it.
constexpr auto etcd_failover_duration = 14000ms;

void etcd_cluster_killed(scenarios::failover_victim which) {
    etcd_server_options eo;
    eo.members = 3;
    etcd_cluster cluster(eo);
    redis_server resource;
    scenarios::server_killed({.backend = "etcd",
                              .resource = resource,
                              .urls = {cluster.url(0), cluster.url(1), cluster.url(2)},
                              .lease = 2000ms,
                              .duration = etcd_failover_duration},
                             cluster, which);
}

}  // namespace

TEST_CASE("etcd election: the cluster's Raft leader killed while a worker leads keeps one leader "
          "and rising epochs",
          "[fault][election][etcd][failover]") {
    etcd_cluster_killed(scenarios::failover_victim::server_leader);
}

TEST_CASE("etcd election: the member the leading worker talks to killed keeps one leader and "
          "rising epochs",
          "[fault][election][etcd][failover]") {
    etcd_cluster_killed(scenarios::failover_victim::leaders_member);
}
