// RedLock (docs/redlock.md) against 3 and 5 live redis-servers: a majority
// grants, a second owner is refused, a release frees every node, three
// nodes down of five fail the acquire with nothing left behind, and kinds
// other than the mutex are refused; a re-entry asks no server; a later
// holder's token can be smaller (no fencing); a redlock:// URL opens it.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"
#include "support/redlock_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;
using clock_type = std::chrono::steady_clock;
}  // namespace

TEST_CASE("redlock: a majority grants - a second owner is refused - release frees all",
          "[redlock][integration]") {
    const std::size_t n = GENERATE(3, 5);
    redlock_fleet f(n);
    asio::io_context ioc;
    auto locks = corolock::backend::redlock(ioc.get_executor(), f.urls());
    CHECK(locks.scheme() == "redlock");
    corolock::mutex a(locks, "rl:basic"), b(locks, "rl:basic");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, g] = co_await a.async_acquire({.lease = 5s}, use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(g.owns_lock());
        CHECK(g.token() > 0);
        CHECK(f.holding("rl:basic") == static_cast<int>(n));
        const auto left = g.lease_deadline() - std::chrono::steady_clock::now();
        CHECK(left > 4s);
        CHECK(left < 5s);

        auto [ec2, g2] = co_await b.async_try_acquire({.lease = 5s}, use_nothrow);
        CHECK(ec2 == error::lock_held);
        CHECK(f.holding("rl:basic") == static_cast<int>(n));  // b's refusal took nothing

        auto rel = co_await g.release();
        CHECK_FALSE(rel);
        CHECK(f.holding("rl:basic") == 0);

        auto [ec3, g3] = co_await b.async_try_acquire({.lease = 5s}, use_nothrow);
        CHECK_FALSE(ec3);
        co_await g3.release();
    }, 30s);
}

// Issue 43: a re-entry joined the live tenure without looking at its
// deadline, so while the quorum check's timer had not run yet (a busy or
// frozen process) it could hand out a guard whose deadline had passed. The
// io thread is blocked past the deadline here (the frozen process), so the
// re-entry runs before that timer.
TEST_CASE("redlock: a re-entry after the tenure's deadline never returns an expired guard",
          "[redlock][integration]") {
    redlock_fleet f(3);
    asio::io_context ioc;
    auto locks = corolock::backend::redlock(ioc.get_executor(), f.urls());
    corolock::mutex a(locks, "rl:late-reentry");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto g = co_await a.acquire({.lease = 600ms, .watchdog = false});
        std::this_thread::sleep_for(g.lease_deadline() - clock_type::now() + 50ms);
        auto [ec, g2] = co_await a.async_acquire({.lease = 2s, .wait = 5s, .watchdog = false},
                                                 use_nothrow);
        const auto now = clock_type::now();
        CHECK(g.lost());  // the first tenure ended at its deadline
        REQUIRE_FALSE(ec);
        CHECK(g2.lease_deadline() > now);
        CHECK_FALSE(g2.lost());
        co_await g2.release();
    }, 30s);
}

TEST_CASE("redlock: a waiter is woken by the holder's release, not by polling",
          "[redlock][integration]") {
    // docs/redlock.md, "Waiting": refused, the waiter subscribes on every
    // node and tries once more at once (rounds 1 and 2), then waits for an
    // unlock message; the release 1.5 s later starts its third round.
    // Polling every 50-250 ms would take about ten rounds; a wait that only
    // ends at the holder's TTL (10 s) would outlast the bound below.
    redlock_case c(3, "rl:wait");
    auto& [f, ioc, locks, a, b] = c;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, g] = co_await a.async_acquire({.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(ec);
        const auto before = locks.metrics();
        clock_type::time_point released{};
        asio::steady_timer t(ioc, 1500ms);
        t.async_wait([&](corolock::error_code) {
            released = clock_type::now();
            g.async_release([](corolock::error_code) {});
        });
        auto [ec2, g2] = co_await b.async_acquire({.lease = 10s, .wait = 8s}, use_nothrow);
        const auto granted = clock_type::now();
        REQUIRE_FALSE(ec2);
        const auto m = locks.metrics();
        CHECK(m.redlock_rounds - before.redlock_rounds == 3);
        CHECK(m.redlock_rounds_failed - before.redlock_rounds_failed == 2);
        // Granted in a round that an unlock message started.
        CHECK(m.handoff.count() - before.handoff.count() == 1);
        CHECK(m.contended_acquisitions - before.contended_acquisitions == 1);
        CHECK(granted - released < 1s);  // a message, a jitter of at most 5 ms, a round
        CHECK(f.holding("rl:wait") >= 2);
        co_await g2.release();
    }, 30s);
}

TEST_CASE("redlock: with no release published, a waiter's wait ends at the holder's expiry",
          "[redlock][integration]") {
    // A holder gone without a word (its keys written here, as another
    // process's): nothing is published when they expire. The waiter's wait
    // is bounded by the expiry its refusals saw (the keys' PTTL), not by its
    // own wait (8 s): rounds 1 and 2 refused, round 3 after the expiry.
    redlock_case c(3, "rl:expiry");
    auto& [f, ioc, locks, a, b] = c;
    for (auto& s : f.servers) {
        s->cmd1({"HSET", lock_key("rl:expiry"), "owner", "someone-gone", "l:1", "1"});
        s->cmd1({"PEXPIRE", lock_key("rl:expiry"), "1500"});
    }
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const auto t0 = clock_type::now();
        auto [ec, g] = co_await b.async_acquire({.lease = 5s, .wait = 8s}, use_nothrow);
        const auto took = clock_type::now() - t0;
        REQUIRE_FALSE(ec);
        CHECK(took >= 1400ms);
        CHECK(took < 4s);
        const auto m = locks.metrics();
        CHECK(m.redlock_rounds == 3);
        CHECK(m.handoff.count() == 0);  // no message woke it
        co_await g.release();
    }, 30s);
}

TEST_CASE("redlock: three of five nodes down, the acquire fails and leaves nothing",
          "[redlock][integration]") {
    redlock_fleet f(5);
    for (std::size_t i = 0; i < 3; ++i) f.servers[i]->kill9();
    asio::io_context ioc;
    auto locks = corolock::backend::redlock(ioc.get_executor(), f.urls());
    corolock::mutex a(locks, "rl:minority");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, g] = co_await a.async_acquire({.lease = 5s, .wait = 1s}, use_nothrow);
        CHECK(ec == error::wait_timeout);
        CHECK_FALSE(g.owns_lock());
        auto [dec] = co_await locks.async_drain(5s, use_nothrow);
        CHECK_FALSE(dec);
        CHECK(f.holding("rl:minority") == 0);  // the two live nodes were given back
    }, 30s);
}

TEST_CASE("redlock: only the mutex kind", "[redlock][integration]") {
    redlock_fleet f(3);
    asio::io_context ioc;
    auto locks = corolock::backend::redlock(ioc.get_executor(), f.urls());
    CHECK_THROWS_AS(corolock::shared_mutex(locks, "rl:kind"), boost::system::system_error);
    CHECK_THROWS_AS(corolock::backend::redlock(ioc.get_executor(), {}),
                    boost::system::system_error);
}

TEST_CASE("redlock: after stop() nothing is left running, however many holds came before",
          "[redlock][integration]") {
    // Each hold waits for every node guard's lost signal; a release does not
    // end those waits (guard.hpp), so the tenure's end cancels them. Left
    // pending they would pile up per hold and keep the io_context running
    // after stop().
    redlock_case c(3, "rl:stop");
    auto& [f, ioc, locks, a, b] = c;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 3; ++i) {
            auto [ec, g] = co_await a.async_acquire({.lease = 5s}, use_nothrow);
            REQUIRE_FALSE(ec);
            co_await g.release();
        }
    }, 30s);
    locks.stop();
    ioc.restart();
    ioc.run_for(5s);
    CHECK(ioc.stopped());  // ran out of work by itself
}

TEST_CASE("redlock: a re-entry joins the tenure without a round, with its token",
          "[redlock][integration]") {
    redlock_case c(3, "rl:reenter");
    run_async(c.ioc, [&]() -> asio::awaitable<void> {
        auto g1 = co_await c.a.acquire({.lease = 5s});
        const auto rounds = c.locks.metrics().redlock_rounds;
        std::vector<std::string> fields;  // per node: the hash's field count
        for (const auto& s : c.f.servers) fields.push_back(s->cmd1({"HLEN", lock_key("rl:reenter")}));
        auto g2 = co_await c.a.acquire({.lease = 5s});
        CHECK(c.locks.metrics().redlock_rounds == rounds);  // no server was asked
        CHECK(c.a.held_levels() == 2);
        CHECK(g2.token() == g1.token());
        for (std::size_t i = 0; i < c.f.servers.size(); ++i)  // no level added on a node
            CHECK(c.f.servers[i]->cmd1({"HLEN", lock_key("rl:reenter")}) == fields[i]);
        {
            const auto ec = co_await g1.release();
            CHECK_FALSE(ec);
        }
        CHECK(c.f.holding("rl:reenter") == 3);  // the tenure lasts until its last level
        {
            const auto ec = co_await g2.release();
            CHECK_FALSE(ec);
        }
        CHECK(c.f.holding("rl:reenter") == 0);
    }, 30s);
}

TEST_CASE("redlock: tokens are no fencing tokens, the next holder's may be smaller",
          "[redlock][integration]") {
    // docs/redlock.md, "Tokens": node 1's counter runs ahead (a fast clock),
    // the first holder's majority includes it, the next one's does not.
    redlock_case c(3, "rl:fence");
    const std::string fence = lock_key("rl:fence") + ":fence";
    REQUIRE(c.f.servers[0]->cmd1({"SET", fence, "9000000000000000"}) == "OK");
    run_async(c.ioc, [&]() -> asio::awaitable<void> {
        auto g1 = co_await c.a.acquire({.lease = 5s});
        CHECK(g1.token() > 9000000000000000ULL);
        {
            const auto ec = co_await g1.release();
            CHECK_FALSE(ec);
        }
        c.f.servers[0]->kill9();
        auto g2 = co_await c.b.acquire({.lease = 5s, .wait = 5s});
        CHECK(g2.token() < g1.token());  // a later holder, a smaller token
        {
            const auto ec = co_await g2.release();
            CHECK_FALSE(ec);
        }
    }, 30s);
}

TEST_CASE("redlock: opened by a redlock:// URL, every host a node", "[redlock][integration]") {
    redlock_fleet f(3);
    asio::io_context ioc;
    std::string url = "redlock://";
    for (const auto& s : f.servers)
        url += (url.size() > 10 ? "," : "") + std::string("127.0.0.1:") + std::to_string(s->port());
    corolock::backend locks(ioc.get_executor(), url + "?node_timeout_ms=150");
    CHECK(locks.scheme() == "redlock");
    corolock::mutex a(locks, "rl:url");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto g = co_await a.acquire({.lease = 5s});
        CHECK(f.holding("rl:url") == 3);
        {
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
        }
        CHECK(f.holding("rl:url") == 0);
    }, 30s);
}
