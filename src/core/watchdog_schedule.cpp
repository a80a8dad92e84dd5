#include "core/watchdog_schedule.hpp"

#include <algorithm>

namespace corolock::detail {

void watchdog_schedule::add(id_type id, clock::time_point sent,
                            std::shared_ptr<const lease_terms> terms, clock::duration granted) {
    entry e;
    e.terms = std::move(terms);
    e.deadline = deadline_for(sent, granted);
    e.next_renew = next_renewal(e, sent);
    if (auto it = entries_.find(id); it != entries_.end()) {
        it->second = std::move(e);
    } else if (spare_) {
        spare_.key() = id;
        spare_.mapped() = std::move(e);
        entries_.insert(std::move(spare_));
    } else {
        entries_.emplace(id, std::move(e));
    }
}

void watchdog_schedule::remove(id_type id) noexcept {
    auto node = entries_.extract(id);
    if (!node || spare_) return;
    node.mapped().terms.reset();  // the spare keeps no tenure alive
    spare_ = std::move(node);
}

void watchdog_schedule::clear() noexcept { entries_.clear(); }

watchdog_schedule::due_list watchdog_schedule::due(clock::time_point now) {
    due_list out;
    for (auto it = entries_.begin(); it != entries_.end();) {
        entry& e = it->second;
        if (e.deadline <= now) {
            out.lost.push_back(it->first);
            it = entries_.erase(it);
            continue;
        }
        // Renew everything due within a quarter period, so that locks taken
        // at different moments fall into a few shared batches.
        const auto every = e.terms->renew_every;
        if (!e.in_flight && every.count() > 0 && e.next_renew <= now + every / 4) {
            e.in_flight = true;
            out.renew.push_back(it->first);
        }
        ++it;
    }
    return out;
}

void watchdog_schedule::on_renewed(id_type id, clock::time_point sent,
                                   clock::duration lease) noexcept {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    entry& e = it->second;
    e.in_flight = false;
    // A late confirmation of an older renewal never moves the deadline back.
    if (lease.count() > 0) e.deadline = std::max(e.deadline, deadline_for(sent, lease));
    e.next_renew = next_renewal(e, sent);
}

void watchdog_schedule::on_renew_failed(id_type id, clock::time_point now) noexcept {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    entry& e = it->second;
    e.in_flight = false;
    // Retry a few times before the deadline rather than waiting a full period.
    // Without the watchdog (a check after a reconnect failed) nothing is
    // retried: the deadline alone decides.
    if (e.terms->renew_every.count() == 0) {
        e.next_renew = clock::time_point::max();
        return;
    }
    const auto retry =
        std::max<clock::duration>(e.terms->renew_every / 4, std::chrono::milliseconds(10));
    e.next_renew = now + retry;
}

watchdog_schedule::clock::time_point watchdog_schedule::deadline(id_type id) const noexcept {
    auto it = entries_.find(id);
    return it == entries_.end() ? clock::time_point::min() : it->second.deadline;
}

watchdog_schedule::clock::time_point watchdog_schedule::wake_of(id_type id) const noexcept {
    auto it = entries_.find(id);
    if (it == entries_.end()) return clock::time_point::max();
    const entry& e = it->second;
    return e.in_flight ? e.deadline : std::min(e.deadline, e.next_renew);
}

watchdog_schedule::clock::time_point watchdog_schedule::next_wake() const noexcept {
    auto next = clock::time_point::max();
    for (const auto& [id, e] : entries_) {
        next = std::min(next, e.deadline);
        if (!e.in_flight) next = std::min(next, e.next_renew);
    }
    return next;
}

}  // namespace corolock::detail
