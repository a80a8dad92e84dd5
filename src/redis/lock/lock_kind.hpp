// What differs between the kinds of Redis lock (docs/protocol.md): the
// scripts, their arguments and their replies. Everything else (a handle's
// levels and tenure, the watchdog, the lost signal, guards, waiting on the
// unlock channel, cancellation) is shared: lock_service and acquire_op call
// the handle's kind where the protocol speaks.
//
// A kind is stateless: one static object per kind, chosen from the handle's
// lock_spec when the handle is made. Its parameters (a semaphore's capacity)
// are in the state's spec; an acquire's own (permits, shared) in its
// acquire_request.
#pragma once

#include "core/backend.hpp"
#include "redis/lock/script_call.hpp"
#include "redis/lock/scripts.hpp"
#include <corolock/reply.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace corolock::detail {

struct redis_lock_state;

// One acquire script run's reply, parsed.
struct acquire_reply {
    bool acquired = false;
    std::uint64_t token = 0;
    std::int64_t levels = 0;
    // Not acquired: how long (ms) until the lease that blocks this acquire
    // ends, the cap of the wait (-1: no lease, -2: nothing blocks). Acquired:
    // the key's TTL after the grant.
    std::int64_t pttl = -2;
    bool created = false;  // the owner held nothing before: a tenure began on the server
    // Refused with the holder's TTL as the cap: the µs from the script's
    // read of the clock until the server ends that TTL, and its expiry
    // (unix ms, the same instant while the holder does not renew); -1: not
    // known (acquire_fsm::note_expiry).
    std::int64_t expires_in_us = -1;
    std::int64_t expires_at_ms = -1;
};

class lock_kind {
public:
    using clock = std::chrono::steady_clock;

    // The kind of a handle with this spec. Throws
    // system_error(invalid_argument) for a kind Redis does not offer.
    static const lock_kind& for_spec(const lock_spec& spec);
    // The same for a spec for_spec() accepted.
    static const lock_kind& for_valid_spec(const lock_spec& spec) noexcept;

    // Acquire: one attempt for `level` of the state's owner, asking for
    // `terms` (a lease and a lock-delay at least the live tenure's on a
    // re-entry; the renewal interval is not the script's).
    virtual const script& acquire_script() const noexcept = 0;
    virtual void acquire_arguments(const redis_lock_state& st, const acquire_request& req,
                                   std::uint64_t level, const lease_terms& terms,
                                   script_args& out) const noexcept = 0;
    virtual error_code parse_acquire_reply(const reply& r, acquire_reply& out) const noexcept = 0;

    // Release: one level, or every level of the owner (nullopt). Owner-
    // checked. The clean-up after a lost tenure names each of its own levels
    // (lock_service::lose_tenure), never every level. The reply is
    // {release_status, receivers of the unlock message}.
    virtual const script& release_script(bool sharded) const noexcept = 0;
    virtual void release_arguments(const redis_lock_state& st, std::optional<std::uint64_t> level,
                                   script_args& out) const noexcept = 0;

    // Renewal of every level of the owner for `lease_ms` (0: only check the
    // owner still holds). The reply is an integer renew_status.
    virtual const script& renew_script() const noexcept = 0;
    virtual void renew_arguments(const redis_lock_state& st, std::int64_t lease_ms,
                                 script_args& out) const noexcept = 0;

    // Whether lock_options::replicas (the confirm script, WAIT) works here.
    virtual bool confirms_replicas() const noexcept { return false; }

protected:
    ~lock_kind() = default;
};

// The kinds that keep their owners' lease ends as scores in a sorted set
// beside the hash (the shared mutex and the semaphore; docs/protocol.md):
// the same keys, and the same release and renewal arguments.
class lease_set_kind : public lock_kind {
public:
    // KEYS lock, leases, channel; ARGV owner, level or all_levels.
    void release_arguments(const redis_lock_state& st, std::optional<std::uint64_t> level,
                           script_args& out) const noexcept final;
    // KEYS lock, leases; ARGV owner, lease (ms).
    void renew_arguments(const redis_lock_state& st, std::int64_t lease_ms,
                         script_args& out) const noexcept final;

protected:
    ~lease_set_kind() = default;
    // What each acquire of these kinds starts with: KEYS lock, leases, fence;
    // ARGV owner, lease (ms), level.
    static void acquire_head(const redis_lock_state& st, std::uint64_t level, clock::duration lease,
                             script_args& out) noexcept;
};

// ARGV owner, then the level or all_levels ("*"): how every kind's release
// names what it gives back.
void owner_and_level(const redis_lock_state& st, std::optional<std::uint64_t> level,
                     script_args& out) noexcept;

// The kinds beside the mutex, one file each (redis/<kind>_kind.cpp).
const lock_kind& semaphore_kind() noexcept;

// Parses the mutex-shaped acquire reply {acquired, token, levels, pttl,
// created}, which every kind may answer with.
error_code parse_lock_acquire_reply(const reply& r, acquire_reply& out) noexcept;

}  // namespace corolock::detail
