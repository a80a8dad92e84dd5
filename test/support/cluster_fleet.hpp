// A throwaway Redis Cluster for the cluster tests: three primaries with one
// replica each, every node a redis_server (free loopback port, private
// directory, stopped by PID) started with --cluster-enabled yes, joined by
// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`. The
// constructor returns once every node reports cluster_state:ok and agrees
// on the slot map (bounded: throws std::runtime_error with the logs).
#pragma once

#include "support/redis_server.hpp"

#include <corolock/backend.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace corolock::test {

struct cluster_fleet_options {
    int primaries = 3;
    int replicas_per_primary = 1;
    // How long a node may be unreachable before the others fail it over.
    std::chrono::milliseconds node_timeout{1000};
    std::chrono::milliseconds ready_timeout{30'000};
    // Every node also listens with TLS (one test CA for all) and talks TLS
    // on the cluster bus and for replication (tls-cluster, tls-replication),
    // so the cluster names its nodes by their TLS ports; the plain ports
    // stay for the fixture's own cmd(). The cluster is created over TLS.
    bool tls = false;
};

class cluster_fleet {
public:
    explicit cluster_fleet(cluster_fleet_options opts = {});
    ~cluster_fleet();  // stops every node; never throws

    cluster_fleet(const cluster_fleet&) = delete;
    cluster_fleet& operator=(const cluster_fleet&) = delete;

    // "redis+cluster://127.0.0.1:P1,127.0.0.1:P2" (two seeds); with tls,
    // rediss+cluster:// and TLS ports.
    std::string url() const;
    // With tls: the CA of every node's certificate, and one of none.
    std::string ca_file() const { return nodes_.at(0)->ca_file(); }
    std::string wrong_ca_file() const { return nodes_.at(0)->wrong_ca_file(); }

    // A lock backend on this cluster (as corolock::backend(ex, url()) opens
    // one), with the tests' short timeouts and fast reconnects.
    corolock::backend open_backend(boost::asio::any_io_executor ex) const;

    std::size_t size() const noexcept { return nodes_.size(); }
    redis_server& node(std::size_t i) { return *nodes_.at(i); }
    // The node serving `slot` as primary now (asked of a live node), or
    // nullptr when none is known.
    redis_server* primary_of_slot(std::uint16_t slot);
    redis_server* by_port(std::uint16_t port);  // a plain or a TLS port
    // A replica of the primary on `port`, per that primary's ROLE... or
    // CLUSTER REPLICAS: nullptr when none.
    redis_server* replica_of(std::uint16_t primary_port);
    std::string node_id(redis_server& n);

    // Waits (bounded) until every running node says cluster_state:ok and
    // they agree which port serves `slot`. False on timeout.
    bool wait_ok(std::chrono::milliseconds limit, int slot = -1);

private:
    cluster_fleet_options opts_;
    std::vector<std::unique_ptr<redis_server>> nodes_;
};

}  // namespace corolock::test
