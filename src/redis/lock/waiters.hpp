// Local waiters of every lock, per unlock channel, without any I/O.
//
// There is one SUBSCRIBE per channel per process however many coroutines
// wait: add() says when the first waiter arrives (subscribe) and remove()
// when the last leaves (unsubscribe). An unlock message wakes one waiter, the
// longest-waiting one not already woken; a woken waiter that leaves without
// using its wake-up passes it on, so a release is never swallowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace corolock::detail {

// Hashes std::string keys and std::string_view lookups alike, so that a
// lookup by view builds no string.
struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
        return std::hash<std::string_view>{}(s);
    }
};

// find() hashes the key even when the map is empty, and the lock layer's
// maps keyed by channel are empty on the uncontended path: their lookups
// go through this, which hashes nothing then.
template <class Map>
auto find_channel(Map& map, std::string_view channel) -> decltype(map.find(channel)) {
    return map.empty() ? map.end() : map.find(channel);
}

class unlock_waiters {
public:
    struct waiter {
        // Called with `context` at most once per wake-up. A plain function
        // pointer: every waiter of a burst carries one.
        void (*wake)(void* context) noexcept = nullptr;
        void* context = nullptr;
        // While registered: the channel's name, as the map holds it (a map
        // node's key does not move while the node exists, and the node
        // exists while it has waiters).
        const std::string* channel = nullptr;
        std::list<waiter*>::iterator pos;
        bool woken = false;
        bool registered = false;
        // How many permits the waiter asks for (1 for a lock): a release that
        // frees some wakes only the waiters that fit (wake_all).
        std::uint32_t need = 1;
        // A reader that yields to writers (a shared mutex with writer
        // preference): wake_writers() does not wake it but calls defer()
        // with how long it cannot get in.
        bool yields = false;
        void (*defer)(void* context, std::uint64_t ms) noexcept = nullptr;
    };

    // Returns true when w is the channel's first waiter: subscribe now.
    bool add(waiter& w, std::string_view channel);
    // Returns true when w was the last waiter: unsubscribe now. A woken
    // waiter that did not acquire passes its wake-up to the next one.
    bool remove(waiter& w, bool acquired);
    // A woken waiter that lost the race goes back to waiting, keeping its place.
    void rearm(waiter& w) noexcept { w.woken = false; }

    // An unlock message on `channel`: wakes one waiter. False if none could be woken.
    bool on_message(std::string_view channel);
    // A release that may let several in (permits, readers): wakes the
    // waiters of the channel not woken already, oldest first, as long as
    // their needs fit in `free` (a waiter that does not fit is skipped, a
    // later smaller one may still fit). Returns how many it woke.
    std::size_t wake_all(std::string_view channel,
                         std::uint64_t free = std::numeric_limits<std::uint64_t>::max());
    // A release after which readers that yield cannot get in for `ms`
    // more (a waiting writer's marker, or a writer holds): wakes the
    // channel's waiters not woken already that do not yield, and tells
    // each yielding one (defer) that it need not try for `ms`. Returns how
    // many it woke.
    std::size_t wake_writers(std::string_view channel, std::uint64_t ms);
    // After a reconnect messages may have been lost: wake one per channel.
    void wake_one_per_channel();
    // Every channel with waiters (to re-subscribe after a reconnect).
    std::vector<std::string> channels() const;

    std::size_t channel_count() const noexcept { return channels_.size(); }
    std::size_t waiter_count(std::string_view channel) const;
    std::size_t total_waiters() const noexcept { return total_; }

private:
    bool wake_first(std::list<waiter*>& list);

    std::unordered_map<std::string, std::list<waiter*>, string_hash, std::equal_to<>> channels_;
    std::size_t total_ = 0;
};

// The count a wake-all release message carries: "*<free permits>" gives
// the permits, a bare or unreadable "*..." no bound (everyone tries).
std::uint64_t wake_all_count(std::string_view payload) noexcept;
// A shared mutex's "*w<ms>" (wake_writers): the ms; nullopt for any other
// payload, which wake_all() handles (an unreadable one wakes everyone).
std::optional<std::uint64_t> writers_wake_ms(std::string_view payload) noexcept;

}  // namespace corolock::detail
