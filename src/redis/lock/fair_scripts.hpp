// The fair mutex's Lua scripts: FIFO by arrival at the server, with direct
// handoff. docs/protocol.md ("The fair mutex") describes the same layout;
// keep the two in step.
//
// Keys of one fair lock (the hash tag {name} as the mutex's):
//   corolock:{name}          hash: the mutex's fields plus kind = fair
//   corolock:{name}:fence    the fencing-token counter, shared with the mutex
//   corolock:{name}:queue    zset: waiting owner -> arrival number
//   corolock:{name}:entries  hash: waiting owner -> "<expiry ms> <seq> <lease ms>
//                            <level> <holder>" (the entry's lease in server time)
//   corolock:{name}:unlock   channel: ">owner level token seq" names the
//                            waiter a release handed the lock to
#pragma once

#include "redis/lock/scripts.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace corolock::detail {

class lock_kind;
// The fair mutex's kind (src/redis/lock/fair_kind.cpp), for lock_kind::for_spec.
const lock_kind& fair_lock_kind() noexcept;

// The keys are lock_keys made with `queue`.
// KEYS lock, fence, queue, entries; ARGV owner, lease ms, level, holder,
// entry lease ms, seq. The mutex's acquire reply; pttl is the wait cap.
const script& fair_acquire_script();
// KEYS lock, fence, queue, entries; ARGV owner, level or "*", channel.
// Also the cancellation of a wait: it always removes the owner's entry.
const script& fair_release_script(bool sharded = false);

// The lease of a waiter's queue entry, for an acquire asking for `lease`:
// a dead waiter leaves the queue within it; a live one renews it at a third.
inline std::chrono::milliseconds fair_entry_lease(std::chrono::steady_clock::duration lease) {
    return std::min(std::chrono::duration_cast<std::chrono::milliseconds>(lease),
                    std::chrono::milliseconds(2000));
}

// A release's wake-up that names the waiter it handed the lock to.
struct fair_grant {
    std::string_view owner;
    std::uint64_t level = 0;
    std::uint64_t token = 0;
    std::int64_t seq = 0;  // the seq of the waiter's entry the grant saw
};
// The payload ">owner level token seq", or nullopt for any other.
std::optional<fair_grant> parse_fair_grant(std::string_view payload) noexcept;

}  // namespace corolock::detail
