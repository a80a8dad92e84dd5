// The decisions of one acquire operation, without any I/O.
//
// mutex::async_acquire is a thin Asio shell (src/mutex.cpp) that performs
// what this machine asks for: run the acquire script, wait on a timer that
// an unlock message can cut short, join or leave the lock's local queue,
// give a level back, and finally complete the caller's handler. Each step's
// outcome goes back in through on_attempt() or on_wait(); the shell also
// tells what it sees of the rest of the process at that moment (the facts),
// so every decision here can be unit-tested on made-up clocks and replies.
// A resume that does not fit the current step (a bug in the shell) ends the
// operation with an error, never with a grant.
//
// The operation is bounded: each step either ends it or waits on a timer
// capped by the wait deadline and the holder's TTL, and cancel() (the
// caller's cancellation, or the client stopping) ends it at the next step.
#pragma once

#include "core/backoff.hpp"

#include <corolock/error.hpp>

#include <chrono>
#include <cstdint>

namespace corolock::detail {

class acquire_fsm {
public:
    using clock = std::chrono::steady_clock;

    struct settings {
        bool try_once = false;
        clock::time_point wait_deadline = clock::time_point::max();
        clock::duration lease{};
        // A transient failure's retry: core/backoff.hpp's steps from
        // retry_min, doubling up to retry_max, each delay jittered.
        clock::duration retry_min{};
        clock::duration retry_max{};
    };

    // What the shell sees when it resumes the machine.
    struct facts {
        clock::time_point now{};
        bool holds_lock = false;       // the handle holds levels already: a re-entry
        bool service_stopped = false;  // the client is stopping
        // lock_service::yield_until and expiry_hint for this lock's channel.
        clock::time_point yield_until = clock::time_point::min();
        clock::time_point expiry_hint = clock::time_point::min();
        std::size_t local_waiters = 0;  // this process's waiters on the channel
        // The connection's last attempt failed for a reason retrying cannot
        // fix (a wrong password; no Sentinel knows the service): a transient
        // error is then the answer, not a reason to wait.
        bool connect_unfixable = false;
        // The service is a deployment that fails over (Sentinel, Cluster):
        // a client that never connected yet may once a replica is promoted,
        // so never_connected is waited out as a lost connection is.
        bool fails_over = false;
    };

    // The reply to an attempt, as far as decisions go.
    struct attempt_result {
        error_code ec;
        bool acquired = false;
        std::int64_t pttl = -2;  // the holder's TTL in ms when refused (-1: none)
        // Granted, but across a loss of the tenure it re-entered (or with the
        // key created behind a live tenure): the grant cannot be trusted, as
        // with an ambiguous reply. It is given back and tried again, fresh.
        bool crossed = false;
        // Refused with the holder's TTL as the cap, on a server that tells
        // (lock_kind.hpp's acquire_reply): the µs until the server ends it,
        // read between `sent` and the reply, and that expiry's unix ms
        // (-1: not known; the wait then ends at pttl + 1 ms from the reply).
        std::int64_t expires_in_us = -1;
        std::int64_t expires_at_ms = -1;
        clock::time_point sent{};  // when the attempt was written
    };

    // How many grants that crossed a loss one operation gives back and
    // retries before it ends with error::lock_lost. Each needs a loss of its
    // own, so this only bounds a pathological run.
    static constexpr int max_crossed_retries = 3;

    enum class step {
        attempt,  // run the acquire script; resume with on_attempt()
        wait,     // wait until `until`, or an unlock message; resume with on_wait()
        done,     // finished: see `granted` and `ec`
    };

    struct action {
        step what = step::done;
        clock::time_point until{};   // step::wait
        clock::time_point expiry{};  // note_expiry
        // Side effects for the shell, in this order, before the step:
        bool give_back = false;    // release the current level in the background
        bool fresh_level = false;  // take a new level for the next attempt
        bool join_queue = false;   // register as a waiter on the unlock channel
        bool rearm = false;        // woken but not the winner: wait again, same place
        bool note_expiry = false;  // tell the service the holder's lease ends at `expiry`
        bool leave_queue = false;  // step::done: deregister the waiter
        // step::done:
        bool granted = false;  // complete the caller with a guard for the current level
        error_code ec;         // else complete the caller with this (no-op if abandoned)
    };

    explicit acquire_fsm(const settings& s) noexcept
        : wait_deadline_(s.wait_deadline),
          lease_(s.lease),
          retry_(s.retry_min, s.retry_max),
          try_once_(s.try_once) {}

    // The first step.
    action start(const facts& f);
    // After a step::attempt.
    action on_attempt(const facts& f, const attempt_result& r);
    // After a step::wait: the timer fired, an unlock message cut it short, or
    // cancel() did.
    action on_wait(const facts& f);
    // While a step::wait is pending: the server handed the current level to
    // this operation (a fair mutex's release granted it to the queue's
    // head). Ends the operation granted, or gives the level back when the
    // caller has had its answer. Fails closed in any other step (the shell
    // lets an attempt in flight find the grant instead).
    action on_handoff(const facts& f);

    // The caller has had its answer (cancellation, or the client stopping):
    // the next step ends the operation, and a lock the server grants after
    // this is given back at once.
    void cancel() noexcept { abandoned_ = true; }
    bool abandoned() const noexcept { return abandoned_; }
    bool try_once() const noexcept { return try_once_; }
    clock::duration lease() const noexcept { return lease_; }
    bool queued() const noexcept { return queued_; }
    // The operation had to wait for another owner: an attempt was refused,
    // or it queued behind this process's waiters or yielded to other
    // processes' (a retry after a transient failure does not count).
    bool contended() const noexcept { return contended_; }
    bool finished() const noexcept { return state_ == state::finished; }
    // True while the next resume decides whether to queue behind this
    // process's waiters: only then are facts' expiry_hint and local_waiters
    // read (and yield_until only by start()).
    bool deciding_queue() const noexcept {
        return state_ == state::initial || state_ == state::yielding;
    }

private:
    enum class state : std::uint8_t { initial, yielding, attempting, waiting, finished };

    action after_yield(const facts& f);
    action attempt(action a);
    action wait(state next, clock::time_point until, action a);
    action finish(action a);
    // Tells the service when the holder's lease ends, from a refusal.
    void note_expiry(action& a, const facts& f, const attempt_result& r);

    // The settings, field by field: a burst of acquires has one machine
    // each.
    clock::time_point wait_deadline_;
    clock::duration lease_;
    backoff retry_;  // after a transient failure
    bool try_once_;
    std::uint8_t crossed_retries_ = 0;
    // The holder's expiry (unix ms) whose wait already ended at its
    // earliest possible instant: the next wait for it ends at its latest.
    std::int64_t early_for_ms_ = -1;
    state state_ = state::initial;
    bool queued_ = false;     // registered on the unlock channel
    bool abandoned_ = false;  // the caller has had its answer
    bool contended_ = false;
};

}  // namespace corolock::detail
