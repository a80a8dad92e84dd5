// The semaphore's Lua scripts run by hand (raw EVAL through the client's
// command API) against a live redis-server: capacity, leases, renewal,
// release of one's own grants, tokens, and bad input (docs/protocol.md,
// "The semaphore").
#include <corolock/client.hpp>
#include "redis/lock/scripts.hpp"
#include "redis/lock/semaphore_scripts.hpp"
#include "redis/lock/shared_scripts.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"
#include "support/sys_util.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
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

// One semaphore's keys and the scripts run on them by EVAL.
struct semaphore_keys {
    corolock::client& c;
    std::string key = lock_key("sem");
    std::string leases = key + ":leases";
    std::string fence = key + ":fence";
    std::string channel = key + ":unlock";

    asio::awaitable<reply> eval(command cmd) {
        auto [ec, r] = co_await c.async_exec(std::move(cmd), use_nothrow);
        if (ec && !r.is_error()) FAIL("EVAL failed: " << ec.message());
        co_return r;
    }
    // {1, token, levels, lease left, created} or {0, 0, free, wait cap, 0}.
    asio::awaitable<reply> acquire(std::string owner, std::int64_t lease_ms, std::int64_t level,
                                   std::int64_t permits, std::int64_t capacity) {
        co_return co_await eval(command{"EVAL", d::semaphore_acquire_script().source, 3, key, leases,
                                        fence, owner, lease_ms, level, permits, capacity, "1 host test"});
    }
    asio::awaitable<reply> release(std::string owner, std::string level) {
        co_return co_await eval(
            command{"EVAL", d::semaphore_release_script().source, 3, key, leases, channel, owner,
                    level});
    }
    // The status script's description (scripts.cpp, describe): {kind, held,
    // ..., holder count (12), owners (13), lock-delay (14)}.
    asio::awaitable<reply> status() {
        co_return co_await eval(command{"EVAL", d::status_script().source, 4, key, fence,
                                        key + ":entries", leases});
    }
    asio::awaitable<reply> renew(std::string owner, std::int64_t lease_ms) {
        co_return co_await eval(
            command{"EVAL", d::semaphore_renew_script().source, 2, key, leases, owner, lease_ms});
    }
};

template <class Body>
void with_semaphore(Body body) {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    semaphore_keys s{c};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        co_await body(s, server);
    }, 20s);
    c.stop();
}
}  // namespace

TEST_CASE("semaphore scripts: grants fit the capacity, a refusal says when to retry",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server&) -> asio::awaitable<void> {
        const auto a = co_await s.acquire("o1", 10'000, 1, 2, 3);
        CHECK(script_granted(a));
        CHECK(script_int(a, 2) == 1);  // the owner's grants
        CHECK(script_int(a, 4) == 1);  // a tenure began
        const auto b = co_await s.acquire("o2", 5'000, 1, 1, 3);
        CHECK(script_granted(b));
        // Full: another owner, and the first owner itself (no re-entry
        // privilege: its own permits count), are refused.
        const auto c = co_await s.acquire("o3", 10'000, 1, 1, 3);
        CHECK_FALSE(script_granted(c));
        CHECK(script_int(c, 2) == 0);  // free permits
        // One permit frees when o2's lease (5 s) ends, the earlier one.
        CHECK(script_int(c, 3) > 0);
        CHECK(script_int(c, 3) <= 5'000);
        const auto again = co_await s.acquire("o1", 10'000, 2, 1, 3);
        CHECK_FALSE(script_granted(again));
        // Two permits need o1's grant gone too: the cap is its lease end.
        const auto two = co_await s.acquire("o3", 10'000, 1, 2, 3);
        CHECK_FALSE(script_granted(two));
        CHECK(script_int(two, 3) > 5'000);
        CHECK(script_int(two, 3) <= 10'000);
        // Nothing was written by the refusals.
        const auto fields = co_await s.eval(command{"HLEN", s.key});
        CHECK(fields.integer == 4 + 2 * 2);  // kind, capacity, used, next; g:, h: per owner
        const auto owners = co_await s.eval(command{"ZCARD", s.leases});
        CHECK(owners.integer == 2);
    });
}

TEST_CASE("semaphore scripts: tokens strictly increase and share the fence counter",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        // A counter far ahead of the clock (as a mutex on this name leaves
        // it after many grants): tokens continue from it.
        server.cmd({"SET", s.fence, "9000000000000000"});
        std::int64_t last = 9'000'000'000'000'000;
        for (int level = 1; level <= 5; ++level) {
            std::string owner = "o";
            owner += std::to_string(level % 2);
            const auto r = co_await s.acquire(owner, 10'000, level, 1, 10);
            REQUIRE(script_granted(r));
            CHECK(script_int(r, 1) > last);
            last = script_int(r, 1);
        }
        CHECK(server.cmd1({"GET", s.fence}) == std::to_string(last));
    });
}

TEST_CASE("semaphore scripts: a release gives back only the owner's named grant",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto r1 = co_await s.acquire("o1", 10'000, 1, 1, 3);
        REQUIRE(script_granted(r1));
        const auto r2 = co_await s.acquire("o1", 10'000, 2, 1, 3);
        REQUIRE(script_granted(r2));
        const auto r3 = co_await s.acquire("o2", 10'000, 7, 1, 3);
        REQUIRE(script_granted(r3));
        // Another owner's level of the same number, and an unknown owner.
        auto r = co_await s.release("o2", "1");
        CHECK(script_int(r, 0) == 3);  // o2 holds no level 1: already gone, nothing touched
        r = co_await s.release("o9", "1");
        CHECK(script_int(r, 0) == 0);
        CHECK(server.cmd1({"HGET", s.key, "g:o1"}) == "2 1/1 2/1");
        r = co_await s.release("o1", "1");
        CHECK(script_int(r, 0) == 2);  // o1 still holds level 2
        r = co_await s.release("o1", "1");
        CHECK(script_int(r, 0) == 3);  // a retried release
        CHECK(server.cmd1({"HGET", s.key, "g:o1"}) == "1 2/1");
        CHECK(server.cmd1({"HGET", s.key, "g:o2"}) == "1 7/1");
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "2");
        // Two permits are free now: o3 fits with 2, not with 3.
        const auto r4 = co_await s.acquire("o3", 10'000, 1, 3, 3);
        CHECK_FALSE(script_granted(r4));
        // "*": every grant of o1, its holder field and its lease end.
        r = co_await s.release("o1", "*");
        CHECK(script_int(r, 0) == 1);
        CHECK(server.cmd1({"HEXISTS", s.key, "g:o1"}) == "0");
        CHECK(server.cmd1({"HEXISTS", s.key, "h:o1"}) == "0");
        CHECK(server.cmd1({"ZSCORE", s.leases, "o1"}).empty());
        const auto r5 = co_await s.acquire("o3", 10'000, 1, 2, 3);
        CHECK(script_granted(r5));
        // The last grant's release deletes the key; the fence counter stays.
        const auto r6 = co_await s.release("o2", "*");
        CHECK(script_int(r6, 0) == 1);
        const auto r7 = co_await s.release("o3", "1");
        CHECK(script_int(r7, 0) == 1);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        CHECK(server.cmd1({"EXISTS", s.leases}) == "0");
        CHECK(server.cmd1({"EXISTS", s.fence}) == "1");
    });
}

TEST_CASE("semaphore scripts: a crashed holder's permits come back at its lease end",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        // o1 takes every permit with a short lease and is never heard of
        // again; o2 keeps one permit under a long lease.
        const auto r8 = co_await s.acquire("o2", 30'000, 1, 1, 3);
        REQUIRE(script_granted(r8));
        const auto r9 = co_await s.acquire("o1", 150, 1, 2, 3);
        REQUIRE(script_granted(r9));
        const auto refused = co_await s.acquire("o3", 10'000, 1, 2, 3);
        REQUIRE_FALSE(script_granted(refused));
        CHECK(script_int(refused, 3) <= 150);
        // The key outlives the short lease: its TTL covers the longest one.
        CHECK(std::stoll(server.cmd1({"PTTL", s.key})) > 10'000);
        bool got = false;
        for (int i = 0; i < 100 && !got; ++i) {
            co_await sleep_for(20ms);
            got = script_granted(co_await s.acquire("o3", 10'000, 1, 2, 3));
        }
        CHECK(got);
        // The expired grant and its owner's fields were pruned.
        CHECK(server.cmd1({"HEXISTS", s.key, "g:o1"}) == "0");
        CHECK(server.cmd1({"HEXISTS", s.key, "h:o1"}) == "0");
        CHECK(server.cmd1({"ZSCORE", s.leases, "o1"}).empty());
        CHECK(server.cmd1({"HGET", s.key, "g:o2"}) == "1 1/1");
        // Its release finds nothing: the lease is over.
        const auto r10 = co_await s.release("o1", "1");
        CHECK(script_int(r10, 0) == 0);
        const auto r11 = co_await s.renew("o1", 10'000);
        CHECK(r11.integer == 0);
    });
}

TEST_CASE("semaphore scripts: renewal extends every grant of the owner, never shortens",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto r12 = co_await s.acquire("o1", 150, 1, 1, 2);
        REQUIRE(script_granted(r12));
        const auto r13 = co_await s.acquire("o1", 150, 2, 1, 2);
        REQUIRE(script_granted(r13));
        auto r = co_await s.renew("o1", 20'000);
        CHECK(r.integer == 1);
        CHECK(std::stoll(server.cmd1({"PTTL", s.key})) > 10'000);
        // A shorter renewal and a check-only one change nothing.
        const auto r14 = co_await s.renew("o1", 50);
        CHECK(r14.integer == 1);
        const auto r15 = co_await s.renew("o1", 0);
        CHECK(r15.integer == 1);
        co_await sleep_for(300ms);  // well past the first lease
        const auto refused = co_await s.acquire("o2", 1'000, 1, 1, 2);
        CHECK_FALSE(script_granted(refused));
        CHECK(script_int(refused, 3) > 10'000);
        CHECK(server.cmd1({"HGET", s.key, "g:o1"}) == "2 1/1 2/1");
        const auto r16 = co_await s.renew("o2", 20'000);
        CHECK(r16.integer == 0);
    });
}

TEST_CASE("semaphore scripts: bad input and other kinds are refused, naming the cause",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        struct bad {
            std::int64_t permits, capacity;
            const char* says;
        };
        for (const bad b : {bad{4, 3, "permits must be a whole number from 1 to the capacity 3, got \"4\""},
                            bad{0, 3, "permits must be a whole number from 1 to the capacity 3, got \"0\""},
                            bad{-1, 3, "got \"-1\""},
                            bad{1, 0, "the capacity must be a whole number from 1 to 1000000, got \"0\""},
                            bad{1, 2'000'000, "the capacity must be"}}) {
            const auto r = co_await s.acquire("o1", 1'000, 1, b.permits, b.capacity);
            INFO(b.permits << " of " << b.capacity);
            CHECK(r.is_error());
            CHECK_THAT(r.str, Catch::Contains(b.says));
        }
        auto r = co_await s.acquire("o1", 0, 1, 1, 3);
        CHECK_THAT(r.str, Catch::Contains("the lease must be"));
        r = co_await s.acquire("", 1'000, 1, 1, 3);
        CHECK_THAT(r.str, Catch::Contains("the owner must not be empty"));
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        CHECK(server.cmd1({"EXISTS", s.leases}) == "0");
        CHECK(server.cmd1({"EXISTS", s.fence}) == "0");  // no token was spent

        // A mutex on the name, and a semaphore seen by the mutex's script.
        server.cmd({"HSET", s.key, "owner", "m1", "fence", "5", "l:1", "5"});
        r = co_await s.acquire("o1", 1'000, 1, 1, 3);
        CHECK_THAT(r.str, Catch::StartsWith("WRONGTYPE") && Catch::Contains("a corolock mutex"));
        r = co_await s.release("m1", "*");
        CHECK_THAT(r.str, Catch::Contains("a corolock mutex"));
        CHECK(server.cmd1({"HGET", s.key, "owner"}) == "m1");
        server.cmd({"DEL", s.key});
        const auto r17 = co_await s.acquire("o1", 10'000, 1, 1, 3);
        REQUIRE(script_granted(r17));
        r = co_await s.eval(command{"EVAL", d::acquire_script().source, 2, s.key, s.fence, "m1",
                                    1'000, 1, "1 host test"});
        CHECK_THAT(r.str, Catch::StartsWith("WRONGTYPE"));
    });
}

TEST_CASE("semaphore scripts: another kind's hash is refused by its kind field, untouched",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        struct other {
            std::vector<std::string> fields;
            const char* says;
        };
        for (const auto& o :
             {other{{"kind", "fair", "owner", "f1", "fence", "5", "l:1", "5"}, "a corolock fair, not a semaphore"},
              other{{"kind", "shared", "writer", "w1", "we", "9"}, "a corolock shared, not a semaphore"},
              other{{"owner", "m1", "fence", "5", "l:1", "5"}, "a corolock mutex, not a semaphore"},
              other{{"stray", "x"}, "a hash without kind semaphore"}}) {
            server.cmd({"DEL", s.key, s.leases});
            std::vector<std::string> hset{"HSET", s.key};
            hset.insert(hset.end(), o.fields.begin(), o.fields.end());
            server.cmd(hset);
            const auto before = server.cmd({"HGETALL", s.key});
            INFO(o.says);
            auto r = co_await s.acquire("o1", 10'000, 1, 1, 3);
            CHECK_THAT(r.str, Catch::StartsWith("WRONGTYPE") && Catch::Contains(o.says));
            r = co_await s.release("o1", "*");
            CHECK_THAT(r.str, Catch::Contains(o.says));
            r = co_await s.renew("o1", 10'000);
            CHECK_THAT(r.str, Catch::Contains(o.says));
            CHECK(server.cmd({"HGETALL", s.key}) == before);
            CHECK(server.cmd1({"EXISTS", s.leases}) == "0");
            CHECK(server.cmd1({"EXISTS", s.fence}) == "0");  // no token was spent
        }
    });
}

TEST_CASE("semaphore scripts: more than 64 ended owners are pruned over several scripts",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        // 150 owners of one permit each whose leases end soon, and one that
        // stays: the semaphore is full. The 150 grants must all be made
        // before the first lease ends (else a later grant prunes it): a
        // second is ample, also under ASan on a busy machine, where 100 ms
        // was not.
        const auto keep = co_await s.acquire("keep", 30'000, 1, 1, 151);
        REQUIRE(script_granted(keep));
        const auto first_end = std::chrono::steady_clock::now() + 1000ms;
        for (int i = 0; i < 150; ++i) {
            const auto r = co_await s.acquire("dead" + std::to_string(i), 1000, 1, 1, 151);
            REQUIRE(script_granted(r));
        }
        REQUIRE(std::chrono::steady_clock::now() < first_end);
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "151");
        co_await sleep_for(1100ms);
        // Each script drops at most 64 ended owners; while some may remain
        // a refusal asks to retry at once (wait cap 1 ms), though the ended
        // owners left (86) do not free all 151 permits asked for: "keep"
        // would, at its lease end.
        auto r = co_await s.acquire("new", 30'000, 1, 151, 151);
        CHECK_FALSE(script_granted(r));
        CHECK(script_int(r, 3) == 1);
        CHECK(server.cmd1({"ZCARD", s.leases}) == "87");
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "87");
        r = co_await s.acquire("new", 30'000, 1, 151, 151);
        CHECK_FALSE(script_granted(r));
        CHECK(script_int(r, 3) == 1);
        CHECK(server.cmd1({"ZCARD", s.leases}) == "23");
        // The third drops the last 22: only "keep" holds on, until its end.
        r = co_await s.acquire("new", 30'000, 1, 151, 151);
        CHECK_FALSE(script_granted(r));
        CHECK(script_int(r, 3) > 20'000);
        CHECK(server.cmd1({"ZCARD", s.leases}) == "1");
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "1");
        r = co_await s.acquire("new", 30'000, 1, 150, 151);
        CHECK(script_granted(r));
        CHECK(server.cmd1({"ZCARD", s.leases}) == "2");
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "151");
        CHECK(server.cmd1({"HLEN", s.key}) == "8");  // kind, capacity, used, next; g:, h: x2
        CHECK(server.cmd1({"HEXISTS", s.key, "h:dead149"}) == "0");
    });
}

TEST_CASE("semaphore scripts: a refusal's wait cap is the lease end that frees enough",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server&) -> asio::awaitable<void> {
        // Capacity 10: a holds 3 until 5 s, b 3 (in two grants) until 10 s,
        // c 4 until 20 s. Acquired out of lease order.
        const auto c = co_await s.acquire("c", 20'000, 1, 4, 10);
        const auto b1 = co_await s.acquire("b", 10'000, 1, 2, 10);
        const auto a = co_await s.acquire("a", 5'000, 1, 3, 10);
        const auto b2 = co_await s.acquire("b", 10'000, 2, 1, 10);
        REQUIRE((script_granted(c) && script_granted(b1) && script_granted(a) && script_granted(b2)));
        struct want {
            std::int64_t permits, above, at_most;
        };
        for (const want w : {want{1, 4'000, 5'000}, want{3, 4'000, 5'000}, want{4, 9'000, 10'000},
                             want{6, 9'000, 10'000}, want{7, 19'000, 20'000},
                             want{10, 19'000, 20'000}}) {
            const auto r = co_await s.acquire("x", 1'000, 1, w.permits, 10);
            INFO(w.permits << " permits");
            CHECK_FALSE(script_granted(r));
            CHECK(script_int(r, 2) == 0);
            CHECK(script_int(r, 3) > w.above);
            CHECK(script_int(r, 3) <= w.at_most);
        }
    });
}

TEST_CASE("semaphore scripts: no script shortens either key's TTL",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto ttl = [&](const std::string& key) { return std::stoll(server.cmd1({"PTTL", key})); };
        const auto first = co_await s.acquire("long", 60'000, 1, 1, 5);
        REQUIRE(script_granted(first));
        CHECK(ttl(s.key) > 50'000);
        CHECK(ttl(s.leases) == -2);  // a sole owner: no set
        // A shorter grant of another owner (which writes the set), a
        // shorter re-entry, a shorter renewal and a release leave both TTLs
        // covering the longest lease.
        const auto other = co_await s.acquire("short", 1'000, 1, 1, 5);
        REQUIRE(script_granted(other));
        CHECK(ttl(s.leases) > 50'000);
        const auto again = co_await s.acquire("long", 1'000, 2, 1, 5);
        REQUIRE(script_granted(again));
        const auto renewed = co_await s.renew("short", 500);
        CHECK(renewed.integer == 1);
        const auto released = co_await s.release("short", "1");
        CHECK(script_int(released, 0) == 1);
        CHECK(ttl(s.key) > 50'000);
        CHECK(ttl(s.leases) > 50'000);
        CHECK(ttl(s.leases) >= ttl(s.key) - 50);
        // A longer renewal extends both.
        const auto longer = co_await s.renew("long", 120'000);
        CHECK(longer.integer == 1);
        CHECK(ttl(s.key) > 110'000);
        CHECK(ttl(s.leases) > 110'000);
    });
}

TEST_CASE("semaphore scripts: a sole owner's lease end is the hash's, until a second owner",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto server_ms = [&] {
            const auto t = server.cmd({"TIME"});
            return std::stoll(t.at(0)) * 1000 + std::stoll(t.at(1)) / 1000;
        };
        // One owner: its lease end is `next`, `sole` names it, no set.
        auto before = server_ms();
        const auto a = co_await s.acquire("o1", 20'000, 1, 2, 5);
        REQUIRE(script_granted(a));
        CHECK(script_int(a, 4) == 1);
        CHECK(server.cmd1({"HGET", s.key, "sole"}) == "o1");
        // A kind of its own, which scripts from before this layout refuse.
        CHECK(server.cmd1({"HGET", s.key, "kind"}) == d::sole_semaphore_kind);
        const auto end_1 = std::stoll(server.cmd1({"HGET", s.key, "next"}));
        CHECK(end_1 >= before + 20'000);
        CHECK(end_1 <= server_ms() + 20'000);
        CHECK(server.cmd1({"EXISTS", s.leases}) == "0");
        // Its re-entry and renewal move `next`, still without a set.
        const auto again = co_await s.acquire("o1", 25'000, 2, 1, 5);
        REQUIRE(script_granted(again));
        CHECK(script_int(again, 2) == 2);
        CHECK(script_int(again, 4) == 0);
        const auto end_2 = std::stoll(server.cmd1({"HGET", s.key, "next"}));
        CHECK(end_2 > end_1);
        const auto renewed = co_await s.renew("o1", 40'000);
        CHECK(renewed.integer == 1);
        const auto end_3 = std::stoll(server.cmd1({"HGET", s.key, "next"}));
        CHECK(end_3 >= end_2 + 10'000);
        CHECK(std::stoll(server.cmd1({"PTTL", s.key})) > 35'000);
        CHECK(server.cmd1({"EXISTS", s.leases}) == "0");
        // Full (3 of 5 held): a refusal's wait cap is the sole owner's end.
        const auto refused = co_await s.acquire("o2", 10'000, 1, 3, 5);
        CHECK_FALSE(script_granted(refused));
        CHECK(script_int(refused, 2) == 2);
        CHECK(script_int(refused, 3) > 35'000);
        CHECK(script_int(refused, 3) <= 40'000);
        // A second owner: both lease ends are in the set, `sole` is gone,
        // and `next` is the sooner end.
        before = server_ms();
        const auto b = co_await s.acquire("o2", 10'000, 1, 2, 5);
        REQUIRE(script_granted(b));
        CHECK(script_int(b, 2) == 1);
        CHECK(script_int(b, 4) == 1);
        CHECK(server.cmd1({"HEXISTS", s.key, "sole"}) == "0");
        CHECK(server.cmd1({"HGET", s.key, "kind"}) == "semaphore");
        CHECK(std::stoll(server.cmd1({"ZSCORE", s.leases, "o1"})) == end_3);
        const auto end_b = std::stoll(server.cmd1({"ZSCORE", s.leases, "o2"}));
        CHECK(end_b >= before + 10'000);
        CHECK(std::stoll(server.cmd1({"HGET", s.key, "next"})) == end_b);
        CHECK(std::stoll(server.cmd1({"PTTL", s.leases})) > 35'000);
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "5");
        // Releases from there on go through the set: o1 leaves it.
        auto r = co_await s.release("o1", "*");
        CHECK(script_int(r, 0) == 1);
        CHECK(server.cmd1({"ZSCORE", s.leases, "o1"}).empty());
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "2");
        r = co_await s.release("o2", "1");
        CHECK(script_int(r, 0) == 1);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        CHECK(server.cmd1({"EXISTS", s.leases}) == "0");
    });
}

TEST_CASE("semaphore scripts: a sole owner's release and its lease end free everything",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        // Its only grant: the release deletes the hash and publishes every
        // permit free. Another owner's or another level's release touches
        // nothing.
        const auto a = co_await s.acquire("o1", 10'000, 4, 2, 3);
        REQUIRE(script_granted(a));
        auto r = co_await s.release("o2", "4");
        CHECK(script_int(r, 0) == 0);
        r = co_await s.release("o1", "5");
        CHECK(script_int(r, 0) == 3);
        CHECK(server.cmd1({"HGET", s.key, "g:o1"}) == "2 4/2");
        r = co_await s.release("o1", "4");
        CHECK(script_int(r, 0) == 1);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        // Two grants: the first release keeps the other; "*" frees both.
        const auto first = co_await s.acquire("o1", 10'000, 1, 1, 3);
        REQUIRE(script_granted(first));
        const auto second = co_await s.acquire("o1", 10'000, 2, 1, 3);
        REQUIRE(script_granted(second));
        r = co_await s.release("o1", "1");
        CHECK(script_int(r, 0) == 2);
        CHECK(server.cmd1({"HGET", s.key, "g:o1"}) == "1 2/1");
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "1");
        CHECK(server.cmd1({"HGET", s.key, "sole"}) == "o1");
        const auto third = co_await s.acquire("o1", 10'000, 3, 1, 3);
        REQUIRE(script_granted(third));
        r = co_await s.release("o1", "*");
        CHECK(script_int(r, 0) == 1);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        // A crashed sole owner: once its lease (`next`) ends, its grants are
        // gone. The next acquire finds all permits free and deletes the old
        // hash; the old owner's release and renewal find nothing.
        const auto dead_grant = co_await s.acquire("dead", 150, 1, 3, 3);
        REQUIRE(script_granted(dead_grant));
        const auto refused = co_await s.acquire("o2", 10'000, 1, 1, 3);
        REQUIRE_FALSE(script_granted(refused));
        CHECK(script_int(refused, 3) <= 150);
        co_await sleep_for(300ms);
        const auto b = co_await s.acquire("o2", 10'000, 1, 3, 3);
        CHECK(script_granted(b));
        CHECK(server.cmd1({"HGET", s.key, "sole"}) == "o2");
        CHECK(server.cmd1({"HEXISTS", s.key, "g:dead"}) == "0");
        CHECK(server.cmd1({"HEXISTS", s.key, "h:dead"}) == "0");
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "3");
        const auto late_release = co_await s.release("dead", "1");
        CHECK(script_int(late_release, 0) == 0);
        const auto late_renew = co_await s.renew("dead", 10'000);
        CHECK(late_renew.integer == 0);
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "3");
        // The same with nobody coming: the dead owner's own late release
        // deletes what is left.
        const auto emptied = co_await s.release("o2", "*");
        CHECK(script_int(emptied, 0) == 1);
        const auto dead_again = co_await s.acquire("dead", 150, 1, 1, 3);
        REQUIRE(script_granted(dead_again));
        co_await sleep_for(300ms);
        const auto later_release = co_await s.release("dead", "1");
        CHECK(script_int(later_release, 0) == 0);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
    });
}

TEST_CASE("semaphore scripts: a sole owner's corners: shorter re-entry, longer second owner",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto next = [&] { return std::stoll(server.cmd1({"HGET", s.key, "next"})); };
        const auto a = co_await s.acquire("o1", 20'000, 1, 1, 5);
        REQUIRE(script_granted(a));
        const auto end_1 = next();
        // A shorter re-entry moves nothing back, and answers the lease left.
        const auto shorter = co_await s.acquire("o1", 1'000, 2, 1, 5);
        REQUIRE(script_granted(shorter));
        CHECK(next() == end_1);
        CHECK(script_int(shorter, 3) > 15'000);
        CHECK(std::stoll(server.cmd1({"PTTL", s.key})) > 15'000);
        // Status sees the sole owner as any semaphore's.
        auto st = co_await s.status();
        REQUIRE(st.elements.size() == 14);
        CHECK(st.elements[0].str == "semaphore");
        CHECK(st.elements[1].integer == 1);      // held
        CHECK(st.elements[10].integer == 2);     // permits in use
        CHECK(st.elements[11].integer == 1);     // holder count
        REQUIRE(st.elements[12].elements.size() == 1);
        CHECK(st.elements[12].elements[0].elements[0].str == "o1");
        // A second owner with a longer lease: `next` stays the first's end.
        const auto b = co_await s.acquire("o2", 60'000, 1, 1, 5);
        REQUIRE(script_granted(b));
        CHECK(next() == end_1);
        CHECK(std::stoll(server.cmd1({"ZSCORE", s.leases, "o1"})) == end_1);
        CHECK(std::stoll(server.cmd1({"PTTL", s.key})) > 55'000);
        CHECK(std::stoll(server.cmd1({"PTTL", s.leases})) > 55'000);
        // The shared mutex's scripts refuse a sole owner's semaphore by kind.
        const auto out_2 = co_await s.release("o2", "*");
        REQUIRE(script_int(out_2, 0) == 1);
        const auto out_1 = co_await s.release("o1", "*");
        REQUIRE(script_int(out_1, 0) == 1);
        const auto c = co_await s.acquire("o3", 20'000, 1, 1, 5);
        REQUIRE(script_granted(c));
        const auto shared = co_await s.eval(
            command{"EVAL", d::shared_acquire_script().source, 3, s.key, s.leases, s.fence, "r1",
                    10'000, 1, "1 host test", "s", 0});
        CHECK(shared.is_error());
        CHECK_THAT(shared.str, Catch::StartsWith("WRONGTYPE") &&
                                   Catch::Contains("a corolock sole semaphore, not a shared mutex"));
        // Once the sole owner's lease (`next`) has passed, status reports it
        // free, even while the key lingers (kept here by hand).
        const auto brief = co_await s.acquire("o3", 1, 2, 1, 5);  // re-entry: no shorter
        REQUIRE(script_granted(brief));
        const auto out_3 = co_await s.release("o3", "*");
        REQUIRE(script_int(out_3, 0) == 1);
        const auto gone = co_await s.acquire("o4", 100, 1, 1, 5);
        REQUIRE(script_granted(gone));
        server.cmd({"PEXPIRE", s.key, "60000"});
        co_await sleep_for(250ms);
        st = co_await s.status();
        REQUIRE(st.elements.size() == 14);
        CHECK(st.elements[0].str == "semaphore");
        CHECK(st.elements[1].integer == 0);
        CHECK(st.elements[11].integer == 0);
        // The sharded release announces with SPUBLISH on both its paths.
        const auto& sharded = d::semaphore_release_script(true).source;
        CHECK(sharded.find("redis.call('PUBLISH'") == std::string::npos);
        CHECK(count_of(sharded, "redis.call('SPUBLISH'") == 2);
    });
}

TEST_CASE("semaphore scripts: a set left of an expired hash frees no permits",
          "[semaphore][integration]") {
    with_semaphore([](semaphore_keys& s, redis_server& server) -> asio::awaitable<void> {
        // Lease ends of owners long gone (their hash expired), with a long TTL.
        server.cmd({"ZADD", s.leases, "1000", "ghost1", "2000", "ghost2"});
        server.cmd({"PEXPIRE", s.leases, "1000000"});
        const auto a = co_await s.acquire("o1", 30'000, 1, 2, 3);
        REQUIRE(script_granted(a));
        CHECK(server.cmd1({"ZCARD", s.leases}) == "2");  // a sole owner leaves the set alone
        // A second owner writes the set: it gets the hash's TTL.
        const auto b = co_await s.acquire("o2", 150, 1, 1, 3);
        REQUIRE(script_granted(b));
        const auto hash_ttl = std::stoll(server.cmd1({"PTTL", s.key}));
        const auto set_ttl = std::stoll(server.cmd1({"PTTL", s.leases}));
        CHECK(set_ttl <= hash_ttl + 50);
        CHECK(set_ttl >= hash_ttl - 50);
        // o2's lease ends: the prune drops it and the ghosts; only o2's
        // permit comes back.
        co_await sleep_for(300ms);
        const auto c = co_await s.acquire("o3", 30'000, 1, 1, 3);
        REQUIRE(script_granted(c));
        CHECK(server.cmd1({"HGET", s.key, "used"}) == "3");
        CHECK(server.cmd1({"ZSCORE", s.leases, "ghost1"}).empty());
        CHECK(server.cmd1({"ZSCORE", s.leases, "ghost2"}).empty());
        CHECK(server.cmd1({"ZSCORE", s.leases, "o2"}).empty());
        CHECK(server.cmd1({"ZCARD", s.leases}) == "2");  // o1 and o3
        const auto full = co_await s.acquire("o4", 30'000, 1, 1, 3);
        CHECK_FALSE(script_granted(full));
    });
}
