// Replica acknowledgement (lock_options::replicas) against a real primary
// with replicas: grants, refusals that give the level back, a SIGSTOPped
// replica, cancellation during the WAIT, and the client's other traffic
// going on while a WAIT is pending (docs/safety.md, "Replica
// acknowledgement").
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/replica_set.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using corolock::lock_options;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;

// A replica paused for the scope (SIGSTOP), resumed (SIGCONT) on the way out.
struct paused {
    explicit paused(redis_server& s) : server(s) { server.pause(); }
    ~paused() { server.resume(); }
    redis_server& server;
};

std::string owner_on(redis_server& s, const std::string& name) {
    return s.cmd1({"HGET", lock_key(name), "owner"});
}

// After stop(), nothing of the client (side connections included) is left
// to run: the context runs out of work.
void check_nothing_left(asio::io_context& ioc) {
    ioc.restart();
    ioc.run_for(5s);
    CHECK(ioc.stopped());
}
}  // namespace

TEST_CASE("replicas: one live replica acknowledges, and has the lock", "[fault][replicas]") {
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "acked");
        auto g = co_await m.acquire({.replicas = 1});
        CHECK(g.owns_lock());
        // Acknowledged: the replica has the grant before the guard is out.
        CHECK(owner_on(set.replica(0), "acked") == m.owner_id());
        // A re-entry waits too, and is acknowledged as well.
        auto inner = co_await m.acquire({.replicas = 1});
        CHECK(m.held_levels() == 2);
        CHECK(c.metrics().acquisitions == 2);
        co_await inner.release();
        co_await g.release();
    }, 30s);
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: asking for more replicas than exist fails and gives the lock back",
          "[fault][replicas]") {
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "too-many");
        auto [ec, g] = co_await m.async_acquire({.replicas = 2, .replicas_timeout = 300ms},
                                                use_nothrow);
        CHECK(ec == error::replicas_missing);
        CHECK(!g.owns_lock());
        CHECK(m.held_levels() == 0);
        // A grant given back for want of replicas is no acquisition.
        CHECK(c.metrics().acquisitions == 0);
        // Another owner gets it at once: the give-back went out before the
        // failure was reported, ahead of anything sent after it.
        corolock::mutex other(c, "too-many");
        auto got = co_await other.try_acquire();
        REQUIRE(got);
        CHECK(owner_on(set.primary(), "too-many") == other.owner_id());
        co_await got->release();
    }, 30s);
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: a re-entry that is not acknowledged leaves the previous level",
          "[fault][replicas]") {
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "reentry");
        auto outer = co_await m.acquire({});
        auto [ec, inner] = co_await m.async_acquire({.replicas = 2, .replicas_timeout = 200ms},
                                                    use_nothrow);
        CHECK(ec == error::replicas_missing);
        CHECK(m.held_levels() == 1);
        CHECK(!outer.lost());
        corolock::mutex other(c, "reentry");
        auto refused = co_await other.try_acquire();
        CHECK(!refused);  // still held at the previous level
        co_await outer.release();
        auto got = co_await other.try_acquire();
        CHECK(got);
    }, 30s);
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: a stopped replica fails the acquire within its bound, nothing leaks",
          "[fault][replicas]") {
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    {
        paused stopped(set.replica(0));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "stopped-replica");
            auto [ec, g] = co_await m.async_acquire({.replicas = 1, .replicas_timeout = 300ms},
                                                    use_nothrow);
            CHECK(ec == error::replicas_missing);
            CHECK(m.held_levels() == 0);
            co_await c.async_drain(5s, asio::use_awaitable);
            CHECK(owner_on(set.primary(), "stopped-replica").empty());
        }, 20s);  // the bound: run_async fails the test if the acquire hangs
    }
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: a side connection that confirmed before does not confirm a later grant "
          "for free", "[fault][replicas]") {
    // WAIT counts acknowledgements of the offset of its connection's last
    // command: on a side connection used before, a WAIT alone would count
    // the replica's acknowledgement of that earlier offset and report the
    // stopped replica as having the new grant.
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "reused-side");
        {
            auto g = co_await m.acquire({.replicas = 1});  // opens the side connection
            co_await g.release();
        }
        paused stopped(set.replica(0));
        auto [ec, g] = co_await m.async_acquire({.replicas = 1, .replicas_timeout = 300ms},
                                                use_nothrow);
        CHECK(ec == error::replicas_missing);
        CHECK(m.held_levels() == 0);
    }, 20s);
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: a pending WAIT does not hold up the client's other commands",
          "[fault][replicas]") {
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    paused stopped(set.replica(0));
    std::vector<std::string> order;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex held(c, "held-elsewhere");
        auto h = co_await held.acquire({});
        corolock::mutex waiting(c, "waits-for-replicas");
        bool waited = false;
        error_code waited_ec;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto [ec, g] = co_await waiting.async_acquire(
                    {.replicas = 1, .replicas_timeout = 3s}, use_nothrow);
                waited_ec = ec;
                order.push_back("wait");
                waited = true;
            },
            asio::detached);
        // The WAIT is pending on the server once it blocks a client.
        const bool blocked = co_await eventually([&] { return set.blocked_clients() >= 1; }, 5s);
        REQUIRE(blocked);
        corolock::mutex other(c, "another-lock");
        auto t = co_await other.try_acquire();
        CHECK(t);
        order.push_back("try_acquire");
        const error_code released = co_await h.release();
        CHECK(!released);
        order.push_back("release");
        const bool ended = co_await eventually([&] { return waited; }, 10s);
        REQUIRE(ended);
        CHECK(waited_ec == error::replicas_missing);
    }, 30s);
    CHECK(order == std::vector<std::string>{"try_acquire", "release", "wait"});
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: cancelling during the WAIT gives the level back at once",
          "[fault][replicas]") {
    replica_set set(1);
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(set.primary()));
    paused stopped(set.replica(0));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "cancelled");
        asio::cancellation_signal cancel;
        bool done = false;
        error_code got_ec;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto [ec, g] = co_await m.async_acquire(
                    {.replicas = 1, .replicas_timeout = 5s},
                    asio::bind_cancellation_slot(cancel.slot(), use_nothrow));
                got_ec = ec;
                done = true;
            },
            asio::detached);
        const bool blocked = co_await eventually([&] { return set.blocked_clients() >= 1; }, 5s);
        REQUIRE(blocked);
        CHECK(owner_on(set.primary(), "cancelled") == m.owner_id());
        cancel.emit(asio::cancellation_type::terminal);
        const bool ended = co_await eventually([&] { return done; }, 2s);
        REQUIRE(ended);
        CHECK(got_ec == asio::error::operation_aborted);
        CHECK(m.held_levels() == 0);
        // Another owner gets it now, while the WAIT is still pending.
        corolock::mutex other(c, "cancelled");
        auto t = co_await other.try_acquire();
        CHECK(t);
        CHECK(set.blocked_clients() >= 1);
    }, 30s);
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: a user without +wait gets no_permission and the lock back",
          "[fault][replicas]") {
    replica_set set(1);
    // docs/security.md's minimal ACL, which leaves +wait out.
    std::vector<std::string> acl{"ACL", "SETUSER", "locks"};
    for (auto& rule : restricted_user::documented_rules("locks-pw")) acl.push_back(rule);
    set.primary().cmd(acl);
    auto cfg = plain_config_for(set.primary());
    cfg.username = "locks";
    cfg.password = "locks-pw";
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), cfg);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "no-wait-permission");
        auto [ec, g] = co_await m.async_acquire({.replicas = 1}, use_nothrow);
        CHECK(ec == error::no_permission);
        CHECK(m.held_levels() == 0);
        CHECK(owner_on(set.primary(), "no-wait-permission").empty());
    }, 20s);
    c.stop();
    check_nothing_left(ioc);
}

TEST_CASE("replicas: invalid settings are refused", "[fault][replicas]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "invalid");
        auto [e1, g1] = co_await m.async_acquire({.replicas = -1}, use_nothrow);
        CHECK(e1 == error::invalid_argument);
        auto [e2, g2] = co_await m.async_acquire(
            {.lease = 1s, .replicas = 1, .replicas_timeout = 1s}, use_nothrow);
        CHECK(e2 == error::invalid_argument);
        auto [e3, g3] = co_await m.async_acquire({.replicas = 1, .replicas_timeout = -1ms},
                                                 use_nothrow);
        CHECK(e3 == error::invalid_argument);
    }, 20s);
    c.stop();
}
