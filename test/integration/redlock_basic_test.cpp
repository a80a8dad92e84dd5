// RedLock (docs/redlock.md) against 3 and 5 live redis-servers: a majority
// grants, a second owner is refused, a release frees every node, three
// nodes down of five fail the acquire with nothing left behind, and kinds
// other than the mutex are refused.
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
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using namespace corolock::test;

namespace {
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
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

TEST_CASE("redlock: a waiter gets the lock when the holder releases", "[redlock][integration]") {
    redlock_case c(3, "rl:wait");
    auto& [f, ioc, locks, a, b] = c;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, g] = co_await a.async_acquire({.lease = 5s}, use_nothrow);
        REQUIRE_FALSE(ec);
        asio::steady_timer t(ioc, 300ms);
        t.async_wait([&](corolock::error_code) { g.async_release([](corolock::error_code) {}); });
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec2, g2] = co_await b.async_acquire({.lease = 5s, .wait = 5s}, use_nothrow);
        CHECK_FALSE(ec2);
        CHECK(std::chrono::steady_clock::now() - t0 >= 250ms);
        CHECK(f.holding("rl:wait") == 3);
        co_await g2.release();
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
