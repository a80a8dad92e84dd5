// A Redis Sentinel deployment for the tests: one primary, replicas
// (redis-server --replicaof) and Sentinels (redis-server CONF --sentinel),
// each a redis_server on free loopback ports, stopped by PID when the fleet
// goes. The constructor returns once every replica is in sync and every
// Sentinel knows every replica and the other Sentinels, so that a failover
// can start as soon as the primary dies.
#pragma once

#include "support/redis_server.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace corolock::test {

struct sentinel_fleet_options {
    std::string service = "mymaster";
    std::size_t replicas = 2;
    std::size_t sentinels = 3;
    std::size_t quorum = 2;
    // Every server and Sentinel also listens with TLS (one test CA for all),
    // replicas and Sentinels reach the servers over TLS (tls-replication),
    // and so everyone names the servers by their TLS ports. The plain ports
    // stay for the fixture's own cmd().
    bool tls = false;
    // With tls: the names the data servers' certificate carries (openssl's
    // subjectAltName, "DNS:data.corolock.test"); the Sentinels keep
    // default_tls_names. Empty: every certificate has default_tls_names.
    std::string data_tls_names{};
    // Small, so that a failover takes a few seconds.
    std::chrono::milliseconds down_after{1000};
    // Also how long the Sentinels wait before a failed election is tried
    // again (twice this): kept short for the same reason.
    std::chrono::milliseconds failover_timeout{2000};
    // Until the fleet is ready (see above).
    std::chrono::milliseconds ready_timeout{30'000};
};

class sentinel_fleet {
public:
    explicit sentinel_fleet(sentinel_fleet_options opts = {});
    ~sentinel_fleet();

    sentinel_fleet(const sentinel_fleet&) = delete;
    sentinel_fleet& operator=(const sentinel_fleet&) = delete;

    // redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,.../SERVICE (the fleet's
    // service unless another is named); with tls, rediss+sentinel:// and
    // the Sentinels' TLS ports.
    std::string url() const;
    std::string url(const std::string& service) const;
    // The same with only the given Sentinels, in that order.
    std::string url(const std::string& service, const std::vector<std::size_t>& sentinels) const;

    const sentinel_fleet_options& options() const noexcept { return opts_; }
    // With tls: the CA every server's certificate comes from, and one that
    // signed none of them.
    std::string ca_file() const { return servers_.at(0)->ca_file(); }
    std::string wrong_ca_file() const { return servers_.at(0)->wrong_ca_file(); }
    // The data servers: index 0 started as the primary.
    std::size_t servers() const noexcept { return servers_.size(); }
    redis_server& server(std::size_t i) { return *servers_.at(i); }
    redis_server& sentinel(std::size_t i) { return *sentinels_.at(i); }
    std::size_t sentinels() const noexcept { return sentinels_.size(); }

    // The index of the server Sentinel `asked` names as the primary now,
    // or -1 when it names none of them (or cannot be asked).
    int primary_index(std::size_t asked = 0) const;
    // The port the others name server i by: its TLS port with tls.
    std::uint16_t named_port(std::size_t i) const;

    // Waits until every running Sentinel names the same primary other than
    // `old_primary`, and that server says it is a master. Returns its index;
    // throws std::runtime_error after `limit`.
    std::size_t wait_for_failover(std::size_t old_primary, std::chrono::milliseconds limit);

private:
    void wait_ready(std::chrono::steady_clock::time_point deadline);

    sentinel_fleet_options opts_;
    std::vector<std::unique_ptr<redis_server>> servers_;
    std::vector<std::unique_ptr<redis_server>> sentinels_;
};

}  // namespace corolock::test
