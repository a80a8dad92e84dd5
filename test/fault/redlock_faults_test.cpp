// RedLock (docs/redlock.md) under node faults, five redis-servers: two nodes
// killed while held (kept, a second owner refused), a third killed (lost
// before a majority could expire), a paused node slower than the per-node
// timeout (granted without it), and a node restarted without persistence
// while a bare majority is held: the documented failure mode, asserted.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redlock_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error;
using clock_type = std::chrono::steady_clock;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;
}  // namespace

TEST_CASE("redlock faults: two of five nodes die while held and the lock stays - a third loses it",
          "[redlock][fault]") {
    redlock_case c(5, "rl:kill");
    auto& [f, ioc, locks, a, b] = c;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const corolock::lock_options o{.lease = 2s, .renew_interval = 500ms};
        auto [ec, g] = co_await a.async_acquire(o, use_nothrow);
        REQUIRE_FALSE(ec);
        f.servers[0]->kill9();
        f.servers[1]->kill9();
        // Longer than the lease: only renewals on the three live nodes keep it.
        auto r = co_await (g.until_lost() || sleep_for(3s));
        CHECK(r.index() == 1);
        CHECK_FALSE(g.lost());
        auto [ec2, g2] = co_await b.async_try_acquire(o, use_nothrow);
        CHECK(ec2 == error::lock_held);

        // A third node down: a majority can no longer be confirmed. The lost
        // signal fires no later than the last deadline confirmed: the one
        // published once a renewal round in flight at the kill (which the
        // node may have answered just before it) is over, 300 ms later
        // (a round's nodes answer within node_timeout, 200 ms). The lease is
        // 2 s and renewed every 500 ms, so the loss is still ahead then.
        f.servers[2]->kill9();
        co_await sleep_for(300ms);
        REQUIRE_FALSE(g.lost());
        const auto bound = g.lease_deadline();
        auto r2 = co_await (g.until_lost() || sleep_for(4s));
        const auto at = clock_type::now();
        CHECK(r2.index() == 0);
        CHECK(g.lost());
        // The signal comes by the deadline's timer; what is measured here is
        // when this coroutine resumed. Loose (half the 2 s lease): a busy
        // machine may also finish the round in flight at the kill after the
        // 300 ms above, moving the deadline one 500 ms interval on; a timer
        // that never fires (the 4 s race above) still fails.
        CHECK(at <= bound + o.lease / 2);
        // RedLock's own loss, and the nodes' renewals summed.
        const auto m = locks.metrics();
        CHECK(m.leases_lost == 1);
        CHECK(m.renewals_sent >= 3 * 4);  // three live nodes, every 500 ms for 3 s
    }, 30s);
}

TEST_CASE("redlock faults: a waiter gets the lock only after the release while nodes die",
          "[redlock][fault]") {
    redlock_case c(5, "rl:waited");
    auto& [f, ioc, locks, a, b] = c;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const corolock::lock_options o{.lease = 2s, .wait = 15s, .renew_interval = 500ms};
        auto [ec, g] = co_await a.async_acquire(o, use_nothrow);
        REQUIRE_FALSE(ec);
        std::optional<clock_type::time_point> b_at;
        corolock::guard gb;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto [ec2, g2] = co_await b.async_acquire(o, use_nothrow);
            CHECK_FALSE(ec2);
            b_at = clock_type::now();
            gb = std::move(g2);
        }, asio::detached);
        co_await sleep_for(300ms);
        f.servers[0]->kill9();
        co_await sleep_for(1s);
        f.servers[1]->kill9();
        co_await sleep_for(2500ms);  // past the first lease: renewals keep A's
        CHECK_FALSE(b_at);
        CHECK_FALSE(g.lost());
        const auto released = clock_type::now();
        auto rel = co_await g.release();
        CHECK_FALSE(rel);
        for (int i = 0; i < 200 && !b_at; ++i) co_await sleep_for(10ms);
        REQUIRE(b_at);
        CHECK(*b_at >= released);
        CHECK(f.holding("rl:waited") == 3);
        co_await gb.release();
    }, 40s);
}

TEST_CASE("redlock faults: a paused node slower than the per-node timeout is left out",
          "[redlock][fault]") {
    redlock_case c(5, "rl:pause");
    auto& [f, ioc, locks, a, b] = c;
    // Connect every node before the pause.
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, g] = co_await a.async_acquire({.lease = 5s}, use_nothrow);
        REQUIRE_FALSE(ec);
        co_await g.release();
    }, 30s);
    f.servers[4]->pause();
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const auto t0 = clock_type::now();
        auto [ec, g] = co_await a.async_acquire({.lease = 5s}, use_nothrow);
        const auto now = clock_type::now();
        const auto took = now - t0;
        REQUIRE_FALSE(ec);
        // The round waited for the paused node up to the per-node timeout
        // (200 ms), no longer (not the command timeout).
        CHECK(took >= 200ms);
        // Loose (2 s, ten node timeouts): still below the 3 s command timeout
        // that a round waiting for the paused node would end at.
        CHECK(took < 2s);
        int held = 0;
        for (std::size_t i = 0; i < 4; ++i)
            held += f.servers[i]->cmd1({"EXISTS", lock_key("rl:pause")}) == "1";
        CHECK(held == 4);
        // The validity is counted from before the round: what is left paid
        // for the wait (lease - drift - elapsed).
        CHECK(g.lease_deadline() - now < 5s - 52ms - 150ms);
        co_await g.release();
    }, 30s);
    f.servers[4]->resume();
}

TEST_CASE("redlock faults: a node restarted without persistence under a bare majority",
          "[redlock][fault]") {
    // docs/redlock.md, "Restarts": A holds a bare majority (nodes 0-2; 3 and
    // 4 were down when it acquired), with no watchdog. Node 2 restarts empty
    // and 3 and 4 come back, so B can take 2, 3 and 4. What stops two
    // holders here is only that A's client for node 2 checks its held locks
    // on reconnect, ahead of other traffic on that connection (B's try, in
    // this process), and that B's grant re-checks A's tenure before it is
    // handed out: A's node 2 is lost, a majority can no longer be
    // confirmed, and A's lost signal has fired when B is granted. A holder
    // in another process has no such order: there B can be granted before
    // A's client reconnects (the window the docs state; a test of it through
    // the fault proxy is still to be written).
    redlock_case c(5, "rl:restart");
    auto& [f, ioc, locks, a, b] = c;
    c.f.servers[3]->kill9();
    c.f.servers[4]->kill9();
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const corolock::lock_options o{.lease = 10s, .wait = 8s, .watchdog = false};
        auto [ec, g] = co_await a.async_acquire(o, use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(f.holding("rl:restart") == 3);
        const auto a_deadline = g.lease_deadline();
        f.servers[2]->restart();
        f.servers[3]->restart();
        f.servers[4]->restart();
        auto [ec2, g2] = co_await b.async_acquire(o, use_nothrow);
        REQUIRE_FALSE(ec2);
        CHECK(g.lost());  // told before B's grant...
        CHECK(clock_type::now() < a_deadline);  // ...by the check, not the expiry
        co_await g2.release();
    }, 40s);
}

TEST_CASE("redlock faults: a release is an error unless a majority of the nodes confirmed it",
          "[redlock][fault]") {
    // docs/redlock.md, "Releasing". Two of five nodes down: three confirm,
    // success. Three down: two confirm, the error of a node that could not
    // answer (not a lease_gone one: nobody found the key gone); the live
    // nodes are freed all the same, the dead ones' keys would expire.
    redlock_case c(5, "rl:release");
    auto& [f, ioc, locks, a, b] = c;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const corolock::lock_options o{.lease = 10s};
        auto [ec, g] = co_await a.async_acquire(o, use_nothrow);
        REQUIRE_FALSE(ec);
        f.servers[0]->kill9();
        f.servers[1]->kill9();
        auto rel = co_await g.release();
        CHECK_FALSE(rel);
        CHECK(f.holding("rl:release") == 0);

        auto [ec2, g2] = co_await a.async_acquire(o, use_nothrow);
        REQUIRE_FALSE(ec2);
        CHECK(f.holding("rl:release") == 3);
        f.servers[2]->kill9();
        const auto before = locks.metrics();
        auto rel2 = co_await g2.release();
        INFO(rel2.message());
        CHECK(rel2);
        CHECK(rel2 != corolock::condition::lease_gone);
        CHECK((rel2 == corolock::condition::connection_failure ||
               rel2 == corolock::condition::timeout));
        CHECK(f.holding("rl:release") == 0);
        CHECK(locks.metrics().releases_found_gone == before.releases_found_gone);
    }, 60s);
}
