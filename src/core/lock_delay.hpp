// Lock-delay (lock_options::lock_delay; docs/safety.md, "Lock-delay"): the
// one rule for whether a name is in lock-delay, and until when.
//
// A grant or renewal asks the server to keep the holder's record for
// lease_terms::server_hold() (the lease, then the delay) and records the
// delay beside it. Once no more than the delay is left of the record, the
// holder's lease has ended without a clean release: the name is in
// lock-delay, and nobody (its own owner included) takes it until the record
// expires. A clean release deletes the record at once. A holder that finds
// its own tenure lost removes its levels and keeps the record: the acquire
// script takes a record with no level left as in lock-delay too, so that
// the owner cannot re-enter it in the drift allowance before the lease's
// end on the server. Status reads the rule here (delayed_for); the Redis
// scripts carry the same rule in Lua (in_lock_delay_lua in
// redis/lock/scripts.cpp; test/integration/lock_delay_test.cpp checks that
// both agree).
#pragma once

#include "core/tenure.hpp"

#include <chrono>
#include <cstdint>

namespace corolock::detail {

// How much longer a name is unavailable because of lock-delay, for a record
// with `left` to live that records `delay`: zero when it is not in
// lock-delay (no delay recorded, no TTL, or the lease still runs).
constexpr std::chrono::milliseconds delayed_for(std::chrono::milliseconds left,
                                                std::chrono::milliseconds delay) noexcept {
    if (delay.count() <= 0 || left.count() < 0 || left > delay) return std::chrono::milliseconds{0};
    return left;
}

// The script inputs: what the server keeps without a renewal (ms), and the
// delay to record (ms; zero: no field is written, as without lock-delay).
inline std::int64_t server_hold_ms(const lease_terms& t) noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.server_hold()).count();
}
inline std::int64_t lock_delay_ms(const lease_terms& t) noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.lock_delay).count();
}

}  // namespace corolock::detail
