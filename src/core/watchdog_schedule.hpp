// The watchdog's timetable for every held lock of a client, without I/O.
//
// Each entry is one held lock (one handle). Its lease deadline is computed
// from when the last successful acquire or renewal was *sent*, minus a drift
// allowance, so the local deadline always falls before the server could
// expire the key. One timer per client wakes at next_wake(); due() batches
// every renewal that falls due within a quarter period, so many locks share
// one pipelined round trip instead of owning a timer each.
#pragma once

#include "core/tenure.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace corolock::detail {

class watchdog_schedule {
public:
    using clock = std::chrono::steady_clock;
    using id_type = std::uint64_t;

    // How much of a lease we give up for clock-rate differences and
    // scheduling: 1% of the lease plus 2 ms, as RedLock does.
    static clock::duration drift(clock::duration lease) noexcept {
        return lease / 100 + std::chrono::milliseconds(2);
    }
    static clock::time_point deadline_for(clock::time_point sent, clock::duration lease) noexcept {
        return sent + lease - drift(lease);
    }
    // When the next renewal of a lease whose deadline is `deadline` falls
    // due, for a backend that keeps a timer per tenure (etcd, PostgreSQL): a
    // renewal interval after that lease was sent (deadline_for's `sent`), as
    // on_renewed() schedules it here, and never later than a renewal
    // interval from `now`. Counted from the lease, not from when the timer is
    // set: a waiter's grant comes some time after its lease was last kept
    // alive, and a full interval from the grant could fall past the
    // deadline. A renewal already overdue (one failed) is tried again a
    // quarter of an interval from now, not at once in a loop.
    static clock::time_point renewal_due(clock::time_point deadline, clock::duration lease,
                                         clock::duration renew_every,
                                         clock::time_point now) noexcept {
        const auto from_lease = deadline - (lease - drift(lease)) + renew_every;
        return std::min(now + renew_every, std::max(from_lease, now + renew_every / 4));
    }

    // `sent`: when the acquire that granted the lease was sent, and
    // `granted`: the lease that acquire asked the server for. The entry reads
    // its renewal interval from `terms` (the tenure's, kept alive by the
    // entry) whenever it needs it, never from a copy: a zero renew_every
    // means no renewals (watchdog off), and only the deadline is watched.
    void add(id_type id, clock::time_point sent, std::shared_ptr<const lease_terms> terms,
             clock::duration granted);
    void remove(id_type id) noexcept;
    void clear() noexcept;
    bool contains(id_type id) const noexcept { return entries_.count(id) != 0; }

    struct due_list {
        std::vector<id_type> renew;  // send a renewal now (marked in flight)
        std::vector<id_type> lost;   // deadline passed unconfirmed: removed
    };
    due_list due(clock::time_point now);

    // A renewal (or a re-entry's grant) sent at `sent` asking for `lease`
    // was confirmed: the deadline moves to sent + lease - drift unless it is
    // later already, and the next renewal is due a renewal interval after
    // `sent`. A zero lease (a check that extended nothing) moves no deadline.
    void on_renewed(id_type id, clock::time_point sent, clock::duration lease) noexcept;
    // A renewal failed for a transient reason: try again soon; the deadline
    // stays where it was.
    void on_renew_failed(id_type id, clock::time_point now) noexcept;

    clock::time_point deadline(id_type id) const noexcept;
    // When the whole schedule next needs attention. O(n): for the timer,
    // once per tick.
    clock::time_point next_wake() const noexcept;
    // When this one entry next needs attention (max() when absent). O(1):
    // after a change to one entry, the timer only needs to move earlier if
    // this is before the time it is armed for.
    clock::time_point wake_of(id_type id) const noexcept;
    std::size_t size() const noexcept { return entries_.size(); }

private:
    struct entry {
        std::shared_ptr<const lease_terms> terms;  // the tenure's
        clock::time_point deadline;
        clock::time_point next_renew;
        bool in_flight = false;
    };
    using map_type = std::unordered_map<id_type, entry>;
    map_type entries_;
    // The node of the last entry removed, reused by the next add(): a lock
    // taken and released over and over allocates no node after the first.
    map_type::node_type spare_;

    static clock::time_point next_renewal(const entry& e, clock::time_point sent) noexcept {
        return e.terms->renew_every.count() > 0 ? sent + e.terms->renew_every
                                                : clock::time_point::max();
    }
};

}  // namespace corolock::detail
