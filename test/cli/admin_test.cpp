// The admin API behind `corolock status` and `corolock break`, against a
// live redis-server: what it reports, what break removes and whom it wakes,
// the owner-checked release, argument checks, and cancellation.
#include <corolock/admin.hpp>
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using corolock::lock_status;
using corolock::test::redis_server;
using corolock::test::run_async;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

corolock::config config_for(const redis_server& server) {
    auto cfg = corolock::config::from_url(server.url());
    cfg.command_timeout = 2s;
    cfg.connect_timeout = 2s;
    return cfg;
}

}  // namespace

TEST_CASE("cli: admin: status of a lock that was never used", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await corolock::async_lock_status(c, "never", use_nothrow);
        CHECK_FALSE(ec);
        CHECK_FALSE(st.held);
        CHECK(st.owner.empty());
        CHECK(st.ttl == 0ms);
        CHECK(st.levels == 0);
        CHECK(st.last_token == 0);
        c.stop();
    });
}

TEST_CASE("cli: admin: status reports owner, levels, ttl and the last token", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "held");
        auto g1 = co_await m.acquire({.lease = 10s});
        auto g2 = co_await m.acquire({.lease = 10s});  // re-entry: a second level
        auto [ec, st] = co_await corolock::async_lock_status(c, "held", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(st.held);
        CHECK(st.owner == m.owner_id());
        CHECK(st.levels == 2);
        CHECK(st.ttl > 0ms);
        CHECK(st.ttl <= 10s);
        CHECK(st.last_token == g2.token());

        co_await g2.release();
        co_await g1.release();
        auto [ec2, after] = co_await corolock::async_lock_status(c, "held", use_nothrow);
        CHECK_FALSE(ec2);
        CHECK_FALSE(after.held);
        CHECK(after.levels == 0);
        CHECK(after.last_token == g2.token());  // the counter outlives the lock
        c.stop();
    });
}

TEST_CASE("cli: admin: a key without expiry reports ttl -1", "[admin]") {
    redis_server server;
    server.cmd({"HSET", "corolock:{manual}", "owner", "someone", "fence", "1", "l:1", "1"});
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await corolock::async_lock_status(c, "manual", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(st.held);
        CHECK(st.owner == "someone");
        CHECK(st.ttl == -1ms);
        CHECK(st.levels == 1);
        c.stop();
    });
}

TEST_CASE("cli: admin: break removes the lock and wakes a waiter at once", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(c, "brk");
        corolock::mutex waiter(c, "brk");
        auto g = co_await holder.acquire({.lease = 30s});

        bool woke = false;
        std::chrono::steady_clock::time_point woke_at;
        std::optional<error_code> released;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto w = co_await waiter.acquire({.lease = 30s, .wait = 10s});
            woke_at = std::chrono::steady_clock::now();
            woke = true;
            released = co_await w.release();
        }, asio::detached);
        asio::steady_timer settle(ioc, 200ms);  // let the waiter subscribe
        co_await settle.async_wait(asio::use_awaitable);
        REQUIRE_FALSE(woke);

        const auto broke_at = std::chrono::steady_clock::now();
        auto [ec, removed] = co_await corolock::async_break_lock(c, "brk", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(removed.held);
        CHECK(removed.owner == holder.owner_id());
        CHECK(removed.levels == 1);

        for (int i = 0; i < 200 && !woke; ++i) {
            asio::steady_timer t(ioc, 10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        REQUIRE(woke);
        CHECK(woke_at - broke_at < 1s);  // the lease had 30 s left

        // Break again once the waiter's release has completed: nothing is
        // left to remove.
        for (int i = 0; i < 200 && !released; ++i) {
            asio::steady_timer t(ioc, 10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        REQUIRE(released);
        CHECK_FALSE(*released);
        auto [ec2, again] = co_await corolock::async_break_lock(c, "brk", use_nothrow);
        INFO("holder " << holder.owner_id() << ", waiter " << waiter.owner_id() << ", found "
                       << again.owner << " with " << again.levels << " levels");
        CHECK_FALSE(ec2);
        CHECK_FALSE(again.held);
        CHECK(again.owner.empty());
        auto [rec] = co_await g.async_release(use_nothrow);
        CHECK(rec == error::expired);
        c.stop();
    });
}

TEST_CASE("cli: admin: release_owner touches only its owner's lock", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "own");
        auto g1 = co_await m.acquire({.lease = 10s});
        auto g2 = co_await m.acquire({.lease = 10s});

        auto [other] = co_await corolock::async_release_owner(c, "own", "somebody-else", use_nothrow);
        CHECK(other == error::not_owner);
        auto [still, st] = co_await corolock::async_lock_status(c, "own", use_nothrow);
        CHECK(st.held);

        auto [mine] = co_await corolock::async_release_owner(c, "own", m.owner_id(), use_nothrow);
        CHECK_FALSE(mine);  // every level at once
        auto [gone_ec, gone] = co_await corolock::async_lock_status(c, "own", use_nothrow);
        CHECK_FALSE(gone.held);

        auto [twice] = co_await corolock::async_release_owner(c, "own", m.owner_id(), use_nothrow);
        CHECK(twice == error::expired);
        auto [empty_owner] = co_await corolock::async_release_owner(c, "own", "", use_nothrow);
        CHECK(empty_owner == error::invalid_argument);
        c.stop();
    });
}

TEST_CASE("cli: admin: bad names, foreign keys, a stopped client", "[admin]") {
    redis_server server;
    server.cmd({"SET", "corolock:{plain}", "x"});
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [e1, s1] = co_await corolock::async_lock_status(c, "a{b", use_nothrow);
        CHECK(e1 == error::invalid_argument);
        auto [e2, s2] = co_await corolock::async_break_lock(c, "", use_nothrow);
        CHECK(e2 == error::invalid_argument);
        auto [e3, s3] = co_await corolock::async_lock_status(c, "plain", use_nothrow);
        CHECK(e3 == error::wrong_type);
        c.stop();
        auto [e4, s4] = co_await corolock::async_lock_status(c, "x", use_nothrow);
        CHECK(e4 == error::client_stopped);
    });
}

TEST_CASE("cli: admin: cancellation right after initiation completes at once", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    // The server is paused, so only cancellation can complete the operation
    // before the command timeout.
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ping_ec, pong] = co_await c.async_exec(corolock::command{"PING"}, use_nothrow);
        REQUIRE_FALSE(ping_ec);
        server.pause();
        asio::cancellation_signal cancel;
        bool done = false;
        error_code result;
        corolock::async_lock_status(
            c, "x", asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, lock_status) {
                result = ec;
                done = true;
            }));
        cancel.emit(asio::cancellation_type::terminal);
        for (int i = 0; i < 100 && !done; ++i) {
            asio::steady_timer t(ioc, 5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        server.resume();
        CHECK(done);
        CHECK(result == asio::error::operation_aborted);
        c.stop();
    });
}

TEST_CASE("cli: admin: works with a plain callback", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bool called = false;
    corolock::async_lock_status(c, "cb", [&](error_code ec, lock_status st) {
        CHECK_FALSE(ec);
        CHECK_FALSE(st.held);
        called = true;
        c.stop();
    });
    CHECK_FALSE(called);  // never inside the initiating call
    ioc.run_for(5s);
    CHECK(called);
}
