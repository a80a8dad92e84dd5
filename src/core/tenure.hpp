// One tenure of a mutex handle: from the grant that took the handle from no
// levels to one, until its last level is released or the lease is lost.
//
// A tenure has one lease, one renewal interval and one watchdog setting (its
// terms), held here and nowhere else: the acquire script of a re-entry, the
// watchdog's renewals and the deadline all read them from the tenure. Its
// guards read the deadline and the lost flag from the tenure they were
// granted in, so a guard never reports a later tenure's facts.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace corolock::detail {

// The lease terms asked for by one acquire, or joined for a whole tenure.
struct lease_terms {
    using clock = std::chrono::steady_clock;

    clock::duration lease{};
    clock::duration renew_every{};  // zero: no watchdog
    // How long the server keeps the name after the lease ends without a
    // clean release (lock_options::lock_delay). Zero: not at all.
    clock::duration lock_delay{};

    // What the server must keep without a renewal: the lease, then the
    // lock-delay. The holder's own deadline stays at the lease.
    clock::duration server_hold() const noexcept { return lease + lock_delay; }

    // A re-entry that asks for other terms joins them to the tenure's: the
    // tenure keeps the longest lease and the shortest renewal interval that
    // any of its levels asked for, and the watchdog runs if any level asked
    // for it. Terms never weaken while the tenure lasts, so no level's
    // request is ignored and no deadline outlives the server's TTL (the
    // scripts never shorten a TTL).
    void join(const lease_terms& other) noexcept {
        lease = std::max(lease, other.lease);
        lock_delay = std::max(lock_delay, other.lock_delay);
        if (renew_every.count() == 0)
            renew_every = other.renew_every;
        else if (other.renew_every.count() > 0)
            renew_every = std::min(renew_every, other.renew_every);
    }
};

class tenure {
public:
    using clock = std::chrono::steady_clock;

    // Strand only. `epoch` numbers the handle's tenures from 1.
    std::uint64_t epoch = 0;
    lease_terms terms;

    // Any thread.
    clock::time_point deadline() const noexcept {
        return clock::time_point(clock::duration(deadline_rep_.load(std::memory_order_acquire)));
    }
    bool lost() const noexcept { return lost_.load(std::memory_order_acquire); }

    // Strand only: the watchdog schedule's deadline for this tenure, published.
    void publish_deadline(clock::time_point t) noexcept {
        deadline_rep_.store(t.time_since_epoch().count(), std::memory_order_release);
    }
    // The lease is known or presumed lost at `now`: the deadline is never
    // later than that from here on.
    void mark_lost(clock::time_point now) noexcept {
        if (deadline() > now) publish_deadline(now);
        lost_.store(true, std::memory_order_release);
    }
    // A fresh start for a tenure object that nobody else refers to any more.
    void reset(std::uint64_t new_epoch, const lease_terms& t) noexcept {
        epoch = new_epoch;
        terms = t;
        publish_deadline(clock::time_point::min());
        lost_.store(false, std::memory_order_relaxed);
    }

private:
    std::atomic<clock::rep> deadline_rep_{clock::time_point::min().time_since_epoch().count()};
    std::atomic<bool> lost_{false};
};

}  // namespace corolock::detail
