#include "redis/lock/handoff.hpp"

#include <algorithm>
#include <utility>

namespace corolock::detail {

handoff_table::entry& handoff_table::entry_for(std::string_view channel) {
    auto it = find_channel(entries_, channel);
    if (it == entries_.end()) it = entries_.try_emplace(std::string(channel)).first;
    return it->second;
}

void handoff_table::on_release_sent(std::string_view channel) {
    ++entry_for(channel).releases_in_flight;
}

bool handoff_table::wake_on_message(std::string_view channel) {
    auto it = find_channel(entries_, channel);
    if (it == entries_.end() || it->second.releases_in_flight == 0) return true;
    it->second.deferred_wake = true;
    return false;
}

handoff_table::reply_decision handoff_table::on_release_reply(
    std::string_view channel, bool tracked, std::int64_t receivers, bool local_waiters,
    clock::time_point sent, clock::time_point now, bool may_arm) {
    reply_decision d;
    // Any receiver but our own connection is another process's waiter.
    if (receivers - (local_waiters ? 1 : 0) > 0)
        entry_for(channel).yield_until =
            now + std::clamp<clock::duration>(4 * (now - sent), min_yield, max_yield);
    auto it = find_channel(entries_, channel);
    if (it == entries_.end()) return d;
    auto& h = it->second;
    if (tracked && h.releases_in_flight > 0) --h.releases_in_flight;
    if (h.deferred_wake && h.releases_in_flight == 0) {
        h.deferred_wake = false;
        if (h.wake_armed) {
            // Already yielding: this wake-up goes with the one held back.
            ++h.held_wakes;
            return d;
        }
        if (h.yield_until > now && may_arm) {
            h.wake_armed = true;
            h.held_wakes = 1;
            d.arm_at = h.yield_until;
            return d;
        }
        d.wake_now = true;
    }
    erase_if_idle(channel, now);
    return d;
}

int handoff_table::on_timer(std::string_view channel) {
    auto it = find_channel(entries_, channel);
    if (it == entries_.end()) return 0;
    const int wakes = std::exchange(it->second.held_wakes, 0);
    it->second.wake_armed = false;
    return wakes;
}

handoff_table::clock::time_point handoff_table::yield_until(std::string_view channel,
                                                            clock::time_point now) {
    auto it = find_channel(entries_, channel);
    if (it == entries_.end()) return clock::time_point::min();
    const auto until = it->second.yield_until;
    erase_if_idle(channel, now);
    return until > now ? until : clock::time_point::min();
}

std::unique_ptr<boost::asio::steady_timer>& handoff_table::timer(std::string_view channel) {
    return entry_for(channel).timer;
}

void handoff_table::erase_if_idle(std::string_view channel, clock::time_point now) {
    auto it = find_channel(entries_, channel);
    if (it == entries_.end()) return;
    const auto& h = it->second;
    if (h.releases_in_flight == 0 && !h.deferred_wake && !h.wake_armed && h.yield_until <= now)
        entries_.erase(it);
}

}  // namespace corolock::detail
