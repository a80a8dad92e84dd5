// The fair mutex's scripts (src/redis/lock/fair_scripts.cpp) against a live
// redis-server, run by raw EVAL through the client's command API: FIFO order,
// handoff in the release, entry leases, cancellation, and the three ways
// Redisson's fair lock failed (live waiters dropped, short waits meeting
// long leases, many dead waiters).
#include <corolock/corolock.hpp>
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/scripts.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"
#include "support/subscriber.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::reply;
using namespace corolock::test;
namespace d = corolock::detail;

namespace {

using corolock::test::use_nothrow;

// One fair lock's keys and raw script runs.
struct fair_lock {
    fair_lock(corolock::client& c, const std::string& name)
        : client(c), keys(name, corolock::detail::extra_keys::queue) {}

    corolock::client& client;
    d::lock_keys keys;

    std::string lock() const { return std::string(keys.lock()); }
    std::string queue() const { return std::string(keys.queue()); }
    std::string entries() const { return std::string(keys.entries()); }
    std::string channel() const { return std::string(keys.channel()); }

    asio::awaitable<reply> acquire(const std::string& owner, int level, std::int64_t lease_ms,
                                   std::int64_t entry_lease_ms, std::int64_t seq = 1) {
        auto [ec, r] = co_await client.async_exec(
            command{"EVAL", d::fair_acquire_script().source, "4", keys.lock(), keys.fence(),
                    keys.queue(), keys.entries(), owner, lease_ms, level,
                    "1 host label", entry_lease_ms, seq},
            use_nothrow);
        INFO(to_string(r));
        REQUIRE_FALSE(ec);
        co_return r;
    }
    // An acquire that must be granted, or must queue; a release that must
    // find another owner holding the lock (a cancelled wait).
    asio::awaitable<void> must_grant(const std::string& owner, int level, std::int64_t lease_ms,
                                     std::int64_t entry_lease_ms) {
        const auto r = co_await acquire(owner, level, lease_ms, entry_lease_ms);
        REQUIRE(r.elements.size() == 5);
        REQUIRE(r.elements[0].integer == 1);
    }
    asio::awaitable<void> must_queue(const std::string& owner, int level, std::int64_t lease_ms,
                                     std::int64_t entry_lease_ms) {
        const auto r = co_await acquire(owner, level, lease_ms, entry_lease_ms);
        REQUIRE(r.elements.size() == 5);
        REQUIRE(r.elements[0].integer == 0);
    }
    asio::awaitable<void> must_leave(const std::string& owner, int level) {
        const auto r = co_await release(owner, level);
        REQUIRE(r.elements.size() == 2);
        REQUIRE(r.elements[0].integer == -1);
    }
    asio::awaitable<reply> release(const std::string& owner, int level) {
        auto [ec, r] = co_await client.async_exec(
            command{"EVAL", d::fair_release_script().source, "4", keys.lock(), keys.fence(),
                    keys.queue(), keys.entries(), owner, level, keys.channel()},
            use_nothrow);
        INFO(to_string(r));
        REQUIRE_FALSE(ec);
        co_return r;
    }
};

bool granted(const reply& r) { return r.elements.size() == 5 && r.elements[0].integer == 1; }
bool queued(const reply& r) { return r.elements.size() == 5 && r.elements[0].integer == 0; }
std::int64_t status(const reply& r) { return r.elements.at(0).integer; }
std::int64_t receivers(const reply& r) { return r.elements.at(1).integer; }

// The grant a message names (the owner copied out of it), or a failed check.
struct named_grant {
    std::string owner;
    std::uint64_t level = 0;
    std::uint64_t token = 0;
    std::int64_t seq = 0;
};
named_grant grant_of(const std::string& payload) {
    INFO("message: " << payload);
    const auto g = d::parse_fair_grant(payload);
    REQUIRE(g);
    return {std::string(g->owner), g->level, g->token, g->seq};
}

// The owner ids: any distinct words serve the scripts.
const std::string H = "holder", A = "waiter-a", B = "waiter-b", C = "waiter-c";

}  // namespace

TEST_CASE("fair scripts: grants follow arrival order, each handed over by the release",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "fifo");
    subscriber sub(server, f.channel());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const auto held = co_await f.acquire(H, 1, 10'000, 5'000);
        REQUIRE(granted(held));
        CHECK(held.elements[4].integer == 1);  // a new tenure
        CHECK(server.cmd1({"HGET", f.lock(), "kind"}) == "fair");
        // C arrives first, then A, then B; C's renewals keep its place.
        for (const auto* who : {&C, &A, &B}) {
            const auto r = co_await f.acquire(*who, 7, 20'000, 5'000, 100);
            REQUIRE(queued(r));
            CHECK(r.elements[3].integer <= 5'000 / 3);  // the cap renews the entry in time
        }
        const auto renewed = co_await f.acquire(C, 7, 20'000, 5'000, 101);
        REQUIRE(queued(renewed));
        CHECK(server.cmd({"ZRANGE", f.queue(), "0", "-1"}) == std::vector<std::string>{C, A, B});

        // Each release hands the lock to the head: owner, level, token and TTL
        // set in the release, and a message naming it.
        std::string previous = H;
        int previous_level = 1;
        std::uint64_t last_token = static_cast<std::uint64_t>(held.elements[1].integer);
        for (const auto* who : {&C, &A, &B}) {
            const auto r = co_await f.release(previous, previous_level);
            CHECK(status(r) == 1);
            CHECK(receivers(r) == 1);
            const auto g = grant_of(sub.message());
            CHECK(g.owner == *who);
            CHECK(g.level == 7);
            CHECK(g.seq == (*who == C ? 101 : 100));  // the seq of the entry's last renewal
            CHECK(g.token > last_token);
            CHECK(server.cmd1({"HGET", f.lock(), "owner"}) == *who);
            CHECK(server.cmd1({"HGET", f.lock(), "l:7"}) == std::to_string(g.token));
            CHECK(server.cmd1({"HGET", f.lock(), "fence"}) == std::to_string(g.token));
            const auto pttl = std::stoll(server.cmd1({"PTTL", f.lock()}));
            CHECK(pttl > 19'000);  // the waiter's lease, not the entry's
            CHECK(pttl <= 20'000);
            last_token = g.token;
            previous = *who;
            previous_level = 7;
        }
        // The queue is empty: the last release publishes its owner id, as
        // the mutex's does, and no queue key is left.
        const auto last = co_await f.release(B, 7);
        CHECK(status(last) == 1);
        CHECK(sub.message() == B);
        CHECK(server.cmd1({"EXISTS", f.lock(), f.queue(), f.entries()}) == "0");
    });
    c.stop();
}

TEST_CASE("fair scripts: a free lock goes only to the head of the queue",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "head-only");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await f.must_grant(H, 1, 10'000, 5'000);
        co_await f.must_queue(A, 3, 10'000, 5'000);
        // The holder's lease ends without a release: nobody is handed the
        // lock, and a newcomer does not barge past the head.
        server.cmd({"DEL", f.lock()});
        const auto barging = co_await f.acquire(B, 4, 10'000, 5'000);
        CHECK(queued(barging));
        const auto head = co_await f.acquire(A, 3, 10'000, 5'000);
        CHECK(granted(head));
        CHECK(head.elements[4].integer == 1);
        CHECK(server.cmd({"ZRANGE", f.queue(), "0", "-1"}) == std::vector<std::string>{B});
        // Re-entry by the holder is granted at once, queue or not.
        const auto again = co_await f.acquire(A, 5, 10'000, 5'000);
        CHECK(granted(again));
        CHECK(again.elements[2].integer == 2);
    });
    c.stop();
}

TEST_CASE("fair scripts: a dead waiter's entry is skipped once its lease ends",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "dead");
    subscriber sub(server, f.channel());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await f.must_grant(H, 1, 10'000, 5'000);
        co_await f.must_queue(A, 2, 10'000, 50);  // then it dies
        co_await f.must_queue(B, 2, 10'000, 5'000);
        co_await sleep_for(120ms);
        const auto r = co_await f.release(H, 1);
        CHECK(status(r) == 1);
        CHECK(grant_of(sub.message()).owner == B);
        CHECK(server.cmd1({"HGET", f.lock(), "owner"}) == B);
        CHECK(server.cmd1({"HEXISTS", f.entries(), A}) == "0");
    });
    c.stop();
}

// Redisson's fair lock dropped live waiters as expired after their thread's
// wait time and never woke them.
TEST_CASE("fair scripts: a waiter that renews its entry is never dropped",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "renewed");
    subscriber sub(server, f.channel());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await f.must_grant(H, 1, 10'000, 5'000);
        co_await f.must_queue(A, 2, 10'000, 400);
        co_await f.must_queue(B, 2, 10'000, 5'000);
        // Two and a half entry leases long, A renews ten times per entry
        // lease (the script's cap would allow three): only a stall of most of
        // an entry lease could drop it.
        for (int i = 0; i < 25; ++i) {
            co_await sleep_for(40ms);
            const auto r = co_await f.acquire(A, 2, 10'000, 400, i);
            REQUIRE(queued(r));
            REQUIRE(r.elements[3].integer == 133);
        }
        const auto r = co_await f.release(H, 1);
        CHECK(status(r) == 1);
        const auto g = grant_of(sub.message());
        CHECK(g.owner == A);
        CHECK(g.seq == 24);
    });
    c.stop();
}

TEST_CASE("fair scripts: cancelling the head passes the turn on", "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "cancel");
    subscriber sub(server, f.channel());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await f.must_grant(H, 1, 10'000, 5'000);
        for (const auto* who : {&A, &B, &C}) co_await f.must_queue(*who, 2, 10'000, 5'000);

        // While the lock is held, a cancel only leaves the queue.
        const auto left = co_await f.release(A, 2);
        CHECK(status(left) == -1);
        CHECK(server.cmd({"ZRANGE", f.queue(), "0", "-1"}) == std::vector<std::string>{B, C});
        CHECK(server.cmd1({"HEXISTS", f.entries(), A}) == "0");

        // The lock is free (its lease ended) and the head cancels: the next
        // one is granted by the cancel itself.
        server.cmd({"DEL", f.lock()});
        const auto passed = co_await f.release(B, 2);
        CHECK(status(passed) == 0);
        CHECK(receivers(passed) == 1);
        CHECK(grant_of(sub.message()).owner == C);
        CHECK(server.cmd1({"HGET", f.lock(), "owner"}) == C);

        // A cancel that came after its own grant gives the lock back (and on).
        co_await f.must_queue(A, 3, 10'000, 5'000);
        const auto back = co_await f.release(C, 2);
        CHECK(status(back) == 1);
        CHECK(grant_of(sub.message()).owner == A);
        const auto cancelled_late = co_await f.release(A, 3);
        CHECK(status(cancelled_late) == 1);
        CHECK(sub.message() == A);
        CHECK(server.cmd1({"EXISTS", f.lock(), f.queue(), f.entries()}) == "0");
    });
    c.stop();
}

// Redisson's fair lock deadlocked when waiters with short waits asked for
// long leases: a queue entry lived as long as the lock's lease.
TEST_CASE("fair scripts: short waits with long leases do not hold the queue",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "short-waits");
    subscriber sub(server, f.channel());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await f.must_grant(H, 1, 600'000, 5'000);
        // Ten waiters ask for ten-minute leases and give up after one try:
        // the even ones cancel, the odd ones just stop renewing.
        for (int i = 0; i < 10; ++i) {
            const std::string who = "short-" + std::to_string(i);
            co_await f.must_queue(who, 2, 600'000, 100);
            if (i % 2 == 0) co_await f.must_leave(who, 2);
        }
        co_await f.must_queue(A, 2, 10'000, 5'000);
        co_await sleep_for(150ms);
        const auto r = co_await f.release(H, 1);
        CHECK(status(r) == 1);
        CHECK(grant_of(sub.message()).owner == A);
        const auto pttl = std::stoll(server.cmd1({"PTTL", f.lock()}));
        CHECK(pttl <= 10'000);
        CHECK(server.cmd1({"ZCARD", f.queue()}) == "0");
    });
    c.stop();
}

// Redisson's fair lock blocked after many waiters had died: their timeouts
// added up.
TEST_CASE("fair scripts: many dead waiters do not block the next live one",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "many-dead");
    subscriber sub(server, f.channel());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await f.must_grant(H, 1, 10'000, 5'000);
        constexpr int dead = 500;
        for (int i = 0; i < dead; ++i)
            co_await f.must_queue("dead-" + std::to_string(i), 2, 10'000, 400);
        co_await f.must_queue(A, 2, 10'000, 5'000);
        // (Each acquire prunes expired heads: on a slow machine the first
        // dead ones may be gone already.)
        CHECK(std::stoi(server.cmd1({"ZCARD", f.queue()})) > dead / 2);
        co_await sleep_for(450ms);
        // One release skips them all, at once.
        const auto r = co_await f.release(H, 1);
        CHECK(status(r) == 1);
        CHECK(grant_of(sub.message()).owner == A);
        CHECK(server.cmd1({"EXISTS", f.queue(), f.entries()}) == "0");
    }, 20s);
    c.stop();
}

TEST_CASE("fair scripts: a fair mutex and a mutex refuse each other's key",
          "[fair][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    fair_lock f(c, "kinds");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // A mutex holds it: the fair acquire refuses, naming the key.
        auto [ec1, plain] = co_await c.async_exec(
            command{"EVAL", d::acquire_script().source, "2", f.keys.lock(), f.keys.fence(),
                    "plain-owner", 10'000, 1, "1 host label"},
            use_nothrow);
        REQUIRE_FALSE(ec1);
        REQUIRE(plain.elements.at(0).integer == 1);
        auto [ec2, refused] = co_await c.async_exec(
            command{"EVAL", d::fair_acquire_script().source, "4", f.keys.lock(),
                    f.keys.fence(), f.keys.queue(), f.keys.entries(), A, 10'000, 1,
                    "", 5'000, 1},
            use_nothrow);
        CHECK(ec2);
        CHECK(refused.is_error());
        CHECK_THAT(refused.str, Catch::StartsWith("WRONGTYPE") &&
                                    Catch::Contains(f.lock()) && Catch::Contains("mutex"));
        server.cmd({"DEL", f.lock()});
        // A fair mutex holds it: the mutex's own release refuses (kind is a
        // field it never writes).
        co_await f.must_grant(A, 1, 10'000, 5'000);
        co_await f.must_grant(A, 2, 10'000, 5'000);
        auto [ec3, mutex_release] = co_await c.async_exec(
            command{"EVAL", d::release_script().source, "2", f.keys.lock(),
                    f.keys.channel(), A, 1},
            use_nothrow);
        CHECK(ec3);
        CHECK_THAT(mutex_release.str, Catch::StartsWith("WRONGTYPE") && Catch::Contains("kind"));
        CHECK(server.cmd1({"HGET", f.lock(), "owner"}) == A);
    });
    c.stop();
}
