// Sentinel failover with locks held and waited on (docs/topologies.md,
// "Redis Sentinel"): the primary is SIGKILLed, the Sentinels promote a
// replica, and the clients follow +switch-master to it. Real processes: a
// primary, two replicas and three Sentinels (support/sentinel_fleet.hpp).
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/child_process.hpp"
#include "support/history.hpp"
#include "support/lock_testing.hpp"
#include "support/sentinel_fleet.hpp"
#include "support/sentinel_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace h = corolock::test::history;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error;
using corolock::error_code;
using steady = std::chrono::steady_clock;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

long long ns_of(steady::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double ms_between(long long from_ns, long long to_ns) {
    return static_cast<double>(to_ns - from_ns) / 1e6;
}

struct event_log {
    std::vector<h::event> events;
    h::event& add(const std::string& kind, int task, std::uint64_t token = 0) {
        h::event e;
        e.ev = kind;
        e.t = mono_ns();
        e.pid = ::getpid();
        e.task = task;
        e.lock = "failover";
        e.token = token;
        events.push_back(std::move(e));
        return events.back();
    }
};

// An election's candidate as a lock: a campaign is its acquire, the term's
// epoch its token, a resign its release.
struct candidate {
    corolock::election e;
    candidate(corolock::client& c, const std::string& name) : e(c, name) {}
    template <class Token>
    auto async_acquire(corolock::lock_options opts, Token&& token) {
        return e.async_campaign("leader", opts, std::forward<Token>(token));
    }
};
std::uint64_t token_of(const corolock::guard& g) { return g.token(); }
std::uint64_t token_of(const corolock::leadership& l) { return l.epoch(); }
asio::awaitable<error_code> give_up(corolock::guard& g) { return g.release(); }
asio::awaitable<error_code> give_up(corolock::leadership& l) { return l.resign(); }

// One lock client's cycles (a corolock::mutex, or a candidate's terms):
// acquire, hold a little, release; renewals and the lost signal logged as
// they happen.
template <class Lock = corolock::mutex>
asio::awaitable<void> actor(corolock::client& c, int task, steady::time_point end, event_log& log,
                            const bool& stop) {
    std::mt19937 rng(static_cast<unsigned>(task) * 7919u + 1u);
    Lock m(c, "failover");
    const corolock::lock_options terms{.lease = 3s, .wait = 20s};
    const auto lease_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(terms.lease).count();
    while (steady::now() < end && !stop) {
        log.add("acquire_invoked", task);
        auto [ec, g] = co_await m.async_acquire(terms, use_nothrow);
        if (ec) {
            log.add("acquire_failed", task).error = ec.message();
            co_await sleep_for(std::chrono::milliseconds(10 + rng() % 40));
            continue;
        }
        const auto token = token_of(g);
        auto& ok = log.add("acquire_ok", task, token);
        ok.deadline = ns_of(g.lease_deadline());
        ok.lease_ns = lease_ns;
        // Hold, watching the lost signal and the deadline's moves.
        const auto hold_until = steady::now() + std::chrono::milliseconds(20 + rng() % 200);
        auto deadline = g.lease_deadline();
        bool lost = false;
        while (steady::now() < hold_until && !lost) {
            auto r = co_await (g.async_until_lost(use_nothrow) || sleep_for(2ms));
            if (r.index() == 0 && std::get<0>(r) == std::tuple<error_code>{error::lock_lost}) {
                log.add("lost", task, token);
                lost = true;
            } else if (g.lease_deadline() != deadline) {
                deadline = g.lease_deadline();
                log.add("lease", task, token).deadline = ns_of(deadline);
            }
        }
        log.add("release_invoked", task, token);
        const auto r = co_await give_up(g);
        if (!r)
            log.add("release_ok", task, token);
        else
            log.add("release_failed", task, token).error = r.message();
    }
}

// SIGKILL of the primary while `tasks` actors of Lock (on four clients)
// take turns: their grants before and after the kill counted, printed
// (`what` names a grant), checked (more than `least` before and at least
// `least` after), and the history checked as a lock's (I1 to I5).
// Returns the grants in the order they were made: (when, token).
template <class Lock>
std::vector<std::pair<long long, std::uint64_t>> kill_primary_under_turns(int tasks,
                                                                          const char* what,
                                                                          std::size_t least) {
    sentinel_fleet fleet;
    asio::io_context ioc;
    std::vector<std::unique_ptr<corolock::client>> clients;
    for (int i = 0; i < 4; ++i)
        clients.push_back(std::make_unique<corolock::client>(ioc.get_executor(), quick_config_for(fleet)));
    event_log log;
    bool stop = false;
    long long killed_at = 0;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const auto end = steady::now() + 40s;
        for (int task = 0; task < tasks; ++task)
            asio::co_spawn(ioc,
                           actor<Lock>(*clients[static_cast<std::size_t>(task) % clients.size()],
                                       task, end, log, stop),
                           asio::detached);
        co_await sleep_for(1500ms);
        killed_at = mono_ns();
        fleet.server(0).kill9();
        // Until some grant after the kill, and a little more.
        const bool granted = co_await eventually(
            [&] {
                return std::any_of(log.events.begin(), log.events.end(), [&](const h::event& e) {
                    return e.ev == "acquire_ok" && e.t > killed_at;
                });
            },
            25000ms);
        CHECK(granted);
        // Grants go on on the new primary. (Not every task's: the lock is
        // not fair, and tasks of one process can starve for seconds, with or
        // without a failover.)
        co_await sleep_for(2s);
        stop = true;
        co_await sleep_for(3s);  // the last cycles end (holds are short)
    }, 60s);
    for (auto& c : clients) c->stop();

    long long first_after = 0;
    std::size_t before = 0, after = 0;
    std::vector<std::pair<long long, std::uint64_t>> grants;
    for (const auto& e : log.events) {
        if (e.ev != "acquire_ok") continue;
        grants.emplace_back(e.t, e.token);
        if (e.t < killed_at) {
            ++before;
        } else {
            ++after;
            if (first_after == 0 || e.t < first_after) first_after = e.t;
        }
    }
    if (first_after != 0)
        std::cout << "sentinel failover: kill -> first new " << what << " "
                  << ms_between(killed_at, first_after) << " ms (" << before << " before, "
                  << after << " after)\n";
    CHECK(before > least);
    CHECK(after >= least);
    const auto result = h::check_history(log.events);
    if (!result.ok()) {
        std::sort(log.events.begin(), log.events.end(),
                  [](const h::event& x, const h::event& y) { return x.t < y.t; });
        for (const auto& e : log.events) std::cerr << h::to_json(e) << "\n";
    }
    INFO(result.report());
    CHECK(result.ok());
    std::sort(grants.begin(), grants.end());
    return grants;
}

}  // namespace

TEST_CASE("sentinel failover: a lock the new primary lost fires lost at once, a waiter gets it",
          "[sentinel][fault]") {
    sentinel_fleet fleet;
    asio::io_context ioc;
    corolock::client holder(ioc.get_executor(), quick_config_for(fleet));
    corolock::client waiter(ioc.get_executor(), quick_config_for(fleet));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // A long lease: the watchdog's first renewal is 20 s away, so only
        // the re-verification after the failover can tell the holder soon.
        corolock::mutex held(holder, "moved");
        auto g = co_await held.acquire({.lease = 60s});
        corolock::mutex wanting(waiter, "moved");
        bool waiter_done = false;
        error_code waiter_ec;
        std::uint64_t waiter_token = 0;
        long long granted_at = 0;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto [ec, wg] = co_await wanting.async_acquire({.lease = 5s, .wait = 25s},
                                                               use_nothrow);
                granted_at = mono_ns();
                waiter_ec = ec;
                waiter_token = wg.token();
                if (!ec) co_await wg.release();
                waiter_done = true;
            },
            asio::detached);
        co_await sleep_for(200ms);  // the waiter is subscribed and waiting
        REQUIRE_FALSE(waiter_done);

        forget_on_replicas(fleet, "moved");
        const long long killed_at = mono_ns();
        fleet.server(0).kill9();

        // Bounded well below the 20 s renewal: the lost signal must come from
        // the re-verification on the new primary.
        auto lost = co_await (g.async_until_lost(use_nothrow) || sleep_for(15s));
        const long long lost_at = mono_ns();
        REQUIRE(lost.index() == 0);
        CHECK(std::get<0>(lost) == std::tuple<error_code>{error::lock_lost});
        const bool got = co_await eventually([&] { return waiter_done; }, 15000ms);
        REQUIRE(got);
        CHECK(waiter_ec == error_code{});
        // Fencing tokens rise across the failover, though the counter was lost.
        CHECK(waiter_token > g.token());
        std::cout << "sentinel failover: kill -> lost signal " << ms_between(killed_at, lost_at)
                  << " ms, kill -> waiter's grant " << ms_between(killed_at, granted_at)
                  << " ms\n";
    }, 60s);
    const auto new_primary = fleet.primary_index(1);
    CHECK(new_primary > 0);
}

TEST_CASE("sentinel failover: SIGKILL of the primary under contention keeps I1 and I2",
          "[sentinel][fault]") {
    kill_primary_under_turns<corolock::mutex>(6, "grant", 3);
}

// A failover is waited out, not reported as an outage: with the primary
// killed (kill -9), an acquire that begins while no Sentinel names a
// primary keeps trying through its wait and gets the lock from the
// promoted replica; so does `corolock run --wait`, started at the same
// moment (its reachability check and its acquire). Before, both ended at
// once with no_primary.
TEST_CASE("sentinel failover: an acquire and corolock run --wait wait a failover out",
          "[sentinel][fault][failover]") {
    sentinel_fleet fleet;
    const int old_primary = fleet.primary_index();
    REQUIRE(old_primary >= 0);
    fleet.server(static_cast<std::size_t>(old_primary)).kill9();
#ifdef COROLOCK_CLI
    child_process run({COROLOCK_CLI, "run", "--url", fleet.url(), "--wait", "25s",
                       "failover-cli", "--", "true"});
#endif
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), quick_config_for(fleet));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "failover-wait");
        auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 25s}, use_nothrow);
        INFO(ec.message() << ": " << c.last_error().message);
        REQUIRE_FALSE(ec);
        const auto r1_ = co_await g.release();
        CHECK_FALSE(r1_);
        c.stop();
    }, 60s);
    CHECK(fleet.primary_index() != old_primary);
#ifdef COROLOCK_CLI
    const auto status = run.wait_for(45s);
    INFO(run.output());
    REQUIRE(status);
    CHECK(child_process::exit_code(*status) == 0);
#endif
}

// Election through a failover: candidates on four clients campaign and
// resign while the primary is killed (kill -9). The terms checked as a
// lock's holders: at most one leader in the safe window, epochs strictly
// increasing in the order terms were won (the fence counter survives on the
// promoted replica), and terms are won again on the new primary.
TEST_CASE("sentinel failover: SIGKILL of the primary while candidates campaign keeps one leader and "
          "rising epochs",
          "[sentinel][fault][election]") {
    const auto terms = kill_primary_under_turns<candidate>(4, "leader", 2);
    for (std::size_t i = 1; i < terms.size(); ++i) {
        INFO("term " << i << " won at " << terms[i].first << " with epoch " << terms[i].second);
        CHECK(terms[i].second > terms[i - 1].second);
    }
}
