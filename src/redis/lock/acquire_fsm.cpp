#include "redis/lock/acquire_fsm.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/errc.hpp>

#include <algorithm>

namespace corolock::detail {

namespace {

// The reply could not be read: the stream was corrupt or over the client's
// limits. The client drops that connection for a new one.
bool is_unreadable(const error_code& ec) {
    return ec == error::protocol_error || ec == error::reply_too_large ||
           ec == error::nesting_too_deep;
}

// Worth another attempt within the caller's wait: the connection came back
// or will (a cluster's slot gets a primary again, Sentinel names one once a
// failover has promoted a replica); the command was fine.
bool is_transient(const error_code& ec) {
    return ec == error::timeout || ec == error::connection_lost || ec == error::not_connected ||
           ec == error::cluster_down || ec == error::no_primary || is_unreadable(ec);
}

// The script may have run on the server even though no answer came back
// (or none that could be read).
bool is_ambiguous(const error_code& ec) {
    return ec == error::timeout || ec == error::connection_lost ||
           ec == error::client_stopped || ec == boost::asio::error::operation_aborted ||
           is_unreadable(ec);
}

// A resume that does not fit the step asked for: fail closed.
acquire_fsm::action misuse() {
    acquire_fsm::action a;
    a.ec = make_error_code(boost::system::errc::state_not_recoverable);
    return a;
}

}  // namespace

acquire_fsm::action acquire_fsm::start(const facts& f) {
    if (state_ != state::initial) return finish(misuse());
    // No barging past other processes' waiters: when this process has just
    // released the lock and others wait for it, hold back for a few round
    // trips so that one of them takes its turn (bounded; see
    // lock_service::yield_until).
    // Local waiters need no such wait: their wake-up itself is held back.
    if (!try_once_ && !f.holds_lock) {
        const auto until = std::min(f.yield_until, wait_deadline_);
        if (until > f.now) {
            contended_ = true;
            return wait(state::yielding, until, {});
        }
    }
    return after_yield(f);
}

acquire_fsm::action acquire_fsm::after_yield(const facts& f) {
    // No barging past local waiters: when other handles in this process are
    // already queued for the lock (and it is not ours already), join the back
    // of the queue instead of racing the waiter that a release just woke.
    // Without this, a task that releases and at once acquires again wins
    // nearly every time, and the others starve. The wait is capped like any
    // other, at the holder's TTL as last seen by a local waiter.
    if (!try_once_ && !f.holds_lock && !abandoned_ && f.expiry_hint > f.now &&
        f.local_waiters > 0) {
        queued_ = true;
        contended_ = true;
        action a;
        a.join_queue = true;
        return wait(state::waiting, std::min(f.expiry_hint, wait_deadline_), a);
    }
    return attempt({});
}

acquire_fsm::action acquire_fsm::on_wait(const facts& f) {
    if (state_ == state::yielding) return after_yield(f);
    if (state_ != state::waiting) return finish(misuse());
    if (abandoned_) return finish({});
    // A woken waiter stays marked woken while it tries: should it leave
    // without the lock (cancelled, failed), the service passes the wake-up
    // on; a second unlock meanwhile wakes the next waiter instead. It is
    // re-armed only when it goes back to waiting.
    return attempt({});
}

acquire_fsm::action acquire_fsm::on_handoff(const facts& f) {
    if (state_ != state::waiting) return finish(misuse());
    action a;
    contended_ = true;
    if (abandoned_)
        a.give_back = !f.service_stopped;
    else
        a.granted = true;
    return finish(a);
}

acquire_fsm::action acquire_fsm::on_attempt(const facts& f, const attempt_result& r) {
    if (state_ != state::attempting) return finish(misuse());
    action a;
    if (!r.ec && r.acquired && r.crossed) {
        // Not a grant to hand out: give it back, and try again at once (the
        // loss's clean-up is queued ahead of the new attempt), within the
        // wait, or once more for a try or an acquire without a wait.
        a.give_back = !f.service_stopped;
        if (abandoned_ || f.service_stopped) return finish(a);
        if (crossed_retries_ < max_crossed_retries &&
            (crossed_retries_ == 0 || (!try_once_ && f.now < wait_deadline_))) {
            ++crossed_retries_;
            a.fresh_level = true;
            return attempt(a);
        }
        a.ec = error::lock_lost;
        return finish(a);
    }
    if (!r.ec && r.acquired) {
        // Granted after the caller gave up: hand it straight back.
        if (abandoned_)
            a.give_back = true;
        else
            a.granted = true;
        return finish(a);
    }
    if (r.ec) {
        // The script may have run: give that level back. The release is
        // owner- and level-checked, so it is harmless if nothing was granted.
        a.give_back = is_ambiguous(r.ec) && !f.service_stopped;
        const bool passing = is_transient(r.ec) || (f.fails_over && r.ec == error::never_connected);
        if (passing && !f.connect_unfixable && !try_once_ && !abandoned_ &&
            f.now < wait_deadline_ && !f.service_stopped) {
            // A lost connection or an unanswered command does not end a
            // wait: try again, with a fresh level (the old one is being
            // released), once the client has had time to reconnect.
            a.fresh_level = true;
            a.rearm = queued_;
            const auto until = std::min(f.now + retry_.next(), wait_deadline_);
            return wait(state::waiting, until, a);
        }
        a.ec = r.ec;
        return finish(a);
    }
    // Refused: another owner holds the lock.
    contended_ = true;
    if (abandoned_) return finish(a);
    if (try_once_) {
        // The service keeps the holder's expiry for the channel's local
        // waiters, if any: a RedLock waiter caps its wait with a try's.
        note_expiry(a, f, r);
        a.ec = error::lock_held;
        return finish(a);
    }
    if (f.now >= wait_deadline_) {
        a.ec = error::wait_timeout;
        return finish(a);
    }
    if (!queued_) {
        // Contended: subscribe, then try again at once. The retry is written
        // after the SUBSCRIBE on the same connection, so an unlock published
        // after it was refused cannot be missed.
        queued_ = true;
        a.join_queue = true;
        return attempt(a);
    }
    // The holder's TTL caps the wait: a lost unlock message costs at most one
    // TTL, never a hang.
    note_expiry(a, f, r);
    a.rearm = true;  // woken but not the winner: wait again, same place
    return wait(state::waiting, std::min(a.expiry, wait_deadline_), a);
}

// A key without a TTL (not ours) counts as expiring a lease from now.
// With the server's expiry in µs (docs/election.md, "Failover"): the server
// read its clock `left` before the expiry, at a moment between the
// attempt's sending and its reply, so the expiry is between sent + left and
// now + left on this clock. The first wait for an expiry ends at the
// earliest (the next try then reaches the server about when the key is
// gone; early by at most that uncertainty); a refusal naming the same
// expiry again means that try came early, and every later wait for it ends
// at the latest, which is never early: at most two tries per expiry.
void acquire_fsm::note_expiry(action& a, const facts& f, const attempt_result& r) {
    a.note_expiry = true;
    if (r.expires_in_us >= 0 && r.expires_at_ms >= 0 && r.sent != clock::time_point{} &&
        r.sent <= f.now) {
        const auto left = std::chrono::microseconds(r.expires_in_us);
        const bool first = r.expires_at_ms != early_for_ms_;
        early_for_ms_ = r.expires_at_ms;
        a.expiry = (first ? r.sent : f.now) + left;
        return;
    }
    const auto ttl =
        r.pttl >= 0 ? clock::duration(std::chrono::milliseconds(r.pttl + 1)) : lease_;
    a.expiry = f.now + ttl;
}

acquire_fsm::action acquire_fsm::attempt(action a) {
    if (abandoned_) return finish(a);
    a.what = step::attempt;
    state_ = state::attempting;
    return a;
}

acquire_fsm::action acquire_fsm::wait(state next, clock::time_point until, action a) {
    a.what = step::wait;
    a.until = until;
    state_ = next;
    return a;
}

acquire_fsm::action acquire_fsm::finish(action a) {
    a.what = step::done;
    a.rearm = false;
    a.leave_queue = queued_;
    queued_ = false;
    state_ = state::finished;
    return a;
}

}  // namespace corolock::detail
