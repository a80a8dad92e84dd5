// RedLock's decisions without I/O: one acquire round over N independent
// Redis nodes, and the hold that follows it (docs/redlock.md).
//
// The backend sends the mutex acquire script to every node at once and
// tells this class what each node answered (granted, refused, failed or
// timed out); the class says when the round is decided and what the hold's
// deadline is. During the hold the watchdog renews on every node and
// reports each node's answer; the hold is lost when fewer than a majority of
// nodes can still be confirmed, or at the deadline.
//
// The deadline is the earliest moment a majority could have expired the key:
// each node's key lives at least `sent + lease - drift` (the command reached
// the node after it was sent; drift as the single-node watchdog's,
// watchdog_schedule::drift), and with g nodes held the lock is a majority's
// until the (g - majority + 1)-th earliest of those moments. No clock of a
// server is read: only this process's steady_clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace corolock::detail {

class redlock_quorum {
public:
    using clock = std::chrono::steady_clock;

    enum class node_state : std::uint8_t {
        pending,  // asked, no answer yet
        held,     // granted (or confirmed by a renewal): counted until its deadline
        refused,  // another owner holds the key there (or the key is gone)
        failed,   // error, disconnect or per-node timeout: may hold the key, unknown
    };
    enum class outcome : std::uint8_t { pending, granted, failed };

    // `nodes` >= 1 (RedLock uses 3 or 5; an even count works, with the
    // larger majority).
    explicit redlock_quorum(std::size_t nodes);

    static std::size_t majority_of(std::size_t nodes) noexcept { return nodes / 2 + 1; }
    std::size_t size() const noexcept { return nodes_.size(); }
    std::size_t majority() const noexcept { return majority_of(nodes_.size()); }

    // --- an acquire round ---
    // Every node pending. `started`: taken before the first request was
    // written (the earliest any node could have started its TTL); `lease`:
    // the TTL every request asks for.
    void begin_round(clock::time_point started, clock::duration lease);
    // A node's answer to this round's request. Answers to a node that is no
    // longer pending are ignored: a grant that arrives after its node timed
    // out is the backend's to give back (or to confirm by a renewal, see
    // on_renewed()).
    void on_granted(std::size_t node, std::uint64_t token);
    void on_refused(std::size_t node);
    void on_failed(std::size_t node);
    // Granted once a majority holds with validity left at `now`; failed once
    // a majority can no longer be reached (too many refusals and failures),
    // or when the validity is used up; pending otherwise.
    outcome decide(clock::time_point now) const;
    // lease - (now - started) - drift: what is left of the round's lease
    // (negative once used up). Meaningful for the round only.
    clock::duration validity(clock::time_point now) const noexcept;

    // --- the hold ---
    // A renewal sent to `node` at `sent` asking for `lease` was confirmed:
    // the node's deadline moves to sent + lease - drift unless it is later
    // already. A node that had failed (a timeout whose grant arrived late)
    // is held again: the renewal script checked the owner.
    void on_renewed(std::size_t node, clock::time_point sent, clock::duration lease);
    // The same with the node's own deadline (a node guard's lease_deadline(),
    // which its watchdog computed as sent + lease - drift).
    void on_confirmed_until(std::size_t node, clock::time_point deadline);
    // The renewal found another owner or no key (a restart without
    // persistence, an expiry): the node no longer counts.
    void on_renew_refused(std::size_t node);
    // The renewal failed (error, timeout): the node's deadline stays.
    void on_renew_failed(std::size_t node) noexcept;
    // The earliest moment a majority could have expired the key
    // (time_point::min() when fewer than a majority are held).
    clock::time_point deadline() const;
    // A majority can no longer be confirmed at `now`.
    bool lost(clock::time_point now) const { return now >= deadline(); }

    // --- per node ---
    node_state state(std::size_t node) const noexcept { return nodes_[node].state; }
    clock::time_point node_deadline(std::size_t node) const noexcept {
        return nodes_[node].deadline;
    }
    std::size_t count(node_state s) const noexcept;
    // Nodes counted as held at `now` (their deadline not passed).
    std::size_t held_at(clock::time_point now) const noexcept;
    // The largest token among the held nodes (0 when none). Not a fencing
    // token: per-node sequences are independent (docs/redlock.md, "Tokens").
    std::uint64_t max_token() const noexcept;

private:
    struct node {
        node_state state = node_state::pending;
        clock::time_point deadline = clock::time_point::min();
        std::uint64_t token = 0;
    };
    std::vector<node> nodes_;
    clock::time_point started_{};
    clock::duration lease_{};
};

}  // namespace corolock::detail
