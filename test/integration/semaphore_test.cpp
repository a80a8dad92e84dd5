// corolock::semaphore against a live redis-server: N holders at once, a
// waiter woken by a release (not by its wait cap), a crashed holder's
// permits back at its lease end, renewal, cancellation, the lost signal and
// bad input.
#include <corolock/corolock.hpp>
#include "redis/lock/lock_service.hpp"
#include "redis/lock/semaphore_scripts.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using corolock::semaphore;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;

}  // namespace

TEST_CASE("semaphore: N holders at once; the next waits and a release wakes it",
          "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        // Long leases: a waiter woken only by its wait cap would take 30 s.
        const corolock::lock_options opts{.lease = 30s};
        std::vector<semaphore> handles;
        std::vector<guard> held;
        for (int i = 0; i < 4; ++i) handles.emplace_back(c, "sem:n", 3);
        for (int i = 0; i < 3; ++i) {
            auto g = co_await handles[static_cast<std::size_t>(i)].try_acquire(1, opts);
            REQUIRE(g);
            held.push_back(std::move(*g));
        }
        CHECK(held[0].token() < held[1].token());
        CHECK(held[1].token() < held[2].token());
        auto full = co_await handles[3].try_acquire(1, opts);
        CHECK_FALSE(full);

        std::optional<error_code> result;
        guard fourth;
        handles[3].async_acquire(1, opts, [&](error_code ec, guard g) {
            result = ec;
            fourth = std::move(g);
        });
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
        REQUIRE(waiting);
        CHECK_FALSE(result);
        const auto released = co_await held[1].release();
        CHECK_FALSE(released);
        const bool woken = co_await eventually([&] { return result.has_value(); }, 10s);
        REQUIRE(woken);
        CHECK_FALSE(*result);
        CHECK(fourth.token() > held[2].token());
        CHECK(handles[3].held_grants() == 1);
    });
}

TEST_CASE("semaphore: a release of k permits wakes every local waiter that fits",
          "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        const corolock::lock_options opts{.lease = 30s, .wait = 15s};
        semaphore a(c, "sem:fit", 3), b(c, "sem:fit", 3), d(c, "sem:fit", 3);
        auto all = co_await a.acquire(3, opts);
        int done = 0;
        guard gb, gd;
        b.async_acquire(2, opts, [&](error_code ec, guard g) {
            CHECK_FALSE(ec);
            gb = std::move(g);
            ++done;
        });
        d.async_acquire(1, opts, [&](error_code ec, guard g) {
            CHECK_FALSE(ec);
            gd = std::move(g);
            ++done;
        });
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 2; }, 5s);
        REQUIRE(waiting);
        co_await all.release();
        const bool both = co_await eventually([&] { return done == 2; }, 10s);
        CHECK(both);
    });
}

// Not fair, in one process as across processes (docs/safety.md, "The
// semaphore"): a request that fits is granted at once, even while a local
// waiter needs more permits than are free; it does not queue behind it.
TEST_CASE("semaphore: a request that fits passes a local waiter that needs more",
          "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        const corolock::lock_options opts{.lease = 30s, .wait = 15s};
        semaphore holder(c, "sem:pass", 4), big(c, "sem:pass", 4), small(c, "sem:pass", 4);
        auto two = co_await holder.acquire(2, opts);
        bool big_done = false;
        guard gbig;
        big.async_acquire(3, opts, [&](error_code ec, guard g) {
            CHECK_FALSE(ec);
            gbig = std::move(g);
            big_done = true;
        });
        const auto r1_ = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
        REQUIRE(r1_);
        // Two permits are free: one of them is granted while the holder
        // still holds (bounded: queued behind the waiter, it would wait for
        // the holder's release, which comes only after).
        asio::steady_timer bound(co_await asio::this_coro::executor, 10s);
        auto r = co_await (small.async_acquire(1, opts, use_nothrow) ||
                           bound.async_wait(use_nothrow));
        REQUIRE(r.index() == 0);
        auto& [ec, one] = std::get<0>(r);
        REQUIRE_FALSE(ec);
        CHECK_FALSE(big_done);
        // The holder's two come back: three are free, the waiter gets them.
        const auto r2_ = co_await two.release();
        CHECK_FALSE(r2_);
        const auto r3_ = co_await eventually([&] { return big_done; }, 10s);
        CHECK(r3_);
        const auto r4_ = co_await one.release();
        CHECK_FALSE(r4_);
        if (big_done) {
            const auto r5_ = co_await gbig.release();
            CHECK_FALSE(r5_);
        }
    });
}

TEST_CASE("semaphore: a crashed holder's permits come back at its lease end",
          "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server& server) -> asio::awaitable<void> {
        // A holder that took both permits with a 300 ms lease and died: its
        // grant, written by the script itself, is never renewed or released.
        const std::string key = lock_key("sem:crash");
        const auto r = server.cmd({"EVAL", std::string(corolock::detail::semaphore_acquire_script().source),
                                   "3", key, key + ":leases", key + ":fence", "dead-owner", "300", "1",
                                   "2", "2", "x"});
        REQUIRE(r.at(0) == "1");
        semaphore s(c, "sem:crash", 2);
        auto busy = co_await s.try_acquire(1);
        CHECK_FALSE(busy);
        // No release is ever published: only the wait cap ends this wait.
        auto [ec, g] = co_await s.async_acquire(2, {.lease = 5s, .wait = 10s}, use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(g.token() > std::stoull(r.at(1)));
        CHECK(server.cmd1({"HEXISTS", key, "g:dead-owner"}) == "0");
        CHECK(server.cmd1({"ZSCORE", key + ":leases", "dead-owner"}).empty());
    });
}

TEST_CASE("semaphore: the watchdog keeps the permits past the lease",
          "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        semaphore s(c, "sem:renew", 2), other(c, "sem:renew", 2);
        auto g1 = co_await s.acquire(1, {.lease = 300ms});
        auto g2 = co_await s.acquire(1, {.lease = 300ms});
        co_await sleep_for(900ms);  // three leases
        auto none = co_await other.try_acquire(1);
        CHECK_FALSE(none);
        CHECK(g1.lease_deadline() > std::chrono::steady_clock::now());
        const auto e1 = co_await g1.release();
        CHECK_FALSE(e1);
        auto one = co_await other.try_acquire(1);
        CHECK(one);
        const auto e2 = co_await g2.release();
        CHECK_FALSE(e2);
    });
}

TEST_CASE("semaphore: a cancelled wait leaks no permit", "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server& server) -> asio::awaitable<void> {
        semaphore holder(c, "sem:cancel", 1), waiter(c, "sem:cancel", 1), third(c, "sem:cancel", 1);
        auto held = co_await holder.acquire(1, {.lease = 30s});
        asio::cancellation_signal signal;
        std::optional<error_code> result;
        waiter.async_acquire(1, {.lease = 30s},
                             asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, guard) {
                                 result = ec;
                             }));
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
        REQUIRE(waiting);
        signal.emit(asio::cancellation_type::terminal);
        const bool ended = co_await eventually([&] { return result.has_value(); }, 5s);
        REQUIRE(ended);
        CHECK(*result == asio::error::operation_aborted);
        co_await held.release();
        // The permit is free for anyone: the cancelled waiter holds nothing.
        auto g = co_await third.try_acquire(1, {.lease = 30s});
        CHECK(g);
        CHECK(waiter.held_grants() == 0);
        CHECK(local_waiters(c) == 0);
        CHECK(server.cmd1({"HEXISTS", lock_key("sem:cancel"), "g:" + waiter.owner_id()}) == "0");
    });
}

TEST_CASE("semaphore: deleting the key behind a holder fires its lost signal",
          "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server& server) -> asio::awaitable<void> {
        semaphore s(c, "sem:lost", 2);
        auto g = co_await s.acquire(1, {.lease = 300ms});
        server.cmd({"DEL", lock_key("sem:lost")});
        auto result = co_await (g.until_lost() || sleep_for(5s));
        CHECK(result.index() == 0);
        const auto ec = co_await g.release();
        CHECK(ec);
    });
}

TEST_CASE("semaphore: bad permits, capacities and kinds are refused", "[semaphore][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        CHECK_THROWS_AS(semaphore(c, "sem:bad", 0), boost::system::system_error);
        CHECK_THROWS_AS(semaphore(c, "sem:bad", corolock::max_semaphore_capacity + 1),
                        boost::system::system_error);
        semaphore s(c, "sem:bad", 3);
        auto [e0, g0] = co_await s.async_acquire(0, {}, use_nothrow);
        CHECK(e0 == error::invalid_argument);
        auto [e4, g4] = co_await s.async_acquire(4, {}, use_nothrow);
        CHECK(e4 == error::invalid_argument);
        // A mutex and a semaphore on one name refuse each other.
        corolock::mutex m(c, "sem:bad");
        auto held = co_await s.acquire(1, {.lease = 30s});
        auto [em, gm] = co_await m.async_try_acquire({}, use_nothrow);
        CHECK(em == error::wrong_type);
        co_await held.release();
        auto mg = co_await m.acquire();
        auto [es, gs] = co_await s.async_try_acquire(1, {}, use_nothrow);
        CHECK(es == error::wrong_type);
        co_await mg.release();
    });
}
