// The Lua scripts of corolock::shared_mutex (readers and writers).
// docs/protocol.md ("The shared mutex") describes the same layout; keep the
// two in step.
//
// A shared mutex named NAME (hash tag {NAME}, as every kind):
//   corolock:{NAME}          hash: kind = "shared",
//                            writer = the writer's owner id, holder (its holder
//                            record), we = its lease end (server ms),
//                            x = its levels ("<level> <level> ..."),
//                            r:<owner> = a reader's levels,
//                            ww = "<owner> <end ms>": a waiting writer's marker
//   corolock:{NAME}:leases   zset: reader owner -> its lease end (server ms)
//   corolock:{NAME}:fence    the fence counter, shared with every kind
//   corolock:{NAME}:unlock   the channel; a release that may let others in
//                            publishes "*" (every local waiter wakes), or
//                            "*w<ms>" when readers with writer preference
//                            cannot get in for <ms> more (a waiting writer's
//                            marker, or a writer holds): the others wake, and
//                            those wait at most <ms> more before trying
//
// Each owner (handle) has one lease end: its reader entry's score, and `we`
// while it writes. Every script first drops what ended: the writer when `we`
// passed, the marker when its end passed, and up to 64 readers by score
// (ZRANGEBYSCORE -inf now LIMIT); live readers are counted with ZCOUNT, so
// nothing reads the whole set.
#pragma once

#include "core/backend.hpp"
#include "redis/lock/scripts.hpp"

namespace corolock::detail {

class lock_kind;
// The shared mutex's kind (src/redis/lock/shared_kind.cpp), for lock_kind::for_spec.
const lock_kind& shared_lock_kind() noexcept;

// KEYS lock, readers, fence; ARGV owner, lease ms, level, holder, "s"
// (shared, behind a waiting writer) / "r" (shared, ahead of it) / "x"
// (exclusive), marker lease ms (a refused writer sets or renews its
// waiting marker; 0: none).
// {1, token, the owner's levels, ms left of its lease, created} or
// {0, 0, live readers, wait cap ms, 0}; {-1, 0, 0, -2, 0}: an upgrade (a
// writer's acquire by an owner holding only shared levels), refused.
const script& shared_acquire_script();
// KEYS lock, readers, channel; ARGV owner, level or "*". {release_status,
// receivers}. Also drops the owner's waiting marker (a writer giving up).
const script& shared_release_script(bool sharded = false);
// KEYS lock, readers; ARGV owner, lease ms (0: only check). A renew_status.
const script& shared_renew_script();

// Whether an acquire of a handle with `spec` is a writer that, refused,
// marks itself waiting (and so takes the marker back when it gives up).
inline bool writer_marks(const lock_spec& spec, const acquire_request& req) noexcept {
    return spec.kind == lock_spec::kind_t::shared_mutex && spec.writer_preference &&
           !req.shared && req.waits;
}

// Whether a shared acquire of a handle with `spec` yields to a waiting
// writer's marker ("s" above, not "r"): such a reader is held back while
// the marker lives, so a "*w<ms>" release does not wake it.
inline bool reader_yields(const lock_spec& spec, const acquire_request& req) noexcept {
    return spec.kind == lock_spec::kind_t::shared_mutex && spec.writer_preference && req.shared;
}

// A waiting writer's marker has the lease of a fair mutex's queue entry
// (fair_entry_lease): a dead waiting writer stops holding readers back
// within it; a live one renews it at each attempt, at most a third apart.

}  // namespace corolock::detail
