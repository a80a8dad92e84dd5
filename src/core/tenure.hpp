// One tenure of a mutex handle: from the grant that took the handle from no
// levels to one, until its last level is released or the lease is lost.
//
// A tenure has one lease, one renewal interval and one watchdog setting (its
// terms), held here and nowhere else: the acquire script of a re-entry, the
// watchdog's renewals and the deadline all read them from the tenure. Its
// guards read the deadline and the lost flag from the tenure they were
// granted in, so a guard never reports a later tenure's facts.
//
// The rules every backend follows for a handle's tenures live here, once
// (tenure.cpp): begin_or_join (a grant adds a level), take_level (a release
// takes one off) and lose_live (the lease is lost).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace spdlog { class logger; }

namespace corolock::detail {

struct lock_state;
struct metrics_recorder;

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

// What a re-entry (a grant while the handle holds the lock) joins to the
// tenure's terms: the one difference between the backends' tenures, which
// comes from what the server did with the re-entry's own lease.
enum class reentry_terms : std::uint8_t {
    // The re-entry's request set the server's lease again (Redis: its
    // scripts extend the TTL, never shorten it; ZooKeeper with the watchdog
    // off: the lease ends on the holder's side, counted from the request):
    // every term joins (lease_terms::join), so a longer lease lengthens it.
    all,
    // The server's lease was fixed at the grant (an etcd lease's TTL,
    // PostgreSQL's session timeouts): the re-entry joins its renewal
    // interval and its watchdog, never a longer lease or lock-delay
    // (docs/safety.md, "Tenures").
    renewal_only,
    // The re-entry sent nothing (RedLock: no round): it joins nothing; what
    // it cannot have (the watchdog, a longer lock-delay) was refused before.
    none,
};

// What begin_or_join did.
struct joined_tenure {
    std::shared_ptr<tenure> t;
    bool began = false;  // a tenure began with this level
    // The tenure's renewals must start now: it began with the watchdog, or
    // a re-entry asked for the watchdog that the tenure ran without.
    bool start_renewals = false;
};

// Strand only. Adds `level` to the handle's live tenure, joining `asked`
// to its terms by `rule` and moving its deadline to `deadline` if that is
// later; or, with no live tenure, begins one with terms `asked` and
// deadline `deadline` (time_point::min(): the caller publishes it). A new
// tenure reuses the last one's object when no guard refers to it any more,
// else `*spare`'s (a backend-wide slot that keeps the last hold's tenure;
// null: none), else allocates.
joined_tenure begin_or_join(lock_state& st, std::uint64_t level, const lease_terms& asked,
                            reentry_terms rule,
                            tenure::clock::time_point deadline = tenure::clock::time_point::min(),
                            std::shared_ptr<tenure>* spare = nullptr);

// What a release of `level` (granted in tenure `t`) finds.
enum class release_step {
    later_tenure,  // the handle holds a later tenure: error::lock_lost
    gone,          // the tenure was lost or the level is not held: ask the server
    more_levels,   // taken off; other levels keep the tenure
    last_level,    // taken off; the tenure ends: give the lock back
};
// Strand only. Takes `level` off when it is held in `t`.
release_step take_level(lock_state& st, std::uint64_t level, const tenure& t);

// Strand only. Marks the handle's live tenure lost at once (logged,
// counted, told to the backend's observer, its deadline ended, the
// handle's lost_epoch set); false when none is live or it was lost
// already. The backend then ends the tenure, signals the loss
// (lock_state::signal_lost) and cleans up on the server.
bool lose_live(lock_state& st, metrics_recorder& m, spdlog::logger& log, const char* why);

}  // namespace corolock::detail
