// corolock::fair_mutex against a live redis-server: first come first served
// where the plain mutex starves, the direct handoff, cancellation, a dead
// waiter skipped, and the lost signal.
#include <corolock/corolock.hpp>
#include <corolock/fair_mutex.hpp>

#include "core/watchdog_schedule.hpp"
#include "redis/lock/fair_scripts.hpp"

#include "support/async_test.hpp"
#include "support/child_process.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

std::string queue_key(const std::string& name) { return "corolock:{" + name + "}:queue"; }

// The owners queued on the server for `name`, first first.
std::vector<std::string> queued(const redis_server& server, const std::string& name) {
    return server.cmd({"ZRANGE", queue_key(name), "0", "-1"});
}

// A refusal's {left_us, at_ms} (docs/protocol.md, "acquire"): at_ms is the
// key's PEXPIRETIME, and left_us the µs from the script's clock to at_ms +
// 1 ms, which lies within a millisecond of the reply's own PTTL.
void check_expiry_reply(const redis_server& server, const std::string& key,
                        const std::vector<std::string>& r) {
    REQUIRE(r.size() == 7);
    CHECK(r[0] == "0");
    const auto pttl = std::stoll(r[3]);
    const auto left_us = std::stoll(r[5]);
    REQUIRE(pttl > 0);
    CHECK(r[6] == server.cmd1({"PEXPIRETIME", key}));
    CHECK(left_us > (pttl - 1) * 1000);
    CHECK(left_us <= (pttl + 1) * 1000);
}

}  // namespace

TEST_CASE("fair_mutex: a refusal names the holder's expiry in the server's µs, as the mutex's does",
          "[fair][integration]") {
    redis_server server;
    const std::string m = lock_key("expiry:mutex");
    const std::string mutex_src(corolock::detail::acquire_script().source);
    REQUIRE(server.cmd({"EVAL", mutex_src, "2", m, m + ":fence", "A", "60000", "1", "1 h a"}).at(0) == "1");
    check_expiry_reply(server, m,
                       server.cmd({"EVAL", mutex_src, "2", m, m + ":fence", "B", "60000", "1", "2 h b"}));
    const std::string f = lock_key("expiry:fair");
    const std::string fair_src(corolock::detail::fair_acquire_script().source);
    auto fair = [&](const std::string& owner) {
        return server.cmd({"EVAL", fair_src, "4", f, f + ":fence", f + ":queue", f + ":entries", owner,
                           "5000", "1", "1 h " + owner, "30000", "7"});
    };
    REQUIRE(fair("A").at(0) == "1");
    // Queued; the holder's TTL (5 s) is shorter than the entry's renewal (10 s).
    check_expiry_reply(server, f, fair("B"));
    // No TTL: nothing to name.
    server.cmd({"PERSIST", m});
    const auto r = server.cmd({"EVAL", mutex_src, "2", m, m + ":fence", "B", "60000", "1", "2 h b"});
    REQUIRE(r.size() == 7);
    CHECK(r[5] == "-1");
    CHECK(r[6] == "-1");
}

// Six clients of one process, each taking the lock again as soon as it let
// go: the plain mutex lets two of them take turns while four starve
// (docs/safety.md); the fair one grants in strict rotation.
TEST_CASE("fair_mutex: six clients of one process take strict turns", "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    constexpr int clients = 6;
    constexpr int rounds = 5;
    std::vector<std::unique_ptr<corolock::client>> cs;
    for (int i = 0; i < clients; ++i)
        cs.push_back(std::make_unique<corolock::client>(ioc.get_executor(), config_for(server)));
    std::vector<int> order;
    int finished = 0;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        for (int i = 0; i < clients; ++i) {
            asio::co_spawn(ex, [&, i]() -> asio::awaitable<void> {
                corolock::fair_mutex m(*cs[static_cast<std::size_t>(i)], "rotation");
                for (int n = 0; n < rounds; ++n) {
                    auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 10s}, use_nothrow);
                    if (ec) break;
                    order.push_back(i);
                    co_await sleep_for(3ms);
                    co_await g.release();
                }
                ++finished;
            }, asio::detached);
        }
        const bool done = co_await eventually([&] { return finished == clients; }, 15s);
        REQUIRE(done);
    }, 20s);
    for (auto& c : cs) c->stop();
    INFO("grant order: " << [&] {
        std::string s;
        for (int i : order) s += std::to_string(i);
        return s;
    }());
    REQUIRE(order.size() == static_cast<std::size_t>(clients * rounds));
    // Once all six have queued, each grant goes to the client that had it
    // six grants before: the one that waited longest.
    for (std::size_t i = 2 * clients; i < order.size(); ++i) CHECK(order[i] == order[i - clients]);
}

TEST_CASE("fair_mutex: a release hands the lock over without another acquire",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    // Every script run, by EVALSHA or by EVAL.
    auto script_calls = [&] {
        const std::string info = server.cmd1({"INFO", "commandstats"});
        long n = 0;
        for (const std::string stat : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="})
            if (const auto pos = info.find(stat); pos != std::string::npos)
                n += std::stol(info.substr(pos + stat.size()));
        return n;
    };
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "handoff"), waiter(c, "handoff");
        // One round first, so that the scripts are cached on the server.
        auto warm = co_await holder.acquire({.lease = 30s});
        co_await warm.release();
        auto g = co_await holder.acquire({.lease = 30s});
        std::optional<guard> got;
        error_code got_ec;
        bool done = false;
        waiter.async_acquire({.lease = 30s}, [&](error_code ec, guard g2) {
            got_ec = ec;
            got = std::move(g2);
            done = true;
        });
        const bool queued_up =
            co_await eventually([&] { return queued(server, "handoff").size() == 1; }, 2s);
        REQUIRE(queued_up);
        co_await sleep_for(50ms);  // its second attempt (after SUBSCRIBE) is answered
        const long before = script_calls();
        const auto release_called = std::chrono::steady_clock::now();
        co_await g.release();
        const bool granted = co_await eventually([&] { return done; }, 2s);
        REQUIRE(granted);
        REQUIRE_FALSE(got_ec);
        // The release, and nothing else: the waiter did not ask again.
        CHECK(script_calls() - before == 1);
        CHECK(got->token() > g.token());
        CHECK(server.cmd1({"HGET", lock_key("handoff"), "owner"}) == waiter.owner_id());
        CHECK(got->lease_deadline() > std::chrono::steady_clock::now() + 25s);
        // The deadline is measured from the waiter's last attempt (sent
        // before the release was even called), never from the message's
        // arrival: earlier than release call + lease - drift.
        CHECK(got->lease_deadline() <
              release_called + 30s - corolock::detail::watchdog_schedule::drift(30s));
        co_await got->release();
        CHECK(server.cmd1({"EXISTS", lock_key("handoff"), queue_key("handoff")}) == "0");
    });
    c.stop();
}

TEST_CASE("fair_mutex: a cancelled or timed-out wait leaves the queue at once",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "leave"), a(c, "leave"), b(c, "leave"), t(c, "leave");
        auto g = co_await holder.acquire({.lease = 30s});
        asio::cancellation_signal cancel_a;
        std::optional<error_code> a_ec, b_ec;
        std::optional<guard> b_guard;
        a.async_acquire({.lease = 30s}, asio::bind_cancellation_slot(
                                            cancel_a.slot(), [&](error_code ec, guard) { a_ec = ec; }));
        {
            const bool in = co_await eventually([&] { return queued(server, "leave").size() == 1; }, 2s);
            REQUIRE(in);
        }
        b.async_acquire({.lease = 30s}, [&](error_code ec, guard g2) {
            b_ec = ec;
            b_guard = std::move(g2);
        });
        {
            const bool in = co_await eventually([&] { return queued(server, "leave").size() == 2; }, 2s);
            REQUIRE(in);
        }
        CHECK(queued(server, "leave") == std::vector<std::string>{a.owner_id(), b.owner_id()});
        // A wait that times out leaves too.
        auto [t_ec, t_guard] = co_await t.async_acquire({.lease = 30s, .wait = 100ms}, use_nothrow);
        CHECK(t_ec == error::wait_timeout);
        cancel_a.emit(asio::cancellation_type::terminal);
        {
            const bool gone = co_await eventually(
                [&] { return queued(server, "leave") == std::vector<std::string>{b.owner_id()}; }, 2s);
            CHECK(gone);
        }
        CHECK(a_ec == asio::error::operation_aborted);
        co_await g.release();
        const bool granted = co_await eventually([&] { return b_ec.has_value(); }, 2s);
        REQUIRE(granted);
        CHECK_FALSE(*b_ec);
        co_await b_guard->release();
    });
    c.stop();
}

TEST_CASE("fair_mutex: a waiter whose process stopped is skipped after its entry lease",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc, dead_ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    corolock::client dead_client(dead_ioc.get_executor(), config_for(server));
    corolock::fair_mutex dead(dead_client, "skip");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "skip"), live(c, "skip");
        auto g = co_await holder.acquire({.lease = 30s});
        // The dead waiter queues first, then its io_context stops running:
        // it neither renews its entry (lease 400 ms: min(lease, 2 s)) nor
        // answers anything.
        dead.async_acquire({.lease = 400ms}, [](error_code, guard) {});
        for (int i = 0; i < 200 && queued(server, "skip").empty(); ++i) dead_ioc.run_for(5ms);
        REQUIRE(queued(server, "skip") == std::vector<std::string>{dead.owner_id()});
        std::optional<error_code> live_ec;
        std::optional<guard> live_guard;
        live.async_acquire({.lease = 30s}, [&](error_code ec, guard g2) {
            live_ec = ec;
            live_guard = std::move(g2);
        });
        co_await sleep_for(600ms);
        co_await g.release();
        const bool granted = co_await eventually([&] { return live_ec.has_value(); }, 2s);
        REQUIRE(granted);
        CHECK_FALSE(*live_ec);
        CHECK(server.cmd1({"HGET", lock_key("skip"), "owner"}) == live.owner_id());
        co_await live_guard->release();
    });
    c.stop();
    dead_client.stop();
    dead_ioc.restart();
    dead_ioc.run_for(500ms);
}

TEST_CASE("fair_mutex: status reports the holder's levels", "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex m(c, "fair-status");
        auto g1 = co_await m.acquire({.lease = 30s});
        auto g2 = co_await m.acquire({.lease = 30s});
        auto [ec, st] = co_await corolock::async_lock_status(c, "fair-status", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(st.held);
        CHECK(st.owner == m.owner_id());
        CHECK(st.levels == 2);
        co_await g2.release();
        co_await g1.release();
    });
    c.stop();
}

TEST_CASE("fair_mutex: deleting the key behind the holder fires until_lost",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex m(c, "fair-lost");
        auto g = co_await m.acquire({.lease = 900ms});  // renewal every 300 ms
        server.cmd({"DEL", lock_key("fair-lost")});
        auto result = co_await (g.until_lost() || sleep_for(3s));
        CHECK(result.index() == 0);
        CHECK(g.lost());
    });
    c.stop();
}

// Issue 43, item 1. H holds; its key is removed behind it (break, eviction);
// W takes the lock; H re-enters through the same handle and queues; W's
// release hands the lock to H. That grant is not a re-entry of H's first
// tenure (the fair scripts queue only an owner that does not hold): the
// first guard is told it lost the lock, and the grant starts a tenure of
// its own, never joined to the lost one.
TEST_CASE("fair_mutex: a handoff to a re-entry after the key was removed never joins the lost tenure",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    corolock::client c2(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::string name = "fair-rejoin";
        corolock::fair_mutex h(c, name), w(c2, name);
        // Long leases: no renewal comes before the handoff, so only the
        // handoff itself can tell H that its first tenure is gone.
        auto g1 = co_await h.acquire({.lease = 30s});
        server.cmd({"DEL", lock_key(name)});  // removed behind the holder
        auto gw = co_await w.acquire({.lease = 30s});
        std::optional<guard> g2;
        error_code ec2;
        h.async_acquire({.lease = 30s, .wait = 20s}, [&](error_code ec, guard g) {
            ec2 = ec;
            g2 = std::move(g);
        });
        const bool queued_h = co_await eventually(
            [&] { return queued(server, name) == std::vector<std::string>{h.owner_id()}; }, 5s);
        REQUIRE(queued_h);
        co_await gw.release();  // hands the lock to H's queued re-entry
        const bool answered = co_await eventually([&] { return g2.has_value(); }, 15s);
        REQUIRE(answered);
        REQUIRE_FALSE(ec2);
        // The first guard was told, at the latest when the grant came.
        CHECK(g1.lost());
        // The new guard holds a tenure of its own, with a fresh token, and
        // the server agrees that H holds.
        CHECK_FALSE(g2->lost());
        CHECK(g2->token() > gw.token());
        CHECK(server.cmd1({"HGET", lock_key(name), "owner"}) == h.owner_id());
        const auto released = co_await g2->release();
        CHECK_FALSE(released);
        CHECK(server.cmd1({"EXISTS", lock_key(name)}) == "0");
    }, 40s);
    c.stop();
    c2.stop();
}

// Issue 43, item 1, the race. H's tenure is lost while W holds (its key was
// removed behind it; its next renewal finds W's), so H sends the clean-up of
// that tenure; W's release hands the lock to H's queued re-entry before the
// clean-up reaches the server (the proxy holds it back); X queued after H.
// H must not take that grant while the clean-up is undecided, and the
// clean-up must remove only the lost tenure's own level: removing all of
// H's would hand the lock on to X while H's client counts it held.
TEST_CASE("fair_mutex: a lost tenure's clean-up never removes a grant handed to it since",
          "[fair][integration]") {
    redis_server server;
    fault_proxy proxy(server.port());
    asio::io_context ioc;
    auto hcfg = config_for(server);
    hcfg.port = proxy.port();
    // No command timeout while H's requests are held back: its connection
    // stays up, so the handoff's message reaches it and what it sends waits
    // behind the clean-up until the proxy lets it through.
    hcfg.command_timeout = 20s;
    corolock::client hc(ioc.get_executor(), hcfg);
    corolock::client wc(ioc.get_executor(), config_for(server));
    corolock::client xc(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::string name = "fair-cleanup";
        corolock::fair_mutex h(hc, name), w(wc, name), x(xc, name);
        auto g1 = co_await h.acquire({.lease = 1500ms});  // renewed every 500 ms
        server.cmd({"DEL", lock_key(name)});
        auto gw = co_await w.acquire({.lease = 30s});
        std::optional<guard> g2, gx;
        h.async_acquire({.lease = 30s, .wait = 25s}, [&](error_code, guard g) { g2 = std::move(g); });
        const bool h_queued = co_await eventually(
            [&] { return queued(server, name) == std::vector<std::string>{h.owner_id()}; }, 5s);
        REQUIRE(h_queued);
        x.async_acquire({.lease = 30s, .wait = 25s}, [&](error_code, guard g) { gx = std::move(g); });
        const bool x_queued = co_await eventually(
            [&] { return queued(server, name).size() == 2; }, 5s);
        REQUIRE(x_queued);
        // The clean-up is the fair release script, sent by source (EVAL)
        // with H's owner id: from it on, nothing of H's reaches the server
        // until resume().
        const std::string owner = h.owner_id();
        const auto& release = corolock::detail::fair_release_script(false);
        proxy.pause_at_next([owner, &release](const fault_proxy::command_args& a) {
            return a.size() > 1 && (a[0] == "EVAL" || a[0] == "eval") && a[1] == release.source &&
                   std::find(a.begin(), a.end(), owner) != a.end();
        });
        const bool lost = co_await eventually([&] { return g1.lost(); }, 10s);
        REQUIRE(lost);
        const bool held = co_await eventually([&] { return !proxy.pause_armed(); }, 5s);
        REQUIRE(held);
        // W's release hands the lock to H's entry, on the server, before
        // H's clean-up runs there.
        co_await gw.release();
        const bool handed = co_await eventually(
            [&] { return server.cmd1({"HGET", lock_key(name), "owner"}) == h.owner_id(); }, 5s);
        REQUIRE(handed);
        // H's client hears of the grant: it gives it back (a second request
        // held behind the clean-up), or, wrongly, takes it.
        const bool answered = co_await eventually(
            [&] { return g2.has_value() || proxy.unanswered().size() >= 2; }, 5s);
        CHECK(answered);
        CHECK_FALSE(g2.has_value());
        proxy.resume(fault_proxy::direction::to_server);
        // X gets the lock in turn; at that moment H holds nothing.
        const bool x_granted = co_await eventually([&] { return gx.has_value(); }, 20s);
        REQUIRE(x_granted);
        CHECK_FALSE((g2.has_value() && !g2->lost()));
        CHECK(server.cmd1({"HGET", lock_key(name), "owner"}) == x.owner_id());
        co_await gx->release();
        const bool h_granted = co_await eventually([&] { return g2.has_value(); }, 20s);
        CHECK(h_granted);
        if (g2) co_await g2->release();
    }, 60s);
    hc.stop();
    wc.stop();
    xc.stop();
}

TEST_CASE("fair_mutex: a try leaves no entry, and a mutex and a fair mutex refuse each other",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "try"), waiter(c, "try"), trier(c, "try");
        auto g = co_await holder.acquire({.lease = 30s});
        auto [ec1, t1] = co_await trier.async_try_acquire({}, use_nothrow);
        CHECK(ec1 == error::lock_held);
        std::optional<guard> w;
        waiter.async_acquire({.lease = 30s}, [&](error_code, guard g2) { w = std::move(g2); });
        // The try's attempt left no entry behind: the waiter is alone.
        const bool alone = co_await eventually(
            [&] { return queued(server, "try") == std::vector<std::string>{waiter.owner_id()}; }, 2s);
        CHECK(alone);
        co_await g.release();
        const bool granted = co_await eventually([&] { return w.has_value(); }, 2s);
        REQUIRE(granted);
        co_await w->release();
        // A plain mutex holding the name: the fair mutex is refused.
        corolock::mutex plain(c, "try");
        auto p = co_await plain.acquire({.lease = 30s});
        auto [ec2, t2] = co_await trier.async_try_acquire({}, use_nothrow);
        CHECK(ec2 == error::wrong_type);
        co_await p.release();
        // And the other way round: a plain mutex of a name a fair mutex
        // holds is refused at once, not left waiting for the lease.
        auto f = co_await holder.acquire({.lease = 30s});
        auto [ec3, t3] = co_await plain.async_try_acquire({}, use_nothrow);
        CHECK(ec3 == error::wrong_type);
        auto [ec4, t4] = co_await plain.async_acquire({.lease = 30s, .wait = 500ms}, use_nothrow);
        CHECK(ec4 == error::wrong_type);
        co_await f.release();
    });
    c.stop();
}

TEST_CASE("fair_mutex: waiters of several processes are granted in their order of arrival",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    constexpr int processes = 4;
    std::vector<std::unique_ptr<child_process>> workers;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "arrival");
        auto g = co_await holder.acquire({.lease = 30s});
        // One at a time: each worker is in the queue before the next starts.
        for (int i = 0; i < processes; ++i) {
            workers.push_back(std::make_unique<child_process>(std::vector<std::string>{
                COROLOCK_TEST_WORKER, "fair-wait", client_url(server), "arrival", "20000"}));
            const auto n = static_cast<std::size_t>(i + 1);
            const bool in = co_await eventually([&] { return queued(server, "arrival").size() == n; }, 10s);
            REQUIRE(in);
        }
        co_await g.release();
    }, 30s);
    c.stop();
    // Each took the lock and released it: tokens rise in the order of arrival.
    std::vector<unsigned long long> tokens;
    for (auto& w : workers) {
        const auto line = wait_for_line(*w, "acquired", 10s);
        INFO("worker output: " << w->output());
        REQUIRE_FALSE(line.empty());
        std::istringstream in(line);
        std::string word;
        unsigned long long token = 0;
        in >> word >> token;
        tokens.push_back(token);
    }
    for (std::size_t i = 1; i < tokens.size(); ++i) CHECK(tokens[i] > tokens[i - 1]);
}
