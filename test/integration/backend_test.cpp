// corolock::backend: a lock backend opened by URL, and a Redis client seen
// as one. What the URL entry point and the handle's ownership promise
// (include/corolock/backend.hpp); the lock itself is the conformance suite's.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include "redis/connection/client_impl.hpp"
#include "redis/lock/redis_backend.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;
}  // namespace

TEST_CASE("backend: a redis:// URL opens a Redis backend whose locks exclude a client's",
          "[backend][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::backend locks(ioc.get_executor(), client_url(server));
    CHECK(locks.scheme() == "redis");
    corolock::client c(ioc.get_executor(), client_url(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex by_url(locks, "backend-test");
        corolock::mutex by_client(c, "backend-test");
        auto g = co_await by_url.acquire({.lease = 5s});
        CHECK(g.token() > 0);
        // The same name through the client is another owner: held.
        auto other = co_await by_client.try_acquire({.lease = 5s});
        CHECK_FALSE(other.has_value());
        const auto released = co_await g.release();
        CHECK(released == error_code{});
        auto after = co_await by_client.try_acquire({.lease = 5s});
        REQUIRE(after.has_value());
        CHECK(after->token() > g.token());
        const auto released_after = co_await after->release();
        CHECK(released_after == error_code{});
    });
    CHECK(locks.metrics().acquisitions == 1);
}

TEST_CASE("backend: a redis:// backend records backend_config's holder label",
          "[backend][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::backend_config cfg;
    cfg.holder_label = "by url";
    corolock::backend locks(ioc.get_executor(), client_url(server), cfg);
    corolock::client c(ioc.get_executor(), client_url(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(locks, "backend-label");
        auto g = co_await m.acquire({.lease = 5s});
        auto [ec, st] = co_await corolock::async_lock_status(c, "backend-label", use_nothrow);
        REQUIRE(ec == error_code{});
        REQUIRE(st.holder.has_value());
        CHECK(st.holder->label == "by url");
        const auto released = co_await g.release();
        CHECK(released == error_code{});
    });
}

TEST_CASE("backend: a Redis backend keeps the lock-only reply limits unless they are set",
          "[backend][integration]") {
    // A backend only takes locks: a server must not make it hold the 64 MiB
    // per reply a general client allows (docs/security.md).
    redis_server server;
    asio::io_context ioc;
    auto limits_of = [](const corolock::backend& b) {
        auto& redis = dynamic_cast<corolock::detail::redis_backend&>(*corolock::detail::backend_access::impl(b));
        return redis.client().cfg();
    };
    const corolock::config lock_only = corolock::config{}.use_lock_only_limits();
    {
        corolock::backend by_url(ioc.get_executor(), client_url(server));
        const auto cfg = limits_of(by_url);
        CHECK(cfg.max_reply_size == lock_only.max_reply_size);
        CHECK(cfg.max_bulk_length == lock_only.max_bulk_length);
        CHECK(cfg.max_aggregate_size == lock_only.max_aggregate_size);
        CHECK(cfg.max_nesting_depth == lock_only.max_nesting_depth);
    }
    {
        auto set = corolock::config::from_url(client_url(server));
        set.max_reply_size = 8u * 1024 * 1024;
        corolock::backend by_config(ioc.get_executor(), set);
        const auto cfg = limits_of(by_config);
        CHECK(cfg.max_reply_size == 8u * 1024 * 1024);  // set: kept
        CHECK(cfg.max_bulk_length == lock_only.max_bulk_length);
    }
    // A client keeps the general defaults: it may read large values.
    corolock::client c(ioc.get_executor(), client_url(server));
    CHECK(c.get_config().max_reply_size == corolock::config_defaults::max_reply_size);
    c.stop();
}

TEST_CASE("backend: a client's backend handle shares the client and does not stop it",
          "[backend][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), client_url(server));
    {
        auto view = c.lock_backend();
        CHECK(view.scheme() == "redis");
    }  // a view going away leaves the client running
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c.lock_backend(), "backend-view");
        auto g = co_await m.acquire({.lease = 5s});
        const auto released = co_await g.release();
        CHECK(released == error_code{});
    });
    CHECK(c.metrics().acquisitions == 1);
}

TEST_CASE("backend: the owning handle stops its backend, acquires then fail, never hang",
          "[backend][integration]") {
    redis_server server;
    asio::io_context ioc;
    auto locks = std::make_unique<corolock::backend>(ioc.get_executor(), client_url(server));
    corolock::mutex m(*locks, "backend-stop");
    locks.reset();  // stops the backend; the mutex still refers to it
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 2s}, use_nothrow);
        CHECK(ec == error::client_stopped);
        CHECK_FALSE(g.owns_lock());
    });
}

TEST_CASE("backend: a URL of no known scheme is invalid_url with the reason",
          "[backend][integration]") {
    asio::io_context ioc;
    for (const std::string url : {"memcached://127.0.0.1:11211", "127.0.0.1:6379"}) {
        INFO(url);
        try {
            corolock::backend b(ioc.get_executor(), url);
            FAIL("no exception");
        } catch (const boost::system::system_error& e) {
            CHECK(e.code() == error::invalid_url);
            CHECK(std::string(e.what()).find("scheme") != std::string::npos);
        }
    }
    CHECK_THROWS_AS(corolock::backend(ioc.get_executor(), ""), boost::system::system_error);
}
