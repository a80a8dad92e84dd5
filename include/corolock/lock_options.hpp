// Options for one acquire. Every field has a documented default.
#pragma once

#include <chrono>
#include <optional>

namespace corolock {

struct lock_options {
    using duration = std::chrono::steady_clock::duration;

    // How long the server keeps the lock without a renewal. Default 30 s.
    // At least 10 ms: zero or a negative lease is invalid_argument.
    duration lease = std::chrono::seconds(30);

    // acquire(): how long to wait for the lock. Absent: until cancelled.
    // Zero: do not wait (like try_acquire). Negative: invalid.
    // try_acquire() ignores it.
    std::optional<duration> wait{};

    // Renew the lease in the background while the guard is held.
    bool watchdog = true;

    // How often the watchdog renews. Zero (the default) means lease / 3.
    // Otherwise it must be positive, and with the watchdog on it must leave a
    // quarter of the lease for the renewal's round trip before the deadline:
    // at most lease * 3/4 - (lease / 100 + 2 ms); 990 ms of 1 s is invalid.
    //
    // A re-entry (an acquire through a handle that holds the lock) joins its
    // options to the hold's: the hold keeps the longest lease and the
    // shortest interval any of its levels asked for, and the watchdog runs if
    // any level asked for it (docs/safety.md, "Tenures").
    duration renew_interval{};
};

// Lock names are binary-safe byte strings of 1 to this many bytes, without
// '{' or '}' (the name becomes the keys' Redis Cluster hash tag).
inline constexpr std::size_t max_lock_name_length = 512;

}  // namespace corolock
