// corolock::election against a live redis-server: the hand-over at a
// resignation (woken by the release, not polled), epochs that are the fair
// mutex's tokens, proclaim refused after a loss, observers that follow the
// terms in order, and what a cancelled campaign leaves (nothing).
#include <corolock/corolock.hpp>
#include <corolock/election.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using corolock::leadership;
using corolock::leader_state;
using namespace corolock::test;

namespace {

std::string elect_queue_key(const std::string& name) { return "corolock:{" + name + "}:queue"; }
std::string elect_record_key(const std::string& name) { return "corolock:{" + name + "}:leader"; }

std::size_t elect_queued(const redis_server& server, const std::string& name) {
    return server.cmd({"ZRANGE", elect_queue_key(name), "0", "-1"}).size();
}

// Every script run on the server, by EVALSHA or by EVAL.
long elect_script_calls(const redis_server& server) {
    const std::string info = server.cmd1({"INFO", "commandstats"});
    long n = 0;
    for (const std::string stat : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="})
        if (const auto pos = info.find(stat); pos != std::string::npos)
            n += std::stol(info.substr(pos + stat.size()));
    return n;
}

}  // namespace

TEST_CASE("election: the next candidate leads as the leader resigns, woken by the release",
          "[election][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c1(ioc.get_executor(), config_for(server));
    corolock::client c2(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election e1(c1, "primary"), e2(c2, "primary");
        auto t1 = co_await e1.campaign("a", {.lease = 30s});
        REQUIRE(t1);
        CHECK(t1.value() == "a");
        std::optional<leadership> t2;
        error_code t2_ec;
        e2.async_campaign("b", {.lease = 30s, .wait = 20s}, [&](error_code ec, leadership l) {
            t2_ec = ec;
            t2 = std::move(l);
        });
        // Queued, subscribed to the unlock channel, and its attempt after
        // the SUBSCRIBE answered: the candidate is waiting, sending nothing.
        const bool waiting = co_await eventually(
            [&] {
                return elect_queued(server, "primary") == 1 &&
                       server.cmd({"PUBSUB", "NUMSUB", "corolock:{primary}:unlock"}).at(1) == "1" &&
                       c2.metrics().commands_in_flight == 0;
            },
            5s);
        REQUIRE(waiting);
        const auto sent_before = c2.stats().commands_sent;
        const auto ec = co_await t1.resign();
        CHECK_FALSE(ec);
        CHECK_FALSE(t1);
        // The release granted the name to the queued candidate in its own
        // script: the lock is the candidate's as the resignation returns.
        CHECK(server.cmd1({"HEXISTS", corolock::test::lock_key("primary"), "owner"}) == "1");
        const bool led = co_await eventually([&] { return t2.has_value(); }, 5s);
        REQUIRE(led);
        REQUIRE_FALSE(t2_ec);
        CHECK(t2->epoch() > t1.epoch());
        CHECK(t2->value() == "b");
        // Granted by the release's script and told by its message, not by a
        // retry of its own: the candidate sent two commands, the UNSUBSCRIBE
        // of the unlock channel it no longer waits on, and its proclaim.
        CHECK(c2.stats().commands_sent - sent_before == 2);
        const auto m1 = c1.metrics();
        const auto m2 = c2.metrics();
        CHECK(m1.terms_won == 1);
        CHECK(m1.resignations == 1);
        CHECK(m1.leaderships_held == 0);
        CHECK(m2.terms_won == 1);
        CHECK(m2.leaderships_held == 1);
        const auto current = co_await e1.async_leader(asio::use_awaitable);
        REQUIRE(current);
        CHECK(current->epoch == t2->epoch());
        CHECK(current->value == "b");
        REQUIRE(current->holder);
        CHECK(current->holder->pid == ::getpid());
        co_await t2->resign();
        const auto after = co_await e1.async_leader(asio::use_awaitable);
        CHECK_FALSE(after);
        // Nothing left but the token counter.
        CHECK(server.cmd1({"EXISTS", corolock::test::lock_key("primary"), elect_queue_key("primary"),
                           elect_record_key("primary")}) == "0");
    });
    c1.stop();
    c2.stop();
}

TEST_CASE("election: epochs are the fair mutex's tokens and strictly increase",
          "[election][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election a(c, "epochs"), b(c, "epochs");
        std::uint64_t last = 0;
        for (int i = 0; i < 4; ++i) {
            auto& e = i % 2 == 0 ? a : b;
            auto t = co_await e.campaign("term " + std::to_string(i), {.lease = 10s});
            CHECK(t.epoch() > last);
            CHECK(server.cmd1({"HGET", corolock::test::lock_key("epochs"), "fence"}) ==
                  std::to_string(t.epoch()));
            last = t.epoch();
            co_await t.resign();
        }
        CHECK(c.metrics().terms_won == 4);
        CHECK(c.metrics().resignations == 4);
    });
    c.stop();
}

TEST_CASE("election: proclaim only while leader, refused on the server after a loss",
          "[election][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election e(c, "proclaim");
        auto t = co_await e.campaign("one", {.lease = 30s});
        co_await t.proclaim("two");
        CHECK(t.value() == "two");
        CHECK(server.cmd1({"HGET", elect_record_key("proclaim"), "value"}) == "two");
        // The lock taken away behind the leader's back (an operator's break,
        // a failover that lost it): the server refuses the proclaim before
        // the watchdog has noticed.
        server.cmd({"DEL", corolock::test::lock_key("proclaim")});
        auto [ec] = co_await t.async_proclaim("three", use_nothrow);
        CHECK(ec == error::lock_lost);
        CHECK(server.cmd1({"HGET", elect_record_key("proclaim"), "value"}) == "two");
        CHECK(t.value() == "two");
        const auto leader_now = co_await e.async_leader(asio::use_awaitable);
        CHECK_FALSE(leader_now);
        const auto gone = co_await t.resign();
        CHECK(gone);
        auto [again] = co_await t.async_proclaim("four", use_nothrow);
        CHECK(again == error::released);
        auto [twice] = co_await t.async_resign(use_nothrow);
        CHECK(twice == error::released);

        // A term whose loss is known locally refuses without asking.
        auto u = co_await e.campaign("five", {.lease = 30s, .renew_interval = 200ms});
        server.cmd({"DEL", corolock::test::lock_key("proclaim")});
        auto [lost] = co_await u.async_until_lost(use_nothrow);
        CHECK(lost == error::lock_lost);
        CHECK(u.lost());
        // The lost tenure's clean-up done first, so that nothing else runs.
        auto [drained] = co_await c.async_drain(5s, use_nothrow);
        CHECK_FALSE(drained);
        const long before = elect_script_calls(server);
        auto [after_loss] = co_await u.async_proclaim("six", use_nothrow);
        CHECK(after_loss == error::lock_lost);
        CHECK(elect_script_calls(server) == before);
        const bool counted = co_await eventually([&] { return c.metrics().leaderships_lost == 1; }, 5s);
        CHECK(counted);
        CHECK(c.metrics().leaderships_held == 0);
    });
    c.stop();
}

TEST_CASE("election: an observer sees each term in order, and no leader at the end",
          "[election][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c1(ioc.get_executor(), config_for(server));
    corolock::client c2(ioc.get_executor(), config_for(server));
    corolock::client c3(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election e1(c1, "watched"), e2(c2, "watched"), watcher(c3, "watched");
        auto first = co_await watcher.async_observe(asio::use_awaitable);
        CHECK_FALSE(first);

        auto t1 = co_await e1.campaign("a", {.lease = 30s});
        auto s1 = co_await watcher.async_observe(asio::use_awaitable);
        REQUIRE(s1);
        CHECK(s1->epoch == t1.epoch());
        CHECK(s1->value == "a");

        co_await t1.proclaim("a2");
        auto s2 = co_await watcher.async_observe(asio::use_awaitable);
        REQUIRE(s2);
        CHECK(s2->epoch == t1.epoch());
        CHECK(s2->value == "a2");

        std::optional<leadership> t2;
        e2.async_campaign("b", {.lease = 30s, .wait = 20s},
                          [&](error_code ec, leadership l) {
                              if (!ec) t2 = std::move(l);
                          });
        const bool in_queue = co_await eventually([&] { return elect_queued(server, "watched") == 1; }, 5s);
        REQUIRE(in_queue);
        co_await t1.resign();
        // Between the two terms the observer may see no leader; it never
        // sees the first term again, and reaches the second.
        std::vector<leader_state> seen;
        for (int i = 0; i < 3; ++i) {
            auto s = co_await watcher.async_observe(asio::use_awaitable);
            seen.push_back(s);
            if (s && s->value == "b") break;
        }
        REQUIRE(seen.back());
        REQUIRE(t2);
        CHECK(seen.back()->epoch == t2->epoch());
        for (const auto& s : seen)
            if (s) CHECK(s->epoch > t1.epoch());

        co_await t2->resign();
        auto none = co_await watcher.async_observe(asio::use_awaitable);
        CHECK_FALSE(none);
        CHECK(c3.metrics().terms_won == 0);
    });
    c1.stop();
    c2.stop();
    c3.stop();
}

TEST_CASE("election: a cancelled campaign leaves nothing on the server",
          "[election][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election leader(c, "cancel"), candidate(c, "cancel");
        auto t = co_await leader.campaign("L", {.lease = 30s});
        asio::cancellation_signal stop;
        std::optional<error_code> got;
        candidate.async_campaign("C", {.lease = 30s},
                                 asio::bind_cancellation_slot(stop.slot(), [&](error_code ec, leadership) {
                                     got = ec;
                                 }));
        const bool in_queue = co_await eventually([&] { return elect_queued(server, "cancel") == 1; }, 5s);
        REQUIRE(in_queue);
        stop.emit(asio::cancellation_type::terminal);
        const bool ended = co_await eventually([&] { return got.has_value(); }, 5s);
        REQUIRE(ended);
        CHECK(*got == asio::error::operation_aborted);
        // The give-up is sent as the wait ends.
        const bool left = co_await eventually([&] { return elect_queued(server, "cancel") == 0; }, 5s);
        CHECK(left);
        // A timed-out campaign likewise.
        auto [ec, none] = co_await candidate.async_campaign("C", {.lease = 30s, .wait = 100ms},
                                                           use_nothrow);
        CHECK(ec == error::wait_timeout);
        CHECK_FALSE(none);
        const bool left_too = co_await eventually([&] { return elect_queued(server, "cancel") == 0; }, 5s);
        CHECK(left_too);
        CHECK(server.cmd1({"HGET", elect_record_key("cancel"), "value"}) == "L");
        co_await t.resign();
        CHECK(server.cmd1({"EXISTS", elect_record_key("cancel")}) == "0");
    });
    c.stop();
}

TEST_CASE("election: bad input gets a clear error and sends nothing", "[election][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    CHECK_THROWS_AS(corolock::election(c, ""), boost::system::system_error);
    CHECK_THROWS_AS(corolock::election(c, "a{b}"), boost::system::system_error);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::election e(c, "bad");
        auto [too_long, none] = co_await e.async_campaign(
            std::string(corolock::max_leader_value_length + 1, 'x'), {}, use_nothrow);
        CHECK(too_long == error::invalid_argument);
        auto t = co_await e.campaign("ok", {.lease = 30s});
        // One term at a time per election.
        auto [twice, other] = co_await e.async_campaign("again", {.lease = 30s}, use_nothrow);
        CHECK(twice == error::invalid_argument);
        auto [long_proclaim] = co_await t.async_proclaim(
            std::string(corolock::max_leader_value_length + 1, 'x'), use_nothrow);
        CHECK(long_proclaim == error::invalid_argument);
        leadership empty;
        auto [empty_ec] = co_await empty.async_proclaim("x", use_nothrow);
        CHECK(empty_ec == error::released);
        co_await t.resign();
    });
    c.stop();
}
