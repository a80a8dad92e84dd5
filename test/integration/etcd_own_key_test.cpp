// The etcd backend when a handle's own key already exists: another acquire
// of the same handle holds it in line (or a lost tenure's key waits for its
// lease to be revoked). A try answers lock_held after one request, a wait
// ends at its bound with wait_timeout, and every acquire completes; once the
// sibling is granted, an acquire of the handle joins it as a re-entry.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_server.hpp"
#include "support/lock_testing.hpp"  // eventually()

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <tuple>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using corolock::error;
using corolock::error_code;
using corolock::guard;

TEST_CASE("etcd: an acquire that finds its handle's key in line answers by its own try and wait",
          "[etcd][integration]") {
    auto server = start_lock_server("etcd");
    REQUIRE(server);
    asio::io_context ioc;
    corolock::backend holder_side(ioc.get_executor(), server->url());
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        corolock::mutex holder(holder_side, "own-key"), m(b, "own-key");
        auto h = co_await holder.acquire({.lease = 5s, .wait = 10s});

        // The handle's first acquire waits in line, its key behind the holder's.
        std::optional<std::tuple<error_code, guard>> first;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            first = co_await m.async_acquire({.lease = 5s, .wait = 30s}, use_nothrow);
        }, asio::detached);
        // In line: two keys under the lock's prefix, the holder's and the handle's.
        const auto r1_ = co_await eventually([&] { return server->owners("own-key").size() == 2; }, 10s);
        REQUIRE(r1_);

        // Each answers by its own terms, while the first still waits (a 10 s
        // guard timer each: an acquire that never answers loses to it).
        {
            asio::steady_timer guard_timer(ioc, 10s);
            auto r = co_await (m.async_try_acquire({.lease = 5s}, use_nothrow) ||
                               guard_timer.async_wait(use_nothrow));
            REQUIRE(r.index() == 0);
            CHECK(std::get<0>(std::get<0>(r)) == error::lock_held);
        }
        {
            asio::steady_timer guard_timer(ioc, 10s);
            auto r = co_await (m.async_acquire({.lease = 5s, .wait = 300ms}, use_nothrow) ||
                               guard_timer.async_wait(use_nothrow));
            REQUIRE(r.index() == 0);
            CHECK(std::get<0>(std::get<0>(r)) == error::wait_timeout);
        }
        CHECK_FALSE(first);

        // A waiting acquire of the handle ends once the first is granted: it
        // joins the tenure as a re-entry (a level, a larger token).
        std::optional<std::tuple<error_code, guard>> second;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            second = co_await m.async_acquire({.lease = 5s, .wait = 20s}, use_nothrow);
        }, asio::detached);
        const auto r2_ = co_await h.release();
        CHECK_FALSE(r2_);
        const auto r3_ = co_await eventually([&] { return first && second; }, 15s);
        REQUIRE(r3_);
        auto& [ec1, g1] = *first;
        auto& [ec2, g2] = *second;
        INFO(ec1.message() << " / " << ec2.message());
        REQUIRE_FALSE(ec1);
        REQUIRE_FALSE(ec2);
        CHECK(m.held_levels() == 2);
        CHECK(g2.token() > g1.token());
        const auto r4_ = co_await g2.release();
        CHECK_FALSE(r4_);
        const auto r5_ = co_await g1.release();
        CHECK_FALSE(r5_);
        holder_side.stop();
        b.stop();
    }, 60s);
}
