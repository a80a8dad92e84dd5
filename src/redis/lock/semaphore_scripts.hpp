// The Lua scripts of corolock::semaphore. docs/protocol.md ("The
// semaphore") describes the same layout; keep the two in step.
//
// A semaphore named NAME shares the mutex's key names (hash tag {NAME}):
//   corolock:{NAME}         hash: kind = "semaphore" (or sole_semaphore_kind
//                           while `sole` is set, which older scripts refuse),
//                           capacity,
//                           used = the permits of every owner in the hash,
//                           next = at most the soonest lease end (server ms),
//                           sole = the owner while it is the only one (its
//                           lease end is then `next`, and not in the set),
//                           g:<owner> = "<permits> <level>/<permits> ...",
//                           h:<owner> = "<since µs> <pid> <host> <label>"
//   corolock:{NAME}:leases  zset: owner -> its lease end (server ms), from
//                           the second owner on
//   corolock:{NAME}:fence   the fence counter, shared with every kind
//   corolock:{NAME}:unlock  the channel; a release publishes "*<free permits>"
//
// Every grant of one owner (handle) belongs to its one tenure and shares its
// lease end. Once `next` has passed, a script drops up to 64 owners whose
// lease ended (ZRANGEBYSCORE -inf now LIMIT); nothing reads the whole hash
// or set.
#pragma once

#include "redis/lock/scripts.hpp"

namespace corolock::detail {

// KEYS lock hash, leases, fence counter; ARGV owner, lease ms, level, permits,
// capacity, holder. {1, token, levels, lease left ms, created} or
// {0, 0, free permits, wait cap ms, 0}.
const script& semaphore_acquire_script();
// KEYS lock hash, leases, channel; ARGV owner, level or "*". {release_status, receivers}.
const script& semaphore_release_script(bool sharded = false);
// KEYS lock hash, leases; ARGV owner, lease ms (0: only check). A renew_status.
const script& semaphore_renew_script();

}  // namespace corolock::detail
