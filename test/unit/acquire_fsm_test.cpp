// The acquire operation's decisions (detail::acquire_fsm) on a made-up
// clock: no server, no sockets, no timers.
#include "redis/lock/acquire_fsm.hpp"

#include <boost/asio/error.hpp>

#include <catch2/catch.hpp>

using corolock::error;
using corolock::error_code;
using corolock::detail::acquire_fsm;
using namespace std::chrono_literals;
using step = acquire_fsm::step;
using time_point = acquire_fsm::clock::time_point;

namespace {

const time_point t0 = time_point{} + 1000s;

acquire_fsm::settings waiting_for(std::chrono::milliseconds wait) {
    acquire_fsm::settings s;
    s.wait_deadline = t0 + wait;
    s.lease = 30s;
    s.retry_min = 20ms;
    s.retry_max = 200ms;
    return s;
}

acquire_fsm::facts at(time_point now) {
    acquire_fsm::facts f;
    f.now = now;
    return f;
}

acquire_fsm::attempt_result granted() { return {{}, true, -2}; }
acquire_fsm::attempt_result refused(std::int64_t pttl) { return {{}, false, pttl}; }
acquire_fsm::attempt_result failed(error_code ec) { return {ec, false, -2}; }

// Started, then cancelled with its first attempt in flight: what the machine
// does with that attempt's reply.
acquire_fsm::action reply_after_cancel(const acquire_fsm::attempt_result& r) {
    acquire_fsm m(waiting_for(5s));
    REQUIRE(m.start(at(t0)).what == step::attempt);
    m.cancel();
    return m.on_attempt(at(t0 + 1ms), r);
}

// Started at t0 and refused once: the machine has joined the queue and asks
// for its second attempt.
void start_queued(acquire_fsm& m) {
    REQUIRE(m.start(at(t0)).what == step::attempt);
    REQUIRE(m.on_attempt(at(t0), refused(800)).join_queue);
}

}  // namespace

TEST_CASE("acquire_fsm: an uncontended acquire is one attempt", "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    auto a = m.start(at(t0));
    REQUIRE(a.what == step::attempt);
    CHECK_FALSE(a.join_queue);
    a = m.on_attempt(at(t0 + 1ms), granted());
    CHECK(a.what == step::done);
    CHECK(a.granted);
    CHECK_FALSE(a.ec);
    CHECK_FALSE(a.leave_queue);
    CHECK_FALSE(a.give_back);
    CHECK(m.finished());
}

TEST_CASE("acquire_fsm: try_once never queues or waits", "[acquire_fsm]") {
    auto s = waiting_for(5s);
    s.try_once = true;
    acquire_fsm m(s);
    auto f = at(t0);
    // Neither a yield nor other local waiters hold a try back.
    f.yield_until = t0 + 3ms;
    f.expiry_hint = t0 + 1s;
    f.local_waiters = 3;
    auto a = m.start(f);
    REQUIRE(a.what == step::attempt);
    CHECK_FALSE(a.join_queue);
    a = m.on_attempt(at(t0 + 1ms), refused(800));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::lock_held);
    CHECK_FALSE(a.leave_queue);
    // The holder's expiry is noted for the channel's waiters (RedLock's).
    CHECK(a.note_expiry);
    CHECK(a.expiry == t0 + 1ms + 801ms);
    // A transient failure is not retried either.
    acquire_fsm m2(s);
    m2.start(at(t0));
    a = m2.on_attempt(at(t0), failed(error::not_connected));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::not_connected);
}

TEST_CASE("acquire_fsm: contended, it subscribes, retries at once, then waits at most the TTL",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    REQUIRE(m.start(at(t0)).what == step::attempt);
    // Refused: join the queue (SUBSCRIBE) and try again straight away, so an
    // unlock published between the two cannot be missed.
    auto a = m.on_attempt(at(t0 + 1ms), refused(800));
    REQUIRE(a.what == step::attempt);
    CHECK(a.join_queue);
    CHECK(m.queued());
    // Refused again: wait, capped at the holder's TTL (+1 ms), and tell the
    // service when that lease ends.
    a = m.on_attempt(at(t0 + 2ms), refused(700));
    REQUIRE(a.what == step::wait);
    CHECK(a.until == t0 + 2ms + 701ms);
    CHECK(a.note_expiry);
    CHECK(a.expiry == t0 + 2ms + 701ms);
    CHECK_FALSE(a.join_queue);
    CHECK(a.rearm);  // not the winner: waits again, at the same place
    // Woken (or the TTL passed): retry, still marked woken, so that leaving
    // without the lock passes the wake-up on.
    a = m.on_wait(at(t0 + 100ms));
    REQUIRE(a.what == step::attempt);
    CHECK_FALSE(a.rearm);
    a = m.on_attempt(at(t0 + 101ms), granted());
    CHECK(a.what == step::done);
    CHECK(a.granted);
    CHECK(a.leave_queue);  // as the winner: the wake-up is used up
    CHECK_FALSE(m.queued());
}

// A refusal that names the holder's expiry in the server's µs: `left` µs
// after the script read the clock, expiry `at_ms`; the attempt was sent at
// `sent`.
acquire_fsm::attempt_result refused_until(std::int64_t left_us, std::int64_t at_ms,
                                          time_point sent) {
    auto r = refused(left_us / 1000);
    r.expires_in_us = left_us;
    r.expires_at_ms = at_ms;
    r.sent = sent;
    return r;
}

TEST_CASE("acquire_fsm: a waiter told the server's expiry in µs tries at most twice per expiry",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(100s));
    start_queued(m);
    // Sent at t0, answered 2 ms later: the server's clock read falls
    // somewhere in between, so the expiry is between t0 + left and
    // t0 + 2 ms + left here. The first wait ends at the earliest, not at
    // the reply + PTTL + 1 ms.
    const std::int64_t expiry_ms = 1'700'000'000'000;
    auto a = m.on_attempt(at(t0 + 2ms), refused_until(500'250, expiry_ms, t0));
    REQUIRE(a.what == step::wait);
    CHECK(a.until == t0 + 500'250us);
    CHECK(a.expiry == t0 + 500'250us);
    // Woken then, it tries; the server still holds the same expiry (the try
    // came early): every later wait for it ends at the latest, never early.
    // A server whose clock lags keeps naming it: each is one try, bounded
    // by the wait, and none more is early.
    int early = 0;
    auto now = t0 + 500'250us;
    for (int i = 0; i < 5; ++i) {
        REQUIRE(m.on_wait(at(now)).what == step::attempt);
        const auto reply = now + 1ms;
        a = m.on_attempt(at(reply), refused_until(300, expiry_ms, now));
        REQUIRE(a.what == step::wait);
        if (a.until < reply + 300us) ++early;
        CHECK(a.until == reply + 300us);
        now = a.until;
    }
    CHECK(early == 0);
    // A new expiry (the holder renewed, or another took the lock) gets its
    // own earliest wake, once.
    REQUIRE(m.on_wait(at(now)).what == step::attempt);
    a = m.on_attempt(at(now + 1ms), refused_until(900'000, expiry_ms + 900, now));
    REQUIRE(a.what == step::wait);
    CHECK(a.until == now + 900'000us);
}

TEST_CASE("acquire_fsm: without the server's expiry the wait ends at PTTL + 1 ms from the reply",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(100s));
    start_queued(m);
    auto r = refused(500);
    r.sent = t0;  // known, but no expiry in µs: the whole milliseconds
    auto a = m.on_attempt(at(t0 + 2ms), r);
    REQUIRE(a.what == step::wait);
    CHECK(a.until == t0 + 2ms + 501ms);
}

TEST_CASE("acquire_fsm: a key without a TTL is rechecked once a lease period",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(100s));
    start_queued(m);
    auto a = m.on_attempt(at(t0), refused(-1));
    REQUIRE(a.what == step::wait);
    CHECK(a.until == t0 + 30s);
}

TEST_CASE("acquire_fsm: the wait deadline caps every wait and ends the operation",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(300ms));
    start_queued(m);
    auto a = m.on_attempt(at(t0 + 1ms), refused(10'000));
    REQUIRE(a.what == step::wait);
    CHECK(a.until == t0 + 300ms);       // not the holder's 10 s
    CHECK(a.expiry == t0 + 1ms + 10'001ms);  // but the hint is the holder's lease
    a = m.on_wait(at(t0 + 300ms));
    REQUIRE(a.what == step::attempt);  // one last try at the deadline
    a = m.on_attempt(at(t0 + 301ms), refused(9'000));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::wait_timeout);
    CHECK(a.leave_queue);
    CHECK_FALSE(a.granted);
}

TEST_CASE("acquire_fsm: a zero wait tries once and times out", "[acquire_fsm]") {
    acquire_fsm m(waiting_for(0ms));
    REQUIRE(m.start(at(t0)).what == step::attempt);
    auto a = m.on_attempt(at(t0 + 1ms), refused(500));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::wait_timeout);
    CHECK_FALSE(a.leave_queue);
}

TEST_CASE("acquire_fsm: no barging past this process's queue", "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    auto f = at(t0);
    f.expiry_hint = t0 + 400ms;  // a local waiter saw the holder's lease end then
    f.local_waiters = 2;
    auto a = m.start(f);
    REQUIRE(a.what == step::wait);
    CHECK(a.join_queue);
    CHECK(a.until == t0 + 400ms);
    a = m.on_wait(at(t0 + 50ms));
    REQUIRE(a.what == step::attempt);
    CHECK_FALSE(a.rearm);
    CHECK_FALSE(a.join_queue);  // already queued: no second SUBSCRIBE
    // Refused: it waits, it does not subscribe again.
    a = m.on_attempt(at(t0 + 51ms), refused(300));
    CHECK(a.what == step::wait);
    CHECK_FALSE(a.join_queue);

    SECTION("a stale hint, or nobody waiting, does not hold an acquire back") {
        acquire_fsm stale(waiting_for(5s));
        auto g = at(t0);
        g.expiry_hint = t0 - 1ms;
        g.local_waiters = 2;
        CHECK(stale.start(g).what == step::attempt);
        acquire_fsm alone(waiting_for(5s));
        auto h = at(t0);
        h.expiry_hint = t0 + 400ms;
        CHECK(alone.start(h).what == step::attempt);
    }
    SECTION("a re-entry never queues behind others: it holds the lock") {
        acquire_fsm reentry(waiting_for(5s));
        auto g = f;
        g.holds_lock = true;
        g.yield_until = t0 + 3ms;
        CHECK(reentry.start(g).what == step::attempt);
    }
}

TEST_CASE("acquire_fsm: after this process released, it yields to other processes first",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    auto f = at(t0);
    f.yield_until = t0 + 2ms;
    auto a = m.start(f);
    REQUIRE(a.what == step::wait);
    CHECK(a.until == t0 + 2ms);
    CHECK_FALSE(a.join_queue);
    CHECK(m.deciding_queue());
    // After the yield the queue is looked at again.
    auto g = at(t0 + 2ms);
    g.expiry_hint = t0 + 300ms;
    g.local_waiters = 1;
    a = m.on_wait(g);
    REQUIRE(a.what == step::wait);
    CHECK(a.join_queue);
    CHECK_FALSE(m.deciding_queue());

    SECTION("the yield never outlasts the caller's wait") {
        acquire_fsm short_wait(waiting_for(1ms));
        auto h = at(t0);
        h.yield_until = t0 + 5ms;
        auto b = short_wait.start(h);
        REQUIRE(b.what == step::wait);
        CHECK(b.until == t0 + 1ms);
    }
}

TEST_CASE("acquire_fsm: transient failures retry with a fresh level and capped backoff",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(2s));
    m.start(at(t0));
    // not_connected: the script never ran, nothing to give back.
    auto a = m.on_attempt(at(t0), failed(error::not_connected));
    REQUIRE(a.what == step::wait);
    CHECK_FALSE(a.give_back);
    CHECK(a.fresh_level);
    // Each delay is within the upper half of its step (core/backoff.hpp).
    CHECK((a.until >= t0 + 10ms && a.until <= t0 + 20ms));
    REQUIRE(m.on_wait(at(t0 + 20ms)).what == step::attempt);
    // No answer: the script may have run, so the level is given back, and
    // the next attempt uses a new one.
    a = m.on_attempt(at(t0 + 30ms), failed(error::timeout));
    REQUIRE(a.what == step::wait);
    CHECK(a.give_back);
    CHECK(a.fresh_level);
    CHECK((a.until >= t0 + 30ms + 20ms && a.until <= t0 + 30ms + 40ms));
    std::chrono::milliseconds last{};
    auto now = t0 + 70ms;
    for (int i = 0; i < 6; ++i) {
        REQUIRE(m.on_wait(at(now)).what == step::attempt);
        a = m.on_attempt(at(now), failed(error::connection_lost));
        REQUIRE(a.what == step::wait);
        last = std::chrono::duration_cast<std::chrono::milliseconds>(a.until - now);
        now = a.until;
    }
    // Capped at retry_max: the step reached 200 ms (the delay is at least
    // its half) and went no further.
    CHECK((last >= 100ms && last <= 200ms));
    // Past the caller's wait, the failure is the answer (and the ambiguous
    // level is still given back).
    REQUIRE(m.on_wait(at(t0 + 2s)).what == step::attempt);
    a = m.on_attempt(at(t0 + 2s), failed(error::connection_lost));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::connection_lost);
    CHECK(a.give_back);
}

TEST_CASE("acquire_fsm: an unreadable reply is retried like a lost connection",
          "[acquire_fsm]") {
    // The script ran, but its reply was corrupt or over the limits, and the
    // client is reconnecting: give the level back and try again.
    for (auto ec : {error_code(error::protocol_error), error_code(error::reply_too_large),
                    error_code(error::nesting_too_deep)}) {
        acquire_fsm m(waiting_for(5s));
        m.start(at(t0));
        auto a = m.on_attempt(at(t0), failed(ec));
        CHECK(a.what == step::wait);
        CHECK(a.give_back);
        CHECK(a.fresh_level);
    }
}

TEST_CASE("acquire_fsm: no primary named (a Sentinel failover) is waited out within the wait",
          "[acquire_fsm]") {
    // The command never reached a primary: nothing to give back; tried
    // again until the caller's wait, and then that cause is the answer.
    acquire_fsm m(waiting_for(2s));
    m.start(at(t0));
    auto a = m.on_attempt(at(t0), failed(error::no_primary));
    REQUIRE(a.what == step::wait);
    CHECK_FALSE(a.give_back);
    CHECK(a.fresh_level);
    REQUIRE(m.on_wait(at(t0 + 2s)).what == step::attempt);
    a = m.on_attempt(at(t0 + 2s), failed(error::no_primary));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::no_primary);

    SECTION("a failure retrying cannot fix (no Sentinel knows the service) answers at once") {
        acquire_fsm u(waiting_for(5s));
        u.start(at(t0));
        auto f = at(t0);
        f.connect_unfixable = true;
        auto b = u.on_attempt(f, failed(error::no_primary));
        CHECK(b.what == step::done);
        CHECK(b.ec == error::no_primary);
    }
    SECTION("a deployment that fails over waits out never_connected; a single server does not") {
        acquire_fsm fo(waiting_for(5s));
        fo.start(at(t0));
        auto f = at(t0);
        f.fails_over = true;
        CHECK(fo.on_attempt(f, failed(error::never_connected)).what == step::wait);
        acquire_fsm single(waiting_for(5s));
        single.start(at(t0));
        auto b = single.on_attempt(at(t0), failed(error::never_connected));
        CHECK(b.what == step::done);
        CHECK(b.ec == error::never_connected);
    }
    SECTION("a try answers at once") {
        auto ts = waiting_for(5s);
        ts.try_once = true;
        acquire_fsm t(ts);
        t.start(at(t0));
        auto b = t.on_attempt(at(t0), failed(error::no_primary));
        CHECK(b.what == step::done);
        CHECK(b.ec == error::no_primary);
    }
}

TEST_CASE("acquire_fsm: errors that are not transient end the operation", "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    m.start(at(t0));
    auto a = m.on_attempt(at(t0), failed(error::wrong_type));
    CHECK(a.what == step::done);
    CHECK(a.ec == error::wrong_type);
    CHECK_FALSE(a.give_back);

    SECTION("a stopping client is not retried, nor is anything given back") {
        acquire_fsm s(waiting_for(5s));
        s.start(at(t0));
        auto f = at(t0);
        f.service_stopped = true;
        auto b = s.on_attempt(f, failed(error::connection_lost));
        CHECK(b.what == step::done);
        CHECK_FALSE(b.give_back);
    }
}

TEST_CASE("acquire_fsm: cancellation ends the operation at its next step", "[acquire_fsm]") {
    SECTION("while waiting: it leaves the queue without re-arming (its wake-up passes on)") {
        acquire_fsm m(waiting_for(5s));
        start_queued(m);
        REQUIRE(m.on_attempt(at(t0), refused(500)).what == step::wait);
        m.cancel();
        auto a = m.on_wait(at(t0 + 1ms));
        CHECK(a.what == step::done);
        CHECK(a.leave_queue);
        CHECK_FALSE(a.rearm);
        CHECK_FALSE(a.granted);
        CHECK_FALSE(a.give_back);
    }
    SECTION("while an attempt is in flight that the server grants: the lock goes straight back") {
        const auto a = reply_after_cancel(granted());
        CHECK(a.what == step::done);
        CHECK_FALSE(a.granted);
        CHECK(a.give_back);
    }
    SECTION("while an attempt is in flight that fails: no retry") {
        const auto a = reply_after_cancel(failed(error::not_connected));
        CHECK(a.what == step::done);
        CHECK_FALSE(a.fresh_level);
    }
    SECTION("while refused: no subscription") {
        const auto a = reply_after_cancel(refused(500));
        CHECK(a.what == step::done);
        CHECK_FALSE(a.join_queue);
        CHECK_FALSE(a.leave_queue);
    }
    SECTION("before it starts: nothing is sent") {
        acquire_fsm m(waiting_for(5s));
        m.cancel();
        auto a = m.start(at(t0));
        CHECK(a.what == step::done);
        CHECK_FALSE(a.granted);
    }
    SECTION("while yielding: it never queues") {
        acquire_fsm m(waiting_for(5s));
        auto f = at(t0);
        f.yield_until = t0 + 2ms;
        REQUIRE(m.start(f).what == step::wait);
        m.cancel();
        auto g = at(t0 + 2ms);
        g.expiry_hint = t0 + 1s;
        g.local_waiters = 4;
        auto a = m.on_wait(g);
        CHECK(a.what == step::done);
        CHECK_FALSE(a.join_queue);
        CHECK_FALSE(a.leave_queue);
    }
}

TEST_CASE("acquire_fsm: every operation ends, within its wait, whatever the replies",
          "[acquire_fsm]") {
    // A seeded mix of refusals and failures on a clock that only moves when
    // the machine waits: the operation must end by the deadline (plus the
    // one last attempt), and never wait past it.
    const auto deadline_after = 3s;
    for (unsigned seed = 1; seed <= 200; ++seed) {
        acquire_fsm m(waiting_for(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_after)));
        auto now = t0;
        auto a = m.start(at(now));
        unsigned x = seed;
        int steps = 0;
        for (; steps < 10'000 && a.what != step::done; ++steps) {
            x = x * 1103515245u + 12345u;
            if (a.what == step::wait) {
                REQUIRE(a.until <= t0 + deadline_after);
                // Woken early by a message, or at the timer.
                now = (x >> 16) % 3 == 0 ? now + (a.until - now) / 2 : std::max(now, a.until);
                a = m.on_wait(at(now));
            } else {
                now += 1ms;
                switch ((x >> 16) % 4) {
                case 0: a = m.on_attempt(at(now), refused(static_cast<std::int64_t>((x >> 8) % 5000))); break;
                case 1: a = m.on_attempt(at(now), refused(-1)); break;
                case 2: a = m.on_attempt(at(now), failed(error::connection_lost)); break;
                default: a = m.on_attempt(at(now), failed(error::not_connected)); break;
                }
            }
        }
        REQUIRE(a.what == step::done);
        CHECK(a.ec);
        CHECK_FALSE(a.granted);
        CHECK(now <= t0 + deadline_after + 1ms);
    }
}

TEST_CASE("acquire_fsm: the queue wait is capped by the caller's wait too", "[acquire_fsm]") {
    acquire_fsm m(waiting_for(100ms));
    auto f = at(t0);
    f.expiry_hint = t0 + 20s;  // the holder's lease, as a local waiter saw it
    f.local_waiters = 1;
    auto a = m.start(f);
    REQUIRE(a.what == step::wait);
    CHECK(a.join_queue);
    CHECK(a.until == t0 + 100ms);
}

TEST_CASE("acquire_fsm: which failures give the level back", "[acquire_fsm]") {
    // The script may have run when no answer came (timeout, connection lost)
    // or when the operation was torn down with it in flight.
    for (auto ec : {error_code(error::timeout), error_code(error::connection_lost),
                    error_code(error::client_stopped),
                    error_code(boost::asio::error::operation_aborted),
                    error_code(error::protocol_error), error_code(error::reply_too_large),
                    error_code(error::nesting_too_deep)}) {
        acquire_fsm m(waiting_for(0ms));
        m.start(at(t0));
        auto a = m.on_attempt(at(t0), failed(ec));
        CHECK(a.what == step::done);
        CHECK(a.give_back);
        CHECK(a.ec == ec);
    }
    // The script never ran, or ran and answered.
    for (auto ec : {error_code(error::not_connected), error_code(error::wrong_type),
                    error_code(error::server_error), error_code(error::unexpected_reply)}) {
        acquire_fsm m(waiting_for(0ms));
        m.start(at(t0));
        auto a = m.on_attempt(at(t0), failed(ec));
        CHECK(a.what == step::done);
        CHECK_FALSE(a.give_back);
    }
    SECTION("after cancellation too: a level the server may hold is never left behind") {
        const auto a = reply_after_cancel(failed(error::connection_lost));
        CHECK(a.what == step::done);
        CHECK(a.give_back);
        CHECK_FALSE(a.fresh_level);
    }
}

TEST_CASE("acquire_fsm: a grant after cancellation while queued passes the wake-up on",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    start_queued(m);  // the second attempt is in flight, queued
    m.cancel();
    auto a = m.on_attempt(at(t0 + 1ms), granted());
    CHECK(a.what == step::done);
    CHECK(a.give_back);
    CHECK_FALSE(a.granted);  // so the shell leaves the queue as a loser
    CHECK(a.leave_queue);
}

TEST_CASE("acquire_fsm: a transient failure while queued keeps the place in the queue",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    start_queued(m);
    auto a = m.on_attempt(at(t0 + 1ms), failed(error::connection_lost));
    REQUIRE(a.what == step::wait);
    CHECK_FALSE(a.join_queue);
    CHECK(a.fresh_level);
    CHECK(a.rearm);
    a = m.on_wait(at(t0 + 21ms));
    REQUIRE(a.what == step::attempt);
    CHECK_FALSE(a.rearm);
    CHECK_FALSE(a.join_queue);

    SECTION("cancelled during the retry wait: it leaves without re-arming") {
        acquire_fsm c(waiting_for(5s));
        start_queued(c);
        REQUIRE(c.on_attempt(at(t0 + 1ms), failed(error::timeout)).what == step::wait);
        c.cancel();
        auto b = c.on_wait(at(t0 + 2ms));
        CHECK(b.what == step::done);
        CHECK(b.leave_queue);
        CHECK_FALSE(b.rearm);
        CHECK_FALSE(b.give_back);  // given back already, with the failure
    }
}

TEST_CASE("acquire_fsm: a handle that came to hold the lock during the yield does not queue",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    auto f = at(t0);
    f.yield_until = t0 + 2ms;
    REQUIRE(m.start(f).what == step::wait);
    auto g = at(t0 + 2ms);
    g.holds_lock = true;  // another coroutine on this handle got it meanwhile
    g.expiry_hint = t0 + 1s;
    g.local_waiters = 3;
    auto a = m.on_wait(g);
    CHECK(a.what == step::attempt);
    CHECK_FALSE(a.join_queue);
}

TEST_CASE("acquire_fsm: a resume that does not fit the step fails closed", "[acquire_fsm]") {
    SECTION("a wait's end while an attempt is in flight") {
        acquire_fsm m(waiting_for(5s));
        REQUIRE(m.start(at(t0)).what == step::attempt);
        auto a = m.on_wait(at(t0));
        CHECK(a.what == step::done);
        CHECK(a.ec);
        CHECK_FALSE(a.granted);
    }
    SECTION("a grant while waiting") {
        acquire_fsm m(waiting_for(5s));
        start_queued(m);
        REQUIRE(m.on_attempt(at(t0), refused(500)).what == step::wait);
        auto a = m.on_attempt(at(t0), granted());
        CHECK(a.what == step::done);
        CHECK(a.ec);
        CHECK_FALSE(a.granted);
        CHECK(a.leave_queue);
    }
    SECTION("anything after the end") {
        acquire_fsm m(waiting_for(5s));
        m.start(at(t0));
        REQUIRE(m.on_attempt(at(t0), granted()).granted);
        auto a = m.on_attempt(at(t0), granted());
        CHECK(a.what == step::done);
        CHECK(a.ec);
        CHECK_FALSE(a.granted);
        CHECK(m.start(at(t0)).ec);
    }
}

TEST_CASE("acquire_fsm: a grant that crossed a lost tenure is given back and tried again, fresh",
          "[acquire_fsm]") {
    acquire_fsm::attempt_result crossed{{}, true, -2, true};
    SECTION("within the wait: give back, fresh level, attempt at once") {
        acquire_fsm m(waiting_for(5s));
        REQUIRE(m.start(at(t0)).what == step::attempt);
        auto a = m.on_attempt(at(t0 + 1ms), crossed);
        CHECK(a.what == step::attempt);
        CHECK(a.give_back);
        CHECK(a.fresh_level);
        CHECK_FALSE(a.granted);
        // The fresh attempt's grant is handed out.
        a = m.on_attempt(at(t0 + 2ms), granted());
        CHECK(a.what == step::done);
        CHECK(a.granted);
    }
    SECTION("a try, or an acquire without a wait, retries once, then fails with lock_lost") {
        acquire_fsm::settings s = waiting_for(0ms);
        s.try_once = true;
        acquire_fsm m(s);
        REQUIRE(m.start(at(t0)).what == step::attempt);
        auto a = m.on_attempt(at(t0 + 1ms), crossed);
        REQUIRE(a.what == step::attempt);
        a = m.on_attempt(at(t0 + 2ms), crossed);
        CHECK(a.what == step::done);
        CHECK(a.give_back);
        CHECK_FALSE(a.granted);
        CHECK(a.ec == error::lock_lost);
    }
    SECTION("bounded: at most max_crossed_retries, however long the wait") {
        acquire_fsm m(waiting_for(60s));
        REQUIRE(m.start(at(t0)).what == step::attempt);
        int attempts = 1;
        acquire_fsm::action a;
        for (int i = 0; i < 10; ++i) {
            a = m.on_attempt(at(t0 + 1ms), crossed);
            if (a.what != step::attempt) break;
            ++attempts;
        }
        CHECK(attempts == 1 + acquire_fsm::max_crossed_retries);
        CHECK(a.ec == error::lock_lost);
    }
    SECTION("after cancellation it is only given back") {
        auto a = reply_after_cancel(crossed);
        CHECK(a.what == step::done);
        CHECK(a.give_back);
        CHECK_FALSE(a.granted);
    }
}

TEST_CASE("acquire_fsm: a woken waiter cancelled during its retry leaves without re-arming",
          "[acquire_fsm]") {
    // Still marked woken when it leaves: the service passes the wake-up on.
    acquire_fsm m(waiting_for(5s));
    start_queued(m);
    REQUIRE(m.on_attempt(at(t0 + 1ms), refused(5000)).what == step::wait);
    auto a = m.on_wait(at(t0 + 10ms));  // woken
    REQUIRE(a.what == step::attempt);
    CHECK_FALSE(a.rearm);
    m.cancel();
    a = m.on_attempt(at(t0 + 11ms), refused(4000));
    CHECK(a.what == step::done);
    CHECK(a.leave_queue);
    CHECK_FALSE(a.rearm);
    CHECK_FALSE(a.granted);
}

TEST_CASE("acquire_fsm: contended() says whether the operation waited for another owner",
          "[acquire_fsm][metrics]") {
    SECTION("granted at once: not contended") {
        acquire_fsm m(waiting_for(5s));
        m.start(at(t0));
        const auto a = m.on_attempt(at(t0 + 1ms), granted());
        CHECK(a.granted);
        CHECK_FALSE(m.contended());
    }
    SECTION("refused, then granted: contended") {
        acquire_fsm m(waiting_for(5s));
        start_queued(m);
        CHECK(m.contended());
        CHECK(m.on_attempt(at(t0 + 1ms), granted()).granted);
        CHECK(m.contended());
    }
    SECTION("queued behind this process's waiters: contended before any attempt") {
        acquire_fsm m(waiting_for(5s));
        auto f = at(t0);
        f.expiry_hint = t0 + 400ms;
        f.local_waiters = 1;
        REQUIRE(m.start(f).join_queue);
        CHECK(m.contended());
    }
    SECTION("yielding to other processes' waiters: contended") {
        acquire_fsm m(waiting_for(5s));
        auto f = at(t0);
        f.yield_until = t0 + 2ms;
        REQUIRE(m.start(f).what == step::wait);
        CHECK(m.contended());
    }
    SECTION("a retry after a lost connection: not contended") {
        acquire_fsm m(waiting_for(5s));
        m.start(at(t0));
        REQUIRE(m.on_attempt(at(t0), failed(error::connection_lost)).what == step::wait);
        REQUIRE(m.on_wait(at(t0 + 20ms)).what == step::attempt);
        CHECK(m.on_attempt(at(t0 + 21ms), granted()).granted);
        CHECK_FALSE(m.contended());
    }
}

TEST_CASE("acquire_fsm: a handoff while waiting grants without another attempt",
          "[acquire_fsm]") {
    acquire_fsm m(waiting_for(5s));
    start_queued(m);
    REQUIRE(m.on_attempt(at(t0 + 1ms), refused(800)).what == step::wait);
    const auto a = m.on_handoff(at(t0 + 2ms));
    CHECK(a.what == step::done);
    CHECK(a.granted);
    CHECK_FALSE(a.give_back);
    CHECK(a.leave_queue);
    CHECK(m.contended());

    // Cancelled meanwhile: the handed-off level goes back.
    acquire_fsm c(waiting_for(5s));
    start_queued(c);
    REQUIRE(c.on_attempt(at(t0 + 1ms), refused(800)).what == step::wait);
    c.cancel();
    const auto back = c.on_handoff(at(t0 + 2ms));
    CHECK(back.what == step::done);
    CHECK_FALSE(back.granted);
    CHECK(back.give_back);

    // With an attempt in flight it is not the machine's to take.
    acquire_fsm f(waiting_for(5s));
    start_queued(f);
    const auto misfit = f.on_handoff(at(t0 + 1ms));
    CHECK(misfit.what == step::done);
    CHECK_FALSE(misfit.granted);
    CHECK(misfit.ec);
}
