// Conformance: backend::async_drain waits for what a given-up acquire left
// to the backend, so that a process about to exit leaves nothing behind.
//
// Each case gives up on an acquire of a handle that reaches the server
// through a fault proxy delaying its bytes (so the backend's clean-up takes
// several round trips of 200-400 ms), drains, and then asks the server
// directly (lock_server::owners: the Redis hash's owner, etcd's keys under
// the lock's prefix) that nothing of that owner is left:
//  - a waiting acquire, cancelled: on etcd its waiter's key must be gone
//    (deleted by its give-back); Redis keeps no trace of a waiter, so there the
//    case checks only that the drain completes and the holder is untouched;
//  - an acquire on a free lock, cancelled the moment the server shows its
//    owner (the grant's answer is still on its way back): the backend gives
//    the grant back, and after the drain the lock is free for another owner
//    at once.
// Both need the proxy in the lock traffic's path: on the Sentinel and Cluster
// backends they are skipped (lock_server::proxy_unsupported()).
#include "conformance/conformance.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"  // eventually()

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using namespace corolock::test::conformance;
using corolock::error;
using corolock::error_code;
using corolock::guard;

namespace {

bool has(const std::vector<std::string>& owners, const std::string& owner) {
    return std::find(owners.begin(), owners.end(), owner) != owners.end();
}

std::string listed(const std::vector<std::string>& owners) {
    std::string out;
    for (const auto& o : owners) out += (out.empty() ? "" : ", ") + o;
    return "[" + out + "]";
}

// Opens the backend's connection through the proxy before any delay: a
// try on a name of its own.
asio::awaitable<void> warm_up(corolock::backend& b) {
    corolock::mutex warm(b, "drain-warm-up");
    auto g = co_await warm.try_acquire({.lease = 5s});
    REQUIRE(g);
    const auto ec = co_await g->release();
    CHECK_FALSE(ec);
}

}  // namespace

TEST_CASE("a cancelled waiting acquire leaves nothing of its owner once drained",
          "[conformance][drain]") {
    auto server = start_server();
    if (!proxy_in_lock_path(*server)) return;
    fault_proxy proxy(server->port(), "127.0.0.1", fault_proxy::framing::raw);
    asio::io_context ioc;
    corolock::backend direct(ioc.get_executor(), server->url());
    corolock::backend slow(ioc.get_executor(), server->url_via(proxy.port()));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(direct, "drain-wait");
        auto held = co_await holder.acquire({.lease = 10s});
        co_await warm_up(slow);
        proxy.set_delay(200ms);  // both ways: every round trip takes 400 ms

        corolock::mutex waiter(slow, "drain-wait");
        asio::cancellation_signal cancel;
        std::optional<error_code> result;
        asio::co_spawn(co_await asio::this_coro::executor, [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await waiter.async_acquire(
                {.lease = 10s, .wait = 60s}, asio::bind_cancellation_slot(cancel.slot(), use_nothrow));
            result = ec;
        }, asio::detached);
        // Pacing, not synchronisation: the waiter is queued by then (on etcd
        // its key exists), whatever step it is in when cancelled.
        co_await sleep_for(1500ms);
        REQUIRE_FALSE(result.has_value());
        cancel.emit(asio::cancellation_type::terminal);
        const bool answered = co_await eventually([&] { return result.has_value(); }, 10s);
        REQUIRE(answered);
        CHECK(*result == asio::error::operation_aborted);

        auto [dec] = co_await slow.async_drain(10s, use_nothrow);
        CHECK(dec == error_code{});
        const auto left = server->owners("drain-wait");
        INFO("owners left: " << listed(left) << "; the waiter was " << waiter.owner_id());
        CHECK_FALSE(has(left, waiter.owner_id()));
        CHECK(has(left, holder.owner_id()));
        CHECK(waiter.held_levels() == 0);

        const auto rec = co_await held.release();
        CHECK_FALSE(rec);
        slow.stop();
        direct.stop();
    }, 60s);
}

TEST_CASE("an acquire cancelled while its grant is on the way back leaves the lock free once drained",
          "[conformance][drain]") {
    auto server = start_server();
    if (!proxy_in_lock_path(*server)) return;
    fault_proxy proxy(server->port(), "127.0.0.1", fault_proxy::framing::raw);
    asio::io_context ioc;
    corolock::backend direct(ioc.get_executor(), server->url());
    corolock::backend slow(ioc.get_executor(), server->url_via(proxy.port()));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await warm_up(slow);
        // Requests reach the server at once; answers come 400 ms later.
        proxy.set_delay(fault_proxy::direction::to_client, 400ms);

        corolock::mutex m(slow, "drain-grant");
        asio::cancellation_signal cancel;
        std::optional<error_code> result;
        std::optional<guard> granted;
        asio::co_spawn(co_await asio::this_coro::executor, [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await m.async_acquire(
                {.lease = 10s, .wait = 60s}, asio::bind_cancellation_slot(cancel.slot(), use_nothrow));
            result = ec;
            if (!ec) granted = std::move(g);
        }, asio::detached);
        // The server has granted (its state shows the owner); the answer is
        // still in the proxy. Cancel now.
        const bool on_server = co_await eventually(
            [&] { return result.has_value() || has(server->owners("drain-grant"), m.owner_id()); },
            10s);
        REQUIRE(on_server);
        REQUIRE_FALSE(result.has_value());  // else the answer outran the poll: no case
        cancel.emit(asio::cancellation_type::terminal);
        const bool answered = co_await eventually([&] { return result.has_value(); }, 10s);
        REQUIRE(answered);
        CHECK(*result == asio::error::operation_aborted);

        auto [dec] = co_await slow.async_drain(10s, use_nothrow);
        CHECK(dec == error_code{});
        const auto left = server->owners("drain-grant");
        INFO("owners left: " << listed(left) << "; the cancelled owner was " << m.owner_id());
        CHECK(left.empty());
        // Free for another owner at once, without waiting for a lease.
        corolock::mutex other(direct, "drain-grant");
        auto [tec, g] = co_await other.async_try_acquire({.lease = 5s}, use_nothrow);
        CHECK(tec == error_code{});
        if (!tec) {
            const auto rec = co_await g.release();
            CHECK_FALSE(rec);
        }
        CHECK(m.held_levels() == 0);
        slow.stop();
        direct.stop();
    }, 60s);
}

TEST_CASE("a drain completes at once with nothing to wait for, and after stop with client_stopped",
          "[conformance][drain]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [idle] = co_await b.async_drain(10s, use_nothrow);
        CHECK(idle == error_code{});
        b.stop();
        auto [stopped] = co_await b.async_drain(10s, use_nothrow);
        CHECK(stopped == error::client_stopped);
    });
}

// A cancellation emitted right after async_acquire returns, before any step
// of the acquire has run (its first step is posted to the backend's strand),
// must not be lost: the acquire completes with operation_aborted, and
// nothing of its owner is left once drained.
TEST_CASE("an acquire cancelled right after it starts is aborted and leaves nothing once drained",
          "[conformance][drain]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> { co_await warm_up(b); });
    corolock::mutex m(b, "drain-at-once");
    for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
        asio::cancellation_signal cancel;
        std::optional<error_code> result;
        std::optional<guard> granted;
        m.async_acquire({.lease = 10s, .wait = 60s},
                        asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, guard g) {
                            result = ec;
                            if (!ec) granted = std::move(g);
                        }));
        cancel.emit(type);
        run_async(ioc, [&]() -> asio::awaitable<void> {
            const bool answered = co_await eventually([&] { return result.has_value(); }, 10s);
            REQUIRE(answered);
        });
        INFO("cancellation type " << static_cast<int>(type));
        CHECK(*result == asio::error::operation_aborted);
        CHECK_FALSE(granted.has_value());
    }
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [dec] = co_await b.async_drain(10s, use_nothrow);
        CHECK(dec == error_code{});
        const auto left = server->owners("drain-at-once");
        INFO("owners left: " << listed(left) << "; the cancelled owner was " << m.owner_id());
        CHECK(left.empty());
        CHECK(m.held_levels() == 0);
        b.stop();
    }, 30s);
}
