// The ZooKeeper backend against a real standalone server (support/zk_server.hpp):
// acquire, try, release and re-entry with their tokens; waiters served in
// order behind their predecessor; a cancelled waiter's node deleted; a
// stopped backend's nodes gone at once; the lost signal from the session
// deadline while the server is paused, and a new session afterwards.
#include <corolock/corolock.hpp>

#include <sys/resource.h>

#include "support/async_test.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"  // eventually()
#include "support/zk_server.hpp"
#include "zk/zk_admin.hpp"
#include "zk/lock_recipe.hpp"
#include "zk/zk_backend.hpp"

#include "core/logging.hpp"

#include <zookeeper/zookeeper.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <thread>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using clock_type = std::chrono::steady_clock;

namespace {
constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// This process's CPU time so far (user + system).
std::chrono::microseconds cpu_time() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
}  // namespace

TEST_CASE("zk: acquire, try, release and re-entry mint rising zxid tokens", "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url());
    CHECK(b.scheme() == "zk");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "orders:42"), other(b, "orders:42");
        auto g1 = co_await m.acquire({.wait = 10s});
        CHECK(g1.token() > 0);
        CHECK(g1.lease_deadline() > clock_type::now());
        auto g2 = co_await m.acquire({.wait = 5s});  // re-entry
        CHECK(m.held_levels() == 2);
        CHECK(g2.token() > g1.token());
        {
            auto [ec, g] = co_await other.async_try_acquire({}, nothrow);
            CHECK(ec == error::lock_held);
        }
        {
            const auto rc_ = co_await g1.release();
            CHECK_FALSE(rc_);
        }
        {
            auto got = co_await other.try_acquire();
            CHECK_FALSE(got);
        }
        {
            const auto rc_ = co_await g2.release();
            CHECK_FALSE(rc_);
        }
        auto g3 = co_await other.try_acquire();
        REQUIRE(g3);
        CHECK(g3->token() > g2.token());
        {
            const auto rc_ = co_await g2.release();
            CHECK(rc_ == error::released);
        }
        {
            const auto rc_ = co_await g3->release();
            CHECK_FALSE(rc_);
        }
        b.stop();
    }, 30s);
}

// The requests of an uncontended cycle, counted at the session: one create
// transaction (the node and its directory's Stat, which says the node is
// alone, so first in line), the holder's node watch (a read beside the
// grant, not waited for) and one delete; no getChildren, no setData. The
// token is the create's zxid, and still rises from cycle to cycle. On a
// name never used, one more create makes the lock's directory only.
TEST_CASE("zk: an uncontended cycle is one create transaction and one delete",
          "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url());
    auto impl = std::dynamic_pointer_cast<corolock::detail::zk::zk_backend>(corolock::detail::backend_access::impl(b));
    REQUIRE(impl);
    const auto& sent = impl->zk().requests();
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "counted");
        {
            // The first cycle also makes the lock's directories.
            auto g = co_await m.acquire({.wait = 10s});
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
        }
        std::uint64_t last = 0;
        // The test server removes empty containers every second: a cycle
        // that found its directory gone (and made it: a create) is not
        // counted; three that did not are.
        int counted = 0;
        for (int i = 0; i < 30 && counted < 3; ++i) {
            const auto before = sent;
            auto g = co_await m.acquire({.wait = 10s});
            const auto granted = sent;
            CHECK(g.token() > last);
            last = g.token();
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
            const auto after = sent;
            if (after.create != before.create) continue;
            ++counted;
            CHECK(granted.create_child - before.create_child == 1);
            CHECK(granted.get_data - before.get_data <= 1);  // the node watch
            CHECK(after.remove - before.remove == 1);
            CHECK(after.get_data - before.get_data == 1);
            CHECK(after.create == before.create);
            CHECK(after.children == before.children);
            CHECK(after.set_data == before.set_data);
            CHECK(after.create_child - before.create_child == 1);
        }
        CHECK(counted == 3);
        // A name never used: the create finds no directory, and only the
        // lock's own is made (the ones above it were, once).
        for (int i = 0; i < 2; ++i) {
            corolock::mutex fresh(b, "counted-" + std::to_string(i));
            const auto before = sent;
            auto g = co_await fresh.acquire({.wait = 10s});
            CHECK(g.token() > last);
            last = g.token();
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
            const auto after = sent;
            CHECK(after.create_child - before.create_child == 2);
            CHECK(after.create - before.create == 1);
            CHECK(after.remove - before.remove == 1);
            CHECK(after.children == before.children);
            CHECK(after.set_data == before.set_data);
        }
        b.stop();
    }, 30s);
}

// The backend remembers the directories it made; removed behind its back
// (the ensemble removes an empty container; here by hand, the ones above
// it too), the next create finds them gone and the acquire makes them again.
TEST_CASE("zk: directories removed behind the backend's back are made again",
          "[zk][integration]") {
    namespace zkd = corolock::detail::zk;
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url());
    zkd::zk_options zo;
    std::string why;
    REQUIRE_FALSE(zkd::parse_url(server.url(), zo, why));
    const zkd::session::strand_type strand =
        asio::make_strand(corolock::detail::inner_executor(ioc.get_executor()));
    auto raw = std::make_shared<zkd::session>(strand, zo, *corolock::detail::default_logger(),
                                              [](zkd::session::event) {});
    run_async(ioc, [&]() -> asio::awaitable<void> {
        asio::post(strand, [raw] { raw->start(); });
        const auto up = co_await eventually([&] { return raw->timing().connected(); }, 10s);
        REQUIRE(up);
        const auto remove = [&](std::string path) -> asio::awaitable<int> {
            auto [rc] = co_await zkd::ask<int>(strand, [&](auto h) {
                raw->remove(path, std::move(h));
            });
            co_return rc;
        };
        corolock::mutex m(b, "gone");
        for (int round = 0; round < 3; ++round) {
            auto g = co_await m.acquire({.wait = 10s});
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
            // Round 0: the lock's directory; round 1: every lock's too.
            if (round < 2) {
                // (Or already removed by the ensemble: an empty container.)
                const int rc = co_await remove(zkd::lock_dir(zo.root, "gone"));
                CHECK((rc == ZOK || rc == ZNONODE));
            }
            if (round == 1) {
                const int rc = co_await remove(zkd::locks_root(zo.root));
                CHECK(rc == ZOK);
            }
        }
        asio::post(strand, [raw] { raw->stop(); });
        b.stop();
    }, 30s);
}

TEST_CASE("zk: waiters get the lock in order, each behind its predecessor",
          "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex first(b, "queue");
        auto held = co_await first.acquire({.wait = 10s});
        std::vector<int> order;
        std::vector<std::uint64_t> tokens;
        int finished = 0;
        auto waiter = [&](int id) -> asio::awaitable<void> {
            corolock::mutex m(b, "queue");
            auto g = co_await m.acquire({.wait = 20s});
            order.push_back(id);
            tokens.push_back(g.token());
            co_await sleep_for(20ms);
            {
            const auto rc_ = co_await g.release();
            CHECK_FALSE(rc_);
        }
            ++finished;
        };
        // One at a time, so that their nodes are created in this order.
        for (int id = 1; id <= 3; ++id) {
            asio::co_spawn(ioc, waiter(id), asio::detached);
            co_await sleep_for(150ms);
        }
        const auto before = held.token();
        {
            const auto rc_ = co_await held.release();
            CHECK_FALSE(rc_);
        }
        for (int i = 0; i < 200 && finished < 3; ++i) co_await sleep_for(20ms);
        REQUIRE(finished == 3);
        CHECK(order == std::vector<int>{1, 2, 3});
        CHECK(tokens[0] > before);
        CHECK(tokens[1] > tokens[0]);
        CHECK(tokens[2] > tokens[1]);
        b.stop();
    }, 30s);
}

TEST_CASE("zk: a release after the executor was blocked past the first deadline still "
          "succeeds while the session lives",
          "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url() + "?session_timeout_ms=1000");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "blocked");
        for (int round = 0; round < 3; ++round) {
            auto g = co_await m.acquire({.wait = 5s});
            const auto first = g.lease_deadline();
            // Heartbeats answered meanwhile move the session's deadline on.
            co_await sleep_for(700ms);
            // The executor is busy elsewhere past the deadline the grant
            // published, not past the session's.
            const auto busy = std::max(first - clock_type::now() + 100ms,
                                       clock_type::duration(0));
            std::this_thread::sleep_for(busy);
            CHECK_FALSE(g.lost());
            const auto rc_ = co_await g.release();
            INFO("round " << round << ": " << rc_.message());
            CHECK_FALSE(rc_);
        }
        b.stop();
    }, 30s);
}

TEST_CASE("zk: a waiter whose node is older than the holder's re-entry still gets a larger "
          "token",
          "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(b, "fence"), waiter(b, "fence");
        auto g1 = co_await holder.acquire({.wait = 10s});
        std::optional<std::uint64_t> waited;
        bool waiter_done = false;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto g = co_await waiter.acquire({.wait = 20s});
            waited = g.token();
            const auto rc_ = co_await g.release();
            CHECK_FALSE(rc_);
            waiter_done = true;
        }, asio::detached);
        co_await sleep_for(200ms);  // the waiter's node exists now
        auto g2 = co_await holder.acquire({.wait = 5s});  // a re-entry: a later zxid
        CHECK(g2.token() > g1.token());
        {
            const auto rc_ = co_await g1.release();
            CHECK_FALSE(rc_);
        }
        {
            const auto rc_ = co_await g2.release();
            CHECK_FALSE(rc_);
        }
        // Until the waiter's release has been answered: stopping the backend
        // with its delete still out, then leaving the io_context, would
        // leave the request with the ZooKeeper client (see the issue log).
        for (int i = 0; i < 200 && !waiter_done; ++i) co_await sleep_for(10ms);
        REQUIRE(waited);
        CHECK(waiter_done);
        CHECK(*waited > g2.token());
        b.stop();
    }, 30s);
}

TEST_CASE("zk: a cancelled or timed-out waiter leaves no node behind", "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server.url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        corolock::mutex holder(b, "cancel"), waiter(b, "cancel"), timed(b, "cancel"),
            late(b, "cancel");
        auto g = co_await holder.acquire({.wait = 10s});
        {
            asio::steady_timer t(ioc, 300ms);
            auto r = co_await (waiter.acquire({.wait = 20s}) || t.async_wait(asio::use_awaitable));
            CHECK(r.index() == 1);  // cancelled while waiting
        }
        {
            auto [ec, got] = co_await timed.async_acquire({.wait = 300ms}, nothrow);
            CHECK(ec == error::wait_timeout);
        }
        {
            auto [ec] = co_await b.async_drain(5s, nothrow);
            CHECK_FALSE(ec);
        }
        {
            const auto rc_ = co_await g.release();
            CHECK_FALSE(rc_);
        }
        // Had either waiter's node stayed, it would be first in line now.
        auto next = co_await late.try_acquire();
        CHECK(next);
        if (next) {
            const auto rc_ = co_await next->release();
            CHECK_FALSE(rc_);
        }
        b.stop();
    }, 30s);
}

TEST_CASE("zk: a stopped backend's nodes go with its session at once", "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend a(ioc.get_executor(), server.url());
    corolock::backend b(ioc.get_executor(), server.url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex ma(a, "stop"), mb(b, "stop");
        auto g = co_await ma.acquire({.wait = 10s});
        {
            auto got = co_await mb.try_acquire();
            CHECK_FALSE(got);
        }
        a.stop();
        std::optional<guard> next;
        for (int i = 0; i < 50 && !next; ++i) {
            next = co_await mb.try_acquire();
            if (!next) co_await sleep_for(20ms);
        }
        REQUIRE(next);
        CHECK(next->token() > g.token());
        {
            const auto rc_ = co_await next->release();
            CHECK_FALSE(rc_);
        }
        b.stop();
    }, 30s);
}

// The holder watches its own node: deleted by anyone else (corolock
// break, zkCli), the holder is told lost at once, and through re-entries
// (each a write to the node, which fires the watch, set again after) too.
TEST_CASE("zk: a holder whose node is deleted by someone else is told at once",
          "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    corolock::backend a(ioc.get_executor(), server.url());
    corolock::backend b(ioc.get_executor(), server.url());
    corolock::detail::zk::zk_options zo;
    std::string why;
    REQUIRE_FALSE(corolock::detail::zk::parse_url(server.url(), zo, why));
    corolock::detail::zk::admin operator_tool(ioc.get_executor(), zo, 5000ms);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const auto r1_ = co_await operator_tool.connect();
        REQUIRE_FALSE(r1_);
        corolock::mutex holder(a, "broken"), waiter(b, "broken");
        auto g = co_await holder.acquire({.wait = 10s});
        auto again = co_await holder.acquire({.wait = 10s});  // a re-entry: the node written
        std::optional<guard> next;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            next.emplace(co_await waiter.acquire({.wait = 20s}));
        }, asio::detached);
        co_await sleep_for(300ms);
        CHECK_FALSE(next);
        CHECK_FALSE(g.lost());

        auto [ec, removed] = co_await operator_tool.break_lock("broken");
        REQUIRE_FALSE(ec);
        CHECK(removed.held);
        CHECK(removed.waiters.size() == 1);
        const auto broken_at = clock_type::now();
        auto [lec] = co_await g.async_until_lost(nothrow);
        CHECK(lec == error::lock_lost);
        const auto told_after = clock_type::now() - broken_at;
        INFO("told after "
             << std::chrono::duration_cast<std::chrono::milliseconds>(told_after).count() << " ms");
        // A watch's notification: far under the session timeout (10 s) the
        // deadline would otherwise take, and no release needed.
        CHECK(told_after < 2s);
        CHECK(g.lost());
        CHECK(again.lost());
        for (int i = 0; i < 200 && !next; ++i) co_await sleep_for(10ms);
        REQUIRE(next);
        CHECK(next->token() > again.token());
        {
            const auto [rec] = co_await again.async_release(nothrow);
            CHECK(rec);  // never success after a loss
            const auto rc_ = co_await next->release();
            CHECK_FALSE(rc_);
        }
        // Nothing held: break says so.
        auto [fec, none] = co_await operator_tool.break_lock("broken");
        CHECK_FALSE(fec);
        CHECK_FALSE(none.held);
        operator_tool.stop();
        a.stop();
        b.stop();
    }, 30s);
}

TEST_CASE("zk: the lost signal fires from the session deadline, before the session could "
          "expire; a new session follows",
          "[zk][integration]") {
    zk_server server;
    asio::io_context ioc;
    const auto timeout = 2000ms;
    corolock::backend b(ioc.get_executor(), server.url() + "?session_timeout_ms=2000");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "lost"), again(b, "lost");
        auto g = co_await m.acquire({.wait = 10s});
        // Idle for longer than the session timeout: heartbeats keep it.
        co_await sleep_for(timeout + 500ms);
        CHECK_FALSE(g.lost());
        CHECK(g.lease_deadline() > clock_type::now());
        const auto deadline_before = g.lease_deadline();
        const auto paused_at = clock_type::now();
        server.pause(0);
        auto [ec] = co_await g.async_until_lost(nothrow);
        const auto lost_at = clock_type::now();
        server.resume(0);
        CHECK(ec == error::lock_lost);
        CHECK(g.lost());
        // Nothing the server heard after the pause: the session can end on
        // the server no sooner than paused_at + timeout.
        INFO("lost after " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                  lost_at - paused_at).count() << " ms");
        CHECK(lost_at < paused_at + timeout);
        CHECK(lost_at >= deadline_before);
        // Heartbeats every third of the timeout: not lost before that.
        CHECK(lost_at > paused_at + timeout / 3);
        {
            const auto rec = co_await g.release();
            CHECK(rec);
        }
        // The server expires the old session once it runs again; the
        // backend makes a new one and the lock can be taken again.
        std::optional<guard> next;
        for (int i = 0; i < 100 && !next; ++i) {
            auto [aec, got] = co_await again.async_acquire({.wait = 500ms}, nothrow);
            if (!aec) next.emplace(std::move(got));
        }
        REQUIRE(next);
        CHECK(next->token() > g.token());
        {
            const auto rc_ = co_await next->release();
            CHECK_FALSE(rc_);
        }
        b.stop();
    }, 60s);
}

TEST_CASE("zk: a holder cut off for longer than its session is told before another owner "
          "gets the lock, and gets a new session after",
          "[zk][integration]") {
    zk_server server;
    fault_proxy proxy(server.port(), "127.0.0.1", fault_proxy::framing::raw);
    asio::io_context ioc;
    corolock::backend cut(ioc.get_executor(), "zk://127.0.0.1:" + std::to_string(proxy.port()) +
                                                  "?session_timeout_ms=1500");
    corolock::backend other(ioc.get_executor(), server.url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(cut, "partition"), taker(other, "partition");
        auto g = co_await holder.acquire({.wait = 10s});
        std::optional<clock_type::time_point> granted_at;
        std::optional<guard> taken;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto t = co_await taker.acquire({.wait = 20s});
            granted_at = clock_type::now();
            taken.emplace(std::move(t));
        }, asio::detached);
        co_await sleep_for(200ms);
        proxy.blackhole(true);
        auto [ec] = co_await g.async_until_lost(nothrow);
        const auto lost_at = clock_type::now();
        CHECK(ec == error::lock_lost);
        // The ensemble expires the cut-off session, and only then does the
        // other owner's turn come.
        for (int i = 0; i < 500 && !granted_at; ++i) co_await sleep_for(10ms);
        REQUIRE(granted_at);
        CHECK(lost_at < *granted_at);
        CHECK(taken->token() > g.token());
        proxy.heal();
        {
            const auto rc_ = co_await taken->release();
            CHECK_FALSE(rc_);
        }
        // The cut-off backend finds its session expired and makes a new one.
        corolock::mutex again(cut, "partition");
        std::optional<guard> next;
        for (int i = 0; i < 40 && !next; ++i) {
            auto [aec, got] = co_await again.async_acquire({.wait = 500ms}, nothrow);
            if (!aec) next.emplace(std::move(got));
        }
        REQUIRE(next);
        CHECK(next->token() > taken->token());
        {
            const auto rc_ = co_await next->release();
            CHECK_FALSE(rc_);
        }
        cut.stop();
        other.stop();
    }, 60s);
}

TEST_CASE("zk: after a connection reset the new socket is watched at once", "[zk][integration]") {
    zk_server server;
    fault_proxy proxy(server.port(), "127.0.0.1", fault_proxy::framing::raw);
    asio::io_context ioc;
    // A long session: the C client asks to be called again only every few
    // seconds, so a socket that is not watched shows as seconds of delay.
    corolock::backend b(ioc.get_executor(), "zk://127.0.0.1:" + std::to_string(proxy.port()) +
                                                "?session_timeout_ms=9000");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "reset");
        for (int round = 0; round < 3; ++round) {
            auto g = co_await m.acquire({.wait = 10s});
            co_await sleep_for(100ms);
            CHECK(proxy.reset_all() >= 1);
            const auto t0 = clock_type::now();
            const auto rc_ = co_await g.release();
            const auto took = clock_type::now() - t0;
            INFO("round " << round << ": release took "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                          << " ms: " << rc_.message());
            // The release goes out on the new connection once the session
            // is re-established there: a few round trips, far under the
            // C client's own three-second call-again interval.
            CHECK(took < 1500ms);
        }
        // Idle after a reset: the old socket (dead, always "readable") must
        // be let go, or the session's loop spins on it.
        auto g = co_await m.acquire({.wait = 10s});
        proxy.reset_all();
        co_await sleep_for(200ms);
        const auto cpu_before = cpu_time();
        co_await sleep_for(1s);
        const auto cpu = cpu_time() - cpu_before;
        INFO("CPU over one idle second: "
             << std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count() << " ms");
        CHECK(cpu < 200ms);
        {
            const auto rc_ = co_await g.release();
            CHECK_FALSE(rc_);
        }
        b.stop();
    }, 60s);
}

// A create the ensemble applied whose answer was lost (the connection reset
// right after the request reached the server), and a caller that gives up
// while the acquire looks for the node by its attempt id: the node must not
// outlive the attempt. The session outlives the cut (20 s), so nothing but a
// delete removes it; left, it would be first in line for as long as the
// session lives and block every waiter.
TEST_CASE("zk: an attempt whose create answer was lost leaves no node once given up",
          "[zk][integration]") {
    zk_server server;
    fault_proxy proxy(server.port(), "127.0.0.1", fault_proxy::framing::raw);
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), "zk://127.0.0.1:" + std::to_string(proxy.port()) +
                                                "?session_timeout_ms=20000");
    corolock::backend direct(ioc.get_executor(), server.url());
    const auto nodes = [&] {
        std::size_t n = 0;
        for (const auto& path : server.ephemerals())
            n += path.find("/lost-create/") != std::string::npos ? 1 : 0;
        return n;
    };
    run_async(ioc, [&]() -> asio::awaitable<void> {
        {
            // The lock's directory exists: the acquire below names the lock
            // first in its create.
            corolock::mutex first(b, "lost-create");
            auto g = co_await first.acquire({.wait = 10s});
            const auto r2_ = co_await g.release();
            CHECK_FALSE(r2_);
        }
        proxy.freeze_after_next("lost-create");
        corolock::mutex m(b, "lost-create");
        asio::cancellation_signal cancel;
        std::optional<error_code> result;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await m.async_acquire(
                {.wait = 30s}, asio::bind_cancellation_slot(cancel.slot(), nothrow));
            result = ec;
        }, asio::detached);
        const auto r3_ = co_await eventually([&] { return proxy.froze(); }, 10s);
        REQUIRE(r3_);
        // The ensemble made the node; its answer goes with the connection.
        // (Asked every 50 ms: each look is a connection to the server.)
        for (int i = 0; i < 200 && nodes() != 1; ++i) co_await sleep_for(50ms);
        REQUIRE(nodes() == 1);
        CHECK(proxy.reset_all() >= 1);
        cancel.emit(asio::cancellation_type::terminal);
        const auto r4_ = co_await eventually([&] { return result.has_value(); }, 10s);
        REQUIRE(r4_);
        CHECK(*result == asio::error::operation_aborted);
        // The session comes back through the proxy; the node is found by
        // its attempt id and deleted, well before the session could expire.
        proxy.heal();
        for (int i = 0; i < 300 && nodes() != 0; ++i) co_await sleep_for(50ms);
        CHECK(nodes() == 0);
        corolock::mutex other(direct, "lost-create");
        auto got = co_await other.try_acquire();
        CHECK(got);
        if (got) {
            const auto r5_ = co_await got->release();
            CHECK_FALSE(r5_);
        }
        b.stop();
        direct.stop();
    }, 60s);
}

// A try (a zero wait) made before the session is connected waits for the
// session, as long as a connection attempt may take, and is then answered as
// a try: granted here. It was answered server_error within milliseconds: its
// loop, waiting "until the wait's end" that had passed as it began, spent
// its bounded rounds at once (the fresh-server zero-wait failure of the
// conformance suite).
TEST_CASE("zk: a try made before the session is connected waits for it, then tries",
          "[zk][integration]") {
    zk_server server;
    fault_proxy proxy(server.port(), "127.0.0.1", fault_proxy::framing::raw);
    // The handshake reaches the server; its answer is held back.
    proxy.pause(fault_proxy::direction::to_client);
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), "zk://127.0.0.1:" + std::to_string(proxy.port()) +
                                                "?session_timeout_ms=6000");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "early-try"), other(b, "early-try");
        std::optional<error_code> result;
        std::optional<guard> held;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 0ms}, nothrow);
            result = ec;
            if (!ec) held = std::move(g);
        }, asio::detached);
        // The C client gave up on that connection and tries another (at two
        // thirds of the session timeout, 4 s): the try has been without a
        // session for that long, far longer than the old loop's rounds
        // lasted, and within its bound (the session timeout, 6 s).
        const auto r1_ =
            co_await eventually([&] { return proxy.stats().connections.size() >= 2; }, 10s);
        REQUIRE(r1_);
        // Not answered while the session is not there.
        CHECK_FALSE(result.has_value());
        proxy.resume(fault_proxy::direction::to_client);
        const auto r2_ = co_await eventually([&] { return result.has_value(); }, 15s);
        REQUIRE(r2_);
        INFO(result->message());
        CHECK_FALSE(*result);
        REQUIRE(held);
        // And a try still answers at once once connected: the lock is held.
        auto [ec2, g2] = co_await other.async_acquire({.lease = 5s, .wait = 0ms}, nothrow);
        CHECK((ec2 == error::lock_held || ec2 == error::wait_timeout));
        const auto r3_ = co_await held->release();
        CHECK_FALSE(r3_);
        b.stop();
    }, 60s);
}

TEST_CASE("zk: with credentials, no other identity can take, plant in or break the lock",
          "[zk][integration][acl]") {
    // Without credentials every node was world-writable: anyone could
    // delete the holder's node (the next waiter then got the lock) or
    // create one that sorts first. With zk://USER:PASSWORD@..., the nodes
    // corolock creates are creator-all and world-read.
    zk_server server;
    const std::string hosts = server.url("/secured").substr(5);  // after "zk://"
    const std::string app = "zk://app:s3cret@" + hosts;
    asio::io_context ioc;
    corolock::backend a(ioc.get_executor(), app);
    corolock::backend b(ioc.get_executor(), app);
    corolock::backend open(ioc.get_executor(), "zk://" + hosts);
    corolock::backend wrong(ioc.get_executor(), "zk://app:wrong@" + hosts);
    auto admin_for = [&](const std::string& url) {
        corolock::detail::zk::zk_options zo;
        std::string why;
        REQUIRE_FALSE(corolock::detail::zk::parse_url(url, zo, why));
        return std::make_unique<corolock::detail::zk::admin>(ioc.get_executor(), zo, 5000ms);
    };
    auto anyone = admin_for("zk://" + hosts);
    auto owner = admin_for(app);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const auto anyone_connected = co_await anyone->connect();
        REQUIRE_FALSE(anyone_connected);
        const auto owner_connected = co_await owner->connect();
        REQUIRE_FALSE(owner_connected);
        corolock::mutex holder(a, "guarded"), waiter(b, "guarded");
        auto g = co_await holder.acquire({.wait = 10s});
        // Another identity (none, or a wrong password) cannot create a
        // node in the lock's directory: its acquire is refused, not queued.
        for (auto* other : {&open, &wrong}) {
            corolock::mutex m(*other, "guarded");
            auto [ec, og] = co_await m.async_acquire({.wait = 0ms}, nothrow);
            CHECK(ec == error::no_permission);
            auto [ec2, og2] = co_await m.async_acquire({.wait = 500ms}, nothrow);
            CHECK(ec2 == error::no_permission);
        }
        // It may read (world READ) but not delete the holder's node.
        auto [sec, st] = co_await anyone->status("guarded");
        REQUIRE_FALSE(sec);
        CHECK(st.held);
        auto [bec, removed] = co_await anyone->break_lock("guarded");
        CHECK(bec == error::no_permission);
        CHECK_FALSE(g.lost());
        // The same identity takes turns as without credentials.
        std::optional<guard> next;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            next.emplace(co_await waiter.acquire({.wait = 20s}));
        }, asio::detached);
        const auto released = co_await g.release();
        CHECK_FALSE(released);
        for (int i = 0; i < 500 && !next; ++i) co_await sleep_for(10ms);
        REQUIRE(next);
        CHECK(next->token() > g.token());
        // And its operator may break the lock.
        auto [oec, broken] = co_await owner->break_lock("guarded");
        CHECK_FALSE(oec);
        CHECK(broken.held);
        auto [lec] = co_await next->async_until_lost(nothrow);
        CHECK(lec == error::lock_lost);
        const auto [rec] = co_await next->async_release(nothrow);
        CHECK(rec);  // never success after a loss
        anyone->stop();
        owner->stop();
        for (auto* x : {&a, &b, &open, &wrong}) x->stop();
    }, 60s);
}
