// Conformance of corolock::election (docs/election.md) on every backend.
//
// On the Redis family (redis, sentinel, cluster), etcd, ZooKeeper and
// PostgreSQL:
//  - two candidates of two backends: the second waits, and leads as the
//    first resigns; its epoch is larger;
//  - an observer (a third backend, no candidate) sees the terms in order and
//    never an epoch older than one it saw, and no leader at the end;
//  - a resigned term's proclaim is refused;
//  - a won term and a resignation are counted before the campaign or the
//    resignation completes;
//  - with leases far longer than the case's bounds, a resignation wakes the
//    candidate queued behind (it does not look again at a lease's end or
//    fraction);
//  - a term broken from outside: no reader reports its record (nor once
//    another owner holds the name), and its proclaim is refused;
//  - a value over max_leader_value_length is refused before anything is
//    written: the name is not held and no leader is reported.
// On RedLock: campaign, leader and observe answer error::not_supported, as
// docs/election.md says.
#include "conformance/conformance.hpp"
#include "support/lock_testing.hpp"

#include <corolock/election.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using namespace corolock::test::conformance;

namespace {

bool has_election(const std::string& backend) {
    return backend == "redis" || backend == "sentinel" || backend == "cluster" ||
           backend == "etcd" || backend == "zk" || backend == "postgresql";
}

// Whether another candidate waits in line for `name`, looked at on the
// server (bounded: 250 looks, 20 ms apart).
asio::awaitable<bool> someone_queued(const corolock::backend& b, const std::string& name) {
    for (int i = 0; i < 250; ++i) {
        auto [ec, st] = co_await corolock::async_lock_status(b, name, use_nothrow);
        if (!ec && st.queued >= 1) co_return true;
        co_await sleep_for(20ms);
    }
    co_return false;
}

}  // namespace

TEST_CASE("election: candidates take turns, epochs rise, observers never go back",
          "[conformance][election]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b1(ioc.get_executor(), server->url());
    corolock::backend b2(ioc.get_executor(), server->url());
    corolock::backend b3(ioc.get_executor(), server->url());
    const bool supported = has_election(server->backend());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election e1(b1, "conf-elect"), e2(b2, "conf-elect"), watcher(b3, "conf-elect");
        if (!supported) {
            auto [ec, t] = co_await e1.async_campaign("a", {.lease = 5s, .wait = 1s}, use_nothrow);
            CHECK(ec == corolock::error::not_supported);
            CHECK_FALSE(t);
            auto [lec, l] = co_await watcher.async_leader(use_nothrow);
            CHECK(lec == corolock::error::not_supported);
            auto [oec, o] = co_await watcher.async_observe(use_nothrow);
            CHECK(oec == corolock::error::not_supported);
            co_return;
        }
        std::vector<std::uint64_t> observed;
        bool ended = false;
        auto first = co_await watcher.async_observe(asio::use_awaitable);
        CHECK_FALSE(first);

        auto t1 = co_await e1.campaign("a", {.lease = 10s, .wait = 10s});
        // Counted before the campaign completed, on every backend.
        CHECK(b1.metrics().terms_won == 1);
        CHECK(b1.metrics().leaderships_held == 1);
        std::optional<corolock::leadership> t2;
        e2.async_campaign("b", {.lease = 10s, .wait = 20s},
                          [&](corolock::error_code ec, corolock::leadership l) {
                              if (!ec) t2 = std::move(l);
                          });
        // The observer follows until it has seen the second term.
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                for (int i = 0; i < 6; ++i) {
                    auto [ec, s] = co_await watcher.async_observe(use_nothrow);
                    if (ec) break;
                    if (s) observed.push_back(s->epoch);
                    if (s && s->value == "b") break;
                }
                ended = true;
            },
            asio::detached);
        const bool saw_first = co_await eventually([&] { return !observed.empty(); }, 10s);
        REQUIRE(saw_first);
        CHECK(observed.front() == t1.epoch());
        const auto ec = co_await t1.resign();
        CHECK_FALSE(ec);
        CHECK(b1.metrics().resignations == 1);
        CHECK(b1.metrics().leaderships_held == 0);
        const bool led = co_await eventually([&] { return t2.has_value(); }, 10s);
        REQUIRE(led);
        CHECK(t2->epoch() > t1.epoch());
        CHECK(b2.metrics().terms_won == 1);
        const bool followed = co_await eventually([&] { return ended; }, 10s);
        REQUIRE(followed);
        REQUIRE_FALSE(observed.empty());
        CHECK(observed.back() == t2->epoch());
        for (std::size_t i = 1; i < observed.size(); ++i) CHECK(observed[i] >= observed[i - 1]);
        auto [late] = co_await t1.async_proclaim("again", use_nothrow);
        CHECK(late == corolock::error::released);
        co_await t2->resign();
        auto last = co_await watcher.async_observe(asio::use_awaitable);
        CHECK_FALSE(last);
    });
    b1.stop();
    b2.stop();
    b3.stop();
}

TEST_CASE("election: a resignation wakes the queued candidate, and a broken term is refused",
          "[conformance][election]") {
    auto server = start_server();
    if (!has_election(server->backend())) return;  // the case above checks the refusal
    asio::io_context ioc;
    corolock::backend b1(ioc.get_executor(), server->url());
    corolock::backend b2(ioc.get_executor(), server->url());
    corolock::backend b3(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::string name = "conf-elect-handover";
        corolock::election e1(b1, name), e2(b2, name), reader(b3, name);
        // Leases far past the bounds below: a candidate that looked again
        // only at its lease's end (or a fraction of it) would not lead in
        // time.
        auto t1 = co_await e1.campaign("a", {.lease = 90s, .wait = 10s});
        std::optional<corolock::leadership> t2;
        e2.async_campaign("b", {.lease = 90s, .wait = 60s},
                          [&](corolock::error_code ec, corolock::leadership l) {
                              if (!ec) t2 = std::move(l);
                          });
        const bool in_line = co_await someone_queued(b3, name);
        REQUIRE(in_line);
        CHECK_FALSE(t2);
        auto first = co_await reader.async_leader(asio::use_awaitable);
        REQUIRE(first);
        CHECK(first->epoch == t1.epoch());
        CHECK(first->value == "a");
        const auto rec = co_await t1.resign();
        CHECK_FALSE(rec);
        const bool led = co_await eventually([&] { return t2.has_value(); }, 10s);
        REQUIRE(led);
        CHECK(t2->epoch() > t1.epoch());

        co_await t2->proclaim("b2");
        auto now = co_await reader.async_leader(asio::use_awaitable);
        REQUIRE(now);
        CHECK(now->epoch == t2->epoch());
        CHECK(now->value == "b2");
        // Broken from outside: the record left behind is not the live
        // term's, and the term may write no more.
        auto [bec, removed] = co_await corolock::async_break_lock(b3, name, use_nothrow);
        REQUIRE_FALSE(bec);
        auto gone = co_await reader.async_leader(asio::use_awaitable);
        CHECK_FALSE(gone);
        auto [pec] = co_await t2->async_proclaim("b3", use_nothrow);
        CHECK(pec == corolock::error::lock_lost);
        auto still_gone = co_await reader.async_leader(asio::use_awaitable);
        CHECK_FALSE(still_gone);
        // The name held again, by a plain lock (no term): the broken term's
        // record, still on the server, is not this holder's.
        corolock::mutex other(b3, name);
        auto g = co_await other.acquire({.lease = 10s, .wait = 10s});
        auto foreign = co_await reader.async_leader(asio::use_awaitable);
        CHECK_FALSE(foreign);
        co_await g.async_release(asio::use_awaitable);
    });
    b1.stop();
    b2.stop();
    b3.stop();
}

TEST_CASE("election: an over-long value is refused and leaves nothing on the server",
          "[conformance][election]") {
    auto server = start_server();
    if (!has_election(server->backend())) return;  // the first case checks the refusal
    asio::io_context ioc;
    corolock::backend b1(ioc.get_executor(), server->url());
    corolock::backend b2(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::string name = "conf-elect-long";
        corolock::election e1(b1, name), reader(b2, name);
        const std::string too_long(corolock::max_leader_value_length + 1, 'v');
        auto [ec, t] = co_await e1.async_campaign(too_long, {.lease = 10s, .wait = 1s}, use_nothrow);
        CHECK(ec == corolock::error::invalid_argument);
        CHECK_FALSE(t);
        auto [sec, st] = co_await corolock::async_lock_status(b2, name, use_nothrow);
        REQUIRE_FALSE(sec);
        CHECK_FALSE(st.held);
        auto none = co_await reader.async_leader(asio::use_awaitable);
        CHECK_FALSE(none);
        // The longest value is taken, and read back byte for byte.
        std::string longest(corolock::max_leader_value_length, 'w');
        longest[0] = '\0';
        longest[1] = '\xff';
        auto term = co_await e1.campaign(longest, {.lease = 10s, .wait = 10s});
        auto now = co_await reader.async_leader(asio::use_awaitable);
        REQUIRE(now);
        CHECK(now->epoch == term.epoch());
        CHECK(now->value == longest);
        auto [too] = co_await term.async_proclaim(too_long, use_nothrow);
        CHECK(too == corolock::error::invalid_argument);
        auto same = co_await reader.async_leader(asio::use_awaitable);
        REQUIRE(same);
        CHECK(same->value == longest);
        co_await term.resign();
    });
    b1.stop();
    b2.stop();
}
