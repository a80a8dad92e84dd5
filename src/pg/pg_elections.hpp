// Leader election on PostgreSQL: the election seam (core/election_service.hpp)
// over one PostgreSQL backend (docs/election.md, "On PostgreSQL"). The
// candidates queue on the plain mutex (pg_advisory_lock waiters, granted by
// the server's lock manager in the order they queued); beside the lock's
// row the schema `corolock` keeps one row per name, made on demand:
//   corolock.leaders (name, owner, epoch, value, pid, lease_ms, since)
// written by proclaim in a transaction on the holder's session (the path of
// execute_locked: the session must hold the name's advisory lock and the
// name's fence must be the epoch), deleted by withdraw at (owner, epoch).
// Both NOTIFY the name's channel in their transaction; a watch LISTENs on it
// on a session of its own.
#pragma once

#include "core/election_service.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace corolock::detail::pg {

class pg_backend;

// The NOTIFY channel of a name's leader: "corolock_leader_" and the 16 hex
// digits of the name's advisory key (channel names are limited to 63 bytes,
// so the name itself cannot be one). Names that share a key share a
// channel: a wake-up too many, never one missed.
std::string leader_channel(std::string_view name);

class pg_elections final : public election_service {
public:
    explicit pg_elections(pg_backend& b) : backend_(b) {}

    void proclaim(std::string name, std::string owner, std::uint64_t epoch, std::string value,
                  done_handler h) override;
    void withdraw(std::string name, std::string owner, std::uint64_t epoch,
                  done_handler h) override;
    void read(std::string name, read_handler h) override;
    std::shared_ptr<leader_watch> watch(std::string name) override;

    // --- the backend's strand only ---
    bool table_ready = false;  // corolock.leaders is known to exist

private:
    pg_backend& backend_;
};

}  // namespace corolock::detail::pg
