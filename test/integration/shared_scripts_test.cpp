// The shared mutex's Lua scripts run by hand (raw EVAL through the client's
// command API) against a live redis-server: readers overlap, writers
// exclude, the writer-preference marker, leases per reader, owner-checked
// release, tokens, upgrade and downgrade, and other kinds on the name
// (docs/protocol.md, "The shared mutex").
#include <corolock/client.hpp>
#include "redis/lock/scripts.hpp"
#include "redis/lock/semaphore_scripts.hpp"
#include "redis/lock/shared_scripts.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"
#include "support/subscriber.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::reply;
using namespace corolock::test;
namespace d = corolock::detail;

namespace {
using corolock::test::use_nothrow;

enum class level_kind { exclusive, shared };

// One shared mutex's keys and the scripts run on them by EVAL.
struct shared_keys {
    corolock::client& c;
    std::string key = lock_key("rw");
    std::string readers = key + ":leases";
    std::string fence = key + ":fence";
    std::string channel = key + ":unlock";

    asio::awaitable<reply> eval(command cmd) {
        auto [ec, r] = co_await c.async_exec(std::move(cmd), use_nothrow);
        if (ec && !r.is_error()) FAIL("EVAL failed: " << ec.message());
        co_return r;
    }
    // {1, token, levels, lease left, created} or {0, 0, readers, wait cap, 0}.
    asio::awaitable<reply> acquire(std::string owner, level_kind k, std::int64_t lease_ms,
                                   std::int64_t level, bool marks = true,
                                   bool preference = true, std::int64_t marker_ms = 2'000) {
        std::string mode = "x";
        if (k == level_kind::shared) mode = preference ? "s" : "r";
        co_return co_await eval(command{"EVAL", d::shared_acquire_script().source, 3, key,
                                        readers, fence, owner, lease_ms, level, "1 host test",
                                        mode, marks ? marker_ms : 0});
    }
    asio::awaitable<reply> read(std::string owner, std::int64_t level, std::int64_t lease_ms = 10'000) {
        co_return co_await acquire(std::move(owner), level_kind::shared, lease_ms, level);
    }
    asio::awaitable<reply> write(std::string owner, std::int64_t level, std::int64_t lease_ms = 10'000) {
        co_return co_await acquire(std::move(owner), level_kind::exclusive, lease_ms, level);
    }
    asio::awaitable<reply> release(std::string owner, std::string level) {
        co_return co_await eval(command{"EVAL", d::shared_release_script().source, 3, key,
                                        readers, channel, owner, level});
    }
    asio::awaitable<reply> renew(std::string owner, std::int64_t lease_ms) {
        co_return co_await eval(
            command{"EVAL", d::shared_renew_script().source, 2, key, readers, owner, lease_ms});
    }
};

template <class Body>
void with_shared(Body body) {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    shared_keys s{c};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        co_await body(s, server);
    }, 30s);
    c.stop();
}
}  // namespace

TEST_CASE("shared scripts: readers overlap, a writer excludes readers and writers",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto r1 = co_await s.read("r1", 1);
        REQUIRE(script_granted(r1));
        CHECK(script_int(r1, 4) == 1);  // a tenure began
        const auto r2 = co_await s.read("r2", 1);
        CHECK(script_granted(r2));
        const auto again = co_await s.read("r1", 2);  // re-entry
        CHECK(script_granted(again));
        CHECK(script_int(again, 2) == 2);
        CHECK(script_int(again, 4) == 0);
        // A writer waits for both readers; its cap is the last reader's end.
        const auto w = co_await s.acquire("w1", level_kind::exclusive, 10'000, 1, false);
        CHECK_FALSE(script_granted(w));
        CHECK(script_int(w, 2) == 2);  // live readers
        CHECK(script_int(w, 3) > 9'000);
        CHECK(server.cmd1({"ZCARD", s.readers}) == "2");
        const auto got1 = co_await s.release("r1", "1");
        CHECK(script_int(got1, 0) == 2);
        const auto got2 = co_await s.release("r1", "2");
        CHECK(script_int(got2, 0) == 1);
        const auto got3 = co_await s.release("r2", "1");
        CHECK(script_int(got3, 0) == 1);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        CHECK(server.cmd1({"EXISTS", s.readers}) == "0");
        // A writer excludes readers and other writers, and re-enters.
        const auto got4 = co_await s.write("w1", 1, 5'000);
        REQUIRE(script_granted(got4));
        const auto rr = co_await s.read("r1", 3);
        CHECK_FALSE(script_granted(rr));
        CHECK(script_int(rr, 3) > 4'000);
        CHECK(script_int(rr, 3) <= 5'000);
        const auto got5 = co_await s.write("w2", 1);
        CHECK_FALSE(script_granted(got5));
        const auto wr = co_await s.write("w1", 2);
        CHECK(script_granted(wr));
        CHECK(script_int(wr, 2) == 2);
        // Both keys carry a TTL covering the longest lease.
        CHECK(std::stoll(server.cmd1({"PTTL", s.key})) > 9'000);
    });
}

TEST_CASE("shared scripts: a waiting writer holds back new readers, with preference on",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto got6 = co_await s.read("r1", 1);
        REQUIRE(script_granted(got6));
        // A try (no mark) holds back nobody.
        const auto got7 = co_await s.acquire("w1", level_kind::exclusive, 10'000, 1, false);
        CHECK_FALSE(script_granted(got7));
        const auto got8 = co_await s.read("r2", 1);
        CHECK(script_granted(got8));
        // A waiting writer marks itself: its cap is a third of the marker's
        // lease, so that it renews the marker in time.
        const auto w = co_await s.write("w1", 2);
        CHECK_FALSE(script_granted(w));
        CHECK(script_int(w, 3) <= 667);
        CHECK_THAT(server.cmd1({"HGET", s.key, "ww"}), Catch::StartsWith("w1 "));
        // New readers wait for it; readers in already re-enter.
        const auto r3 = co_await s.read("r3", 1);
        CHECK_FALSE(script_granted(r3));
        CHECK(script_int(r3, 3) <= 2'000);
        const auto got9 = co_await s.read("r1", 2);
        CHECK(script_granted(got9));
        // A handle without the preference ignores the marker.
        const auto got10 = co_await s.acquire("r4", level_kind::shared, 10'000, 1, true, false);
        CHECK(script_granted(got10));
        co_await s.release("r4", "*");
        // The last reader's release announces; the writer gets in and its
        // marker goes.
        co_await s.release("r1", "*");
        const auto last = co_await s.release("r2", "*");
        CHECK(script_int(last, 0) == 1);
        const auto got11 = co_await s.write("w1", 3);
        CHECK(script_granted(got11));
        CHECK(server.cmd1({"HEXISTS", s.key, "ww"}) == "0");
    });
}

TEST_CASE("shared scripts: while another writer's marker lives, a release lets only writers in",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        subscriber sub(server, s.channel);
        // The ms of a "*w<ms>" message; -1 for any other.
        const auto held_back_ms = [](const std::string& m) -> long long {
            return m.rfind("*w", 0) == 0 ? std::stoll(m.substr(2)) : -1;
        };
        // While a marker of 2 s lives: what is left of it.
        const auto writers_only = [&](const std::string& m) {
            const auto ms = held_back_ms(m);
            return ms > 0 && ms <= 2'000;
        };
        const auto r1 = co_await s.read("r1", 1);
        REQUIRE(script_granted(r1));
        const auto w1 = co_await s.write("w1", 1);
        REQUIRE_FALSE(script_granted(w1));  // marked
        // The last reader leaves while w1's marker lives.
        co_await s.release("r1", "*");
        const auto m1 = sub.message();
        CHECK(writers_only(m1));
        const auto got1 = co_await s.write("w1", 2);
        REQUIRE(script_granted(got1));
        // w2 marks behind w1; w1's last level goes.
        const auto w2 = co_await s.write("w2", 1);
        REQUIRE_FALSE(script_granted(w2));
        co_await s.release("w1", "*");
        const auto m2 = sub.message();
        CHECK(writers_only(m2));
        // w2 gives up: its marker goes, nobody holds, so everyone may try.
        co_await s.release("w2", "*");
        CHECK(sub.message() == "*");
        // While a writer holds nobody gets in, so its release of a share
        // (half of a downgrade) announces nothing...
        const auto got3 = co_await s.write("w3", 1);
        REQUIRE(script_granted(got3));
        const auto share = co_await s.read("w3", 2);
        REQUIRE(script_granted(share));
        const auto unshared = co_await s.release("w3", "2");
        CHECK(script_int(unshared, 0) == 2);
        CHECK(script_int(unshared, 1) == 0);  // no receivers: nothing published
        CHECK(sub.message(300ms).empty());
        // ... but a marker given up lets another waiting writer take it:
        // writers wake, and readers need not try before w3's lease end.
        const auto w4 = co_await s.write("w4", 1);
        REQUIRE_FALSE(script_granted(w4));
        co_await s.release("w4", "*");
        const auto m4 = held_back_ms(sub.message());
        CHECK(m4 > 5'000);
        CHECK(m4 <= 10'000);
        // Without a marker the writer's release lets everyone in.
        co_await s.release("w3", "*");
        CHECK(sub.message() == "*");
        // A marker left by a writer that died holds back for its lease only:
        // the announcement says how long that still is.
        const auto r5 = co_await s.read("r5", 1);
        REQUIRE(script_granted(r5));
        const auto dead = co_await s.acquire("dead", level_kind::exclusive, 10'000, 1, true, true,
                                             1'000);
        REQUIRE_FALSE(script_granted(dead));
        co_await s.release("r5", "*");
        const auto m5 = held_back_ms(sub.message());
        CHECK(m5 > 0);
        CHECK(m5 <= 1'000);
        CHECK_THAT(server.cmd1({"HGET", s.key, "ww"}), Catch::StartsWith("dead "));
    });
}

TEST_CASE("shared scripts: a crashed reader's share ends at its lease end, others keep theirs",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto got12 = co_await s.read("long", 1, 5'000);
        REQUIRE(script_granted(got12));
        const auto got13 = co_await s.read("crashed", 1, 300);
        REQUIRE(script_granted(got13));
        const auto long_end = server.cmd1({"ZSCORE", s.readers, "long"});
        co_await sleep_for(400ms);
        // The crashed reader is gone (pruned by another owner's script); the
        // long one is untouched and still holds back a writer, with its own
        // lease end as the cap.
        const auto w = co_await s.acquire("w1", level_kind::exclusive, 10'000, 1, false);
        CHECK_FALSE(script_granted(w));
        CHECK(script_int(w, 2) == 1);
        CHECK(script_int(w, 3) > 4'000);
        CHECK(server.cmd1({"ZSCORE", s.readers, "long"}) == long_end);
        CHECK(server.cmd1({"ZSCORE", s.readers, "crashed"}).empty());
        CHECK(server.cmd1({"HEXISTS", s.key, "r:crashed"}) == "0");
        CHECK(std::stoll(server.cmd1({"PTTL", s.readers})) > 4'000);
        const auto gone = co_await s.renew("crashed", 1'000);
        CHECK(gone.integer == 0);
        // Renewal moves only the renewer's end.
        const auto got15 = co_await s.renew("long", 8'000);
        CHECK((got15).integer == 1);
        CHECK(std::stoll(server.cmd1({"ZSCORE", s.readers, "long"})) >
              std::stoll(long_end));
    });
}

TEST_CASE("shared scripts: a dead waiting writer stops holding readers back at its marker's end",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server&) -> asio::awaitable<void> {
        const auto got16 = co_await s.read("r1", 1);
        REQUIRE(script_granted(got16));
        const auto w = co_await s.acquire("w1", level_kind::exclusive, 10'000, 1, true, true, 300);
        REQUIRE_FALSE(script_granted(w));
        CHECK(script_int(w, 3) <= 100);
        const auto got17 = co_await s.read("r2", 1);
        CHECK_FALSE(script_granted(got17));
        co_await sleep_for(400ms);
        const auto got18 = co_await s.read("r2", 2);
        CHECK(script_granted(got18));
    });
}

TEST_CASE("shared scripts: a writer giving up takes its marker back and wakes readers",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto got19 = co_await s.read("r1", 1);
        REQUIRE(script_granted(got19));
        const auto got20 = co_await s.write("w1", 1);
        REQUIRE_FALSE(script_granted(got20));
        const auto got21 = co_await s.read("r2", 1);
        REQUIRE_FALSE(script_granted(got21));
        const auto gone = co_await s.release("w1", "1");
        CHECK(script_int(gone, 0) == 0);  // it held nothing
        CHECK(server.cmd1({"HEXISTS", s.key, "ww"}) == "0");
        const auto got22 = co_await s.read("r2", 2);
        CHECK(script_granted(got22));
    });
}

TEST_CASE("shared scripts: releases are owner- and level-checked",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto got23 = co_await s.write("w1", 1);
        REQUIRE(script_granted(got23));
        // Another owner touches nothing, whatever level it names.
        const auto got24 = co_await s.release("other", "1");
        CHECK(script_int(got24, 0) == 0);
        const auto got25 = co_await s.release("other", "*");
        CHECK(script_int(got25, 0) == 0);
        CHECK(server.cmd1({"HGET", s.key, "writer"}) == "w1");
        const auto got26 = co_await s.release("w1", "9");
        CHECK(script_int(got26, 0) == 3);
        const auto got27 = co_await s.renew("other", 1'000);
        CHECK((got27).integer == 0);
        const auto r = co_await s.release("w1", "1");
        CHECK(script_int(r, 0) == 1);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
        // A reader's release is checked the same way.
        const auto got28 = co_await s.read("r1", 4);
        REQUIRE(script_granted(got28));
        const auto got29 = co_await s.release("r2", "4");
        CHECK(script_int(got29, 0) == 0);
        CHECK(server.cmd1({"ZCARD", s.readers}) == "1");
        const auto got30 = co_await s.release("r1", "4");
        CHECK(script_int(got30, 0) == 1);
        const auto got31 = co_await s.release("r1", "4");
        CHECK(script_int(got31, 0) == 0);
    });
}

TEST_CASE("shared scripts: tokens strictly increase across readers and writers",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        server.cmd({"SET", s.fence, "9000000000000000"});
        std::int64_t last = 9'000'000'000'000'000;
        for (int level = 1; level <= 6; ++level) {
            const bool write = level % 3 == 0;
            const std::string owner = write ? "w" : "r" + std::to_string(level);
            reply r;  // no co_await in a conditional expression (g++ 12)
            if (write)
                r = co_await s.write(owner, level);
            else
                r = co_await s.read(owner, level);
            REQUIRE(script_granted(r));
            CHECK(script_int(r, 1) > last);
            last = script_int(r, 1);
            co_await s.release(owner, "*");
        }
        CHECK(server.cmd1({"GET", s.fence}) == std::to_string(last));
    });
}

TEST_CASE("shared scripts: an upgrade is refused, a downgrade leaves no gap",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        const auto got32 = co_await s.read("r1", 1);
        REQUIRE(script_granted(got32));
        const auto up = co_await s.write("r1", 2);
        CHECK(script_int(up, 0) == -1);
        CHECK(server.cmd1({"HEXISTS", s.key, "ww"}) == "0");
        co_await s.release("r1", "*");
        // The writer takes a share (granted though another writer waits),
        // then lets go of its exclusive level: other writers stay out.
        const auto got33 = co_await s.write("w1", 1);
        REQUIRE(script_granted(got33));
        const auto got34 = co_await s.write("w2", 1);
        REQUIRE_FALSE(script_granted(got34));
        const auto share = co_await s.read("w1", 2);
        REQUIRE(script_granted(share));
        CHECK(script_int(share, 2) == 2);
        const auto got35 = co_await s.release("w1", "1");
        CHECK(script_int(got35, 0) == 2);
        CHECK(server.cmd1({"HEXISTS", s.key, "writer"}) == "0");
        const auto got36 = co_await s.write("w2", 2);
        CHECK_FALSE(script_granted(got36));
        // A re-entry of the downgraded owner is a share, not the writer's.
        const auto got37 = co_await s.write("w1", 3);
        CHECK(script_int(got37, 0) == -1);
        const auto got38 = co_await s.release("w1", "2");
        CHECK(script_int(got38, 0) == 1);
        const auto got39 = co_await s.write("w2", 3);
        CHECK(script_granted(got39));
    });
}

TEST_CASE("shared scripts: other kinds on the name are refused, and refuse it",
          "[shared][integration]") {
    with_shared([](shared_keys& s, redis_server& server) -> asio::awaitable<void> {
        server.cmd({"HSET", s.key, "owner", "m1", "fence", "5", "l:1", "5"});
        auto r = co_await s.read("o1", 1);
        CHECK_THAT(r.str, Catch::StartsWith("WRONGTYPE") && Catch::Contains("a corolock mutex"));
        r = co_await s.release("m1", "*");
        CHECK_THAT(r.str, Catch::Contains("a corolock mutex"));
        CHECK(server.cmd1({"HGET", s.key, "owner"}) == "m1");
        server.cmd({"DEL", s.key});
        server.cmd({"HSET", s.key, "kind", "semaphore", "capacity", "3"});
        r = co_await s.write("o1", 1);
        CHECK_THAT(r.str, Catch::Contains("a corolock semaphore, not a shared mutex"));
        server.cmd({"DEL", s.key});
        // A shared mutex, held by a writer or by readers, seen by the others.
        for (const auto k : {level_kind::exclusive, level_kind::shared}) {
            const auto got40 = co_await s.acquire("o1", k, 10'000, 1);
            REQUIRE(script_granted(got40));
            r = co_await s.eval(command{"EVAL", d::acquire_script().source, 2, s.key, s.fence,
                                        "m1", 1'000, 1, "1 host test"});
            CHECK_THAT(r.str, Catch::StartsWith("WRONGTYPE"));
            r = co_await s.eval(command{"EVAL", d::semaphore_acquire_script().source, 2, s.key,
                                        s.fence, "m1", 1'000, 1, 1, 3, "1 host test"});
            CHECK_THAT(r.str, Catch::StartsWith("WRONGTYPE"));
            co_await s.release("o1", "*");
        }
        // Bad input spends no token.
        const auto fence = server.cmd1({"GET", s.fence});
        r = co_await s.read("o1", 1, 0);
        CHECK_THAT(r.str, Catch::Contains("the lease must be"));
        r = co_await s.read("", 1);
        CHECK_THAT(r.str, Catch::Contains("the owner must be"));
        r = co_await s.eval(command{"EVAL", d::shared_acquire_script().source, 3, s.key, s.readers,
                                    s.fence, "o1", 1'000, 1, "h", "w", 0});
        CHECK_THAT(r.str, Catch::Contains("the level must be s, r or x"));
        CHECK(server.cmd1({"GET", s.fence}) == fence);
        CHECK(server.cmd1({"EXISTS", s.key}) == "0");
    });
}
