// Options for one acquire. Every field has a documented default.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

namespace corolock {

// The shortest lease an acquire accepts.
inline constexpr std::chrono::milliseconds min_lease{10};
// The longest lock-delay an acquire accepts (Chubby's bound).
inline constexpr std::chrono::seconds max_lock_delay{60};

struct lock_options {
    using duration = std::chrono::steady_clock::duration;

    // How long the server keeps the lock without a renewal. At least
    // min_lease: zero or a negative lease is invalid_argument.
    duration lease = std::chrono::seconds(30);

    // acquire(): how long to wait for the lock. Absent: until cancelled.
    // Zero: do not wait (like try_acquire). Negative: invalid.
    // try_acquire() ignores it.
    std::optional<duration> wait{};

    // Renew the lease in the background while the guard is held.
    bool watchdog = true;

    // How often the watchdog renews. Zero (the default): see
    // renew_interval_or_default().
    // Otherwise it must be positive, and with the watchdog on it must leave a
    // quarter of the lease for the renewal's round trip before the deadline:
    // at most lease * 3/4 - (lease / 100 + 2 ms); 990 ms of 1 s is invalid.
    //
    // A re-entry (an acquire through a handle that holds the lock) joins its
    // options to the hold's: the hold keeps the longest lease and the
    // shortest interval any of its levels asked for, and the watchdog runs if
    // any level asked for it (docs/safety.md, "Tenures").
    duration renew_interval{};

    // renew_interval, or a third of the lease when it is zero.
    duration renew_interval_or_default() const noexcept {
        return renew_interval.count() == 0 ? lease / 3 : renew_interval;
    }

    // Lock-delay (Chubby, Consul): when a tenure ends without a clean
    // release (a crash, a partition, a pause past the lease), the name stays
    // unavailable for this much longer after the lease ended, so that a
    // paused holder's writes still in flight land, or fail, before anyone
    // else starts. A clean release frees the name at once, whatever the
    // delay. Zero (the default): no delay. At most max_lock_delay; negative
    // is invalid_argument. The holder's own deadline (its lost signal) is
    // unchanged: the delay only lengthens what the server keeps, and the
    // holder's own loss does not shorten it.
    // A re-entry joins it as the lease: the tenure keeps the longest.
    // Honoured by the Redis mutex (single, Sentinel, Cluster) and RedLock;
    // a nonzero delay is error::not_supported, before any request, for the
    // fair mutex, shared mutex and semaphore and on etcd, ZooKeeper and
    // PostgreSQL (docs/safety.md, "Lock-delay").
    duration lock_delay{};
    // Redis: hand the guard out only once at least this many replicas
    // acknowledged the grant (WAIT, on a side connection: docs/safety.md,
    // "Replica acknowledgement"). If fewer do within replicas_timeout, the
    // level just granted is given back and the acquire fails with
    // error::replicas_missing. Re-entries wait too (they are writes).
    // 0 (the default): do not wait. Negative: invalid_argument.
    // etcd ignores it: a grant there is committed through Raft already.
    int replicas = 0;

    // How long to wait for the replicas, after the grant (on top of `wait`).
    // Zero (the default): see replicas_timeout_or_default(). Otherwise
    // positive and below the lease.
    duration replicas_timeout{};

    // replicas_timeout, or the smaller of 1 s and a quarter of the lease
    // when it is zero.
    duration replicas_timeout_or_default() const noexcept {
        if (replicas_timeout.count() != 0) return replicas_timeout;
        return std::min<duration>(std::chrono::seconds(1), lease / 4);
    }
};

// Lock names are binary-safe byte strings of 1 to this many bytes, without
// '{' or '}' (the name becomes the keys' Redis Cluster hash tag).
inline constexpr std::size_t max_lock_name_length = 512;

}  // namespace corolock
