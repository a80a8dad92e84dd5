// Fair hand-over of a contended lock between processes, per unlock channel.
//
// The releasing process is awake and would win nearly every race for the
// lock it just released (cross-process starvation). So an unlock message
// that arrives while our own release is in flight (it always comes just
// before the reply) wakes the local waiter only once the reply says whether
// other processes wait too; if they do, only after a short yield, so that
// turns alternate. Sans-I/O: the caller passes the times, wakes the waiters
// and runs the channel's timer, which an entry only keeps for reuse.
#pragma once

#include "redis/lock/waiters.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace corolock::detail {

class handoff_table {
public:
    using clock = std::chrono::steady_clock;

    // How long other processes' waiters get: a few of our round trips,
    // bounded so that a dead or slow remote waiter costs ours at most that.
    static constexpr clock::duration min_yield = std::chrono::microseconds(300);
    static constexpr clock::duration max_yield = std::chrono::milliseconds(5);

    // A release of the channel's lock is sent while local waiters wait.
    void on_release_sent(std::string_view channel);

    // An unlock message: true to wake a local waiter now, false when it is
    // held until our own release's reply.
    bool wake_on_message(std::string_view channel);

    // What to do after a release's reply.
    struct reply_decision {
        bool wake_now = false;  // wake one local waiter at once
        // Arm the channel's timer for this time (min(): do not); when it
        // fires, on_timer() says how many waiters to wake.
        clock::time_point arm_at = clock::time_point::min();
    };
    // A release's reply: `receivers` got the unlock message (-1: unknown,
    // the release failed); `tracked`: on_release_sent() counted it;
    // `local_waiters`: this process waits on the channel (one receiver is
    // then ours). `may_arm`: a timer may be armed (the client runs).
    reply_decision on_release_reply(std::string_view channel, bool tracked, std::int64_t receivers,
                                    bool local_waiters, clock::time_point sent,
                                    clock::time_point now, bool may_arm);

    // The channel's timer fired: how many held wake-ups to deliver now;
    // erase_if_idle() once they are delivered.
    int on_timer(std::string_view channel);
    // Forgets the channel once nothing is in flight, held or yielding.
    void erase_if_idle(std::string_view channel, clock::time_point now);

    // Until when this process's acquires of the channel's lock hold back;
    // min() when not yielding.
    clock::time_point yield_until(std::string_view channel, clock::time_point now);

    // The channel's timer, kept with its entry (null until first armed).
    // Only valid for a channel whose on_release_reply() asked to arm.
    std::unique_ptr<boost::asio::steady_timer>& timer(std::string_view channel);

    template <class F>
    void for_each_timer(F&& f) {
        for (auto& [channel, h] : entries_)
            if (h.timer) f(*h.timer);
    }

    bool empty() const noexcept { return entries_.empty(); }

private:
    struct entry {
        int releases_in_flight = 0;
        bool deferred_wake = false;
        bool wake_armed = false;  // the timer holds `held_wakes` back
        int held_wakes = 0;
        clock::time_point yield_until = clock::time_point::min();
        std::unique_ptr<boost::asio::steady_timer> timer;
    };
    entry& entry_for(std::string_view channel);

    std::unordered_map<std::string, entry, string_hash, std::equal_to<>> entries_;
};

}  // namespace corolock::detail
