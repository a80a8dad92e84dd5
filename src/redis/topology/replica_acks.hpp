// Replica acknowledgement of a grant (lock_options::replicas), without
// stalling the client's other traffic.
//
// WAIT blocks the connection that sends it, and counts acknowledgements of
// the replication offset that connection last saw. So it cannot go on the
// client's one multiplexed connection (renewals, releases and other locks'
// acquires would queue behind it for as long as it waits), and it proves
// nothing on a connection that did not write after the grant (it can count
// a stopped replica). A confirmation therefore runs on a side
// connection (a second client_impl with the same config, opened on first
// use): first the confirm script, an owner- and level-checked write on the
// lock's key that changes nothing (it sets the TTL to itself), then
// `WAIT replicas timeout`. Replication is ordered, so a replica that
// acknowledged the later write has the grant too. If the script finds the
// lock not this level's (the side connection reached another server, say
// during a failover), the confirmation fails instead of counting replicas
// of a server that never granted. The two commands must run on one
// connection: a reconnect between them is detected (the side client's
// connect count at each reply) and fails the confirmation.
//
// Concurrent confirmations use idle side connections, up to
// max_connections; beyond that they queue behind a busy one's WAIT.
// Strand only (the main client's).
#pragma once

#include "redis/connection/client_impl.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail {

// What one confirmation saw on its side connection.
struct replica_ack_facts {
    int wanted = 0;                      // lock_options::replicas
    error_code script_ec;                // the confirm script failed to run
    std::int64_t status = 0;             // its confirm_status
    bool status_valid = false;           // the script answered an integer
    std::uint64_t script_connection = 0; // the side client's connects at that reply
    error_code wait_ec;                  // WAIT failed (timeout, connection lost)
    std::int64_t acked = -1;             // WAIT's answer (-1: none)
    std::uint64_t wait_connection = 0;   // the side client's connects at that reply
};

// The acquire's outcome: success; error::lock_lost when the write found the
// lock not this level's; error::client_stopped; error::no_permission when
// the server refused the write or WAIT; else error::replicas_missing.
// `why` says what happened, for the log. Sans-I/O.
error_code judge_replica_ack(const replica_ack_facts& f, std::string& why);

class replica_acks {
public:
    using clock = std::chrono::steady_clock;
    // Called on the main client's strand, once.
    using done_handler = std::function<void(error_code, const std::string& why)>;

    static constexpr std::size_t max_connections = 4;

    explicit replica_acks(client_impl& main) noexcept : main_(main) {}

    // Confirms that `owner` holds `level` of the lock at `key` on at least
    // `replicas` replicas, waiting up to `timeout` for them.
    void confirm(std::string_view key, std::string_view owner, std::uint64_t level,
                 int replicas, clock::duration timeout, done_handler done);

    // The side connections end; pending confirmations fail with client_stopped.
    void stop() noexcept;
    // See client_impl::abandon.
    void abandon() noexcept;

    std::size_t connections() const noexcept { return sides_.size(); }

private:
    struct side {
        std::shared_ptr<client_impl> client;
        std::size_t busy = 0;  // confirmations in flight
    };
    struct confirmation;
    std::shared_ptr<side> pick();

    client_impl& main_;
    std::vector<std::shared_ptr<side>> sides_;
    bool stopped_ = false;
};

}  // namespace corolock::detail
