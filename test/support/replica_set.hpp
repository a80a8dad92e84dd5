// A throwaway primary with replicas: each a redis_server of its own, the
// replicas started with --replicaof the primary, all on free loopback ports
// and stopped by PID (redis_server's destructor). For the replica
// acknowledgement tests (lock_options::replicas).
#pragma once

#include "support/redis_server.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace corolock::test {

class replica_set {
public:
    // Starts the primary and `replicas` replicas, and waits (bounded by
    // sync_timeout) until the primary counts every replica online; throws
    // std::runtime_error if it does not.
    explicit replica_set(std::size_t replicas,
                         std::chrono::milliseconds sync_timeout = std::chrono::seconds(15));

    redis_server& primary() noexcept { return *primary_; }
    redis_server& replica(std::size_t i) { return *replicas_.at(i); }
    std::size_t replicas() const noexcept { return replicas_.size(); }

    // Replicas the primary reports online (INFO replication).
    std::size_t online() const;
    // Clients blocked on the primary (INFO clients): a pending WAIT is one.
    std::size_t blocked_clients() const;

private:
    std::unique_ptr<redis_server> primary_;
    std::vector<std::unique_ptr<redis_server>> replicas_;
};

}  // namespace corolock::test
