// The Redis fence (src/redis/fence/fence_library.cpp, include/corolock/fence.hpp)
// against real servers: a write with a token older than the newest one
// written through the same fence key is refused by the server, on one
// server, through Sentinel (across a failover) and on a Cluster, through the library's functions and through
// async_fenced_exec; the library loads itself where it is missing.
#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/fair_mutex.hpp>
#include <corolock/fence.hpp>
#include <corolock/mutex.hpp>
#include <corolock/semaphore.hpp>
#include <corolock/shared_mutex.hpp>

#include "redis/topology/slot_map.hpp"
#include "support/async_test.hpp"
#include "support/cluster_fleet.hpp"
#include "support/redis_server.hpp"
#include "support/sentinel_fleet.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using corolock::command;
using corolock::error;
using corolock::error_code;

namespace {

using corolock::test::use_nothrow;

// The server's error text for an FCALL, or "" when it succeeded.
std::string fcall_error(redis_server& s, const std::vector<std::string>& args) {
    try {
        s.cmd(args);
    } catch (const redis_reply_error& e) {
        return e.what();
    }
    return {};
}

bool library_loaded(redis_server& s) {
    const auto libs = s.cmd({"FUNCTION", "LIST", "LIBRARYNAME", "corolock"});
    for (const auto& v : libs)
        if (v == "corolock") return true;
    return false;
}

// How many times the server ran COMMAND (lower case) since the last
// CONFIG RESETSTAT, inside functions included (INFO commandstats).
long calls_of(redis_server& s, const std::string& command) {
    const std::string info = s.cmd1({"INFO", "commandstats"});
    const std::string key = "cmdstat_" + command + ":calls=";
    const auto at = info.find(key);
    if (at == std::string::npos) return 0;
    return std::stol(info.substr(at + key.size()));
}

// A client or a backend.
template <class Redis>
auto fenced(Redis& c, const std::string& fence, std::uint64_t token, command cmd) {
    return corolock::async_fenced_exec(c, fence, token, std::move(cmd), use_nothrow);
}

}  // namespace

TEST_CASE("fence: an older token is refused after a newer one wrote, an equal one passes",
          "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    REQUIRE_FALSE(library_loaded(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // The first call finds the library missing, loads it and is sent again.
        auto [ec5, r5] = co_await fenced(c, "stock:fence", 5, command{"SET", "stock", "v5"});
        CHECK_FALSE(ec5);
        CHECK(r5.str == "OK");
        CHECK(library_loaded(server));
        auto [ec7, r7] = co_await fenced(c, "stock:fence", 7, command{"SET", "stock", "v7"});
        CHECK_FALSE(ec7);
        // The stale writer: refused, and nothing changed.
        auto [stale, rs] = co_await fenced(c, "stock:fence", 5, command{"SET", "stock", "late"});
        CHECK(stale == error::stale_token);
        CHECK(stale == corolock::condition::lease_gone);
        CHECK(rs.str.rfind("STALE token 5 is older than 7", 0) == 0);
        CHECK(server.cmd1({"GET", "stock"}) == "v7");
        CHECK(server.cmd1({"GET", "stock:fence"}) == "7");
        // The same holder again: an equal token passes.
        auto [eq, re] = co_await fenced(c, "stock:fence", 7, command{"HSET", "stock:h", "f", "1"});
        CHECK_FALSE(eq);
        CHECK(re.integer == 1);
        // A failing command records nothing (WRONGTYPE: stock is a string).
        auto [wrong, rw] = co_await fenced(c, "stock:fence", 9, command{"HSET", "stock", "f", "1"});
        CHECK(wrong == error::wrong_type);
        CHECK(server.cmd1({"GET", "stock:fence"}) == "7");
        c.stop();
    });
}

TEST_CASE("fence: the library's functions check, record and refuse", "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await corolock::async_fence_install(c, use_nothrow);
        CHECK_FALSE(ec);
        // Installing twice is installing once.
        auto [again, r2] = co_await corolock::async_fence_install(c, use_nothrow);
        CHECK_FALSE(again);
        c.stop();
    });
    REQUIRE(library_loaded(server));
    CHECK(server.cmd1({"FCALL", "corolock_fenced_set", "2", "f", "k", "10", "a", "PX", "60000"}) ==
          "OK");
    CHECK(std::stoll(server.cmd1({"PTTL", "k"})) > 0);
    CHECK(fcall_error(server, {"FCALL", "corolock_fenced_set", "2", "f", "k", "9", "b"})
              .rfind("STALE", 0) == 0);
    CHECK(server.cmd1({"GET", "k"}) == "a");
    CHECK(server.cmd1({"FCALL", "corolock_fence_check", "1", "f", "11"}) == "OK");
    CHECK(fcall_error(server, {"FCALL", "corolock_fence_check", "1", "f", "10"}).rfind("STALE", 0) == 0);
    CHECK(server.cmd1({"FCALL", "corolock_fenced_hset", "2", "f", "h", "11", "x", "1", "y", "2"}) == "2");
    CHECK(fcall_error(server, {"FCALL", "corolock_fenced_del", "2", "f", "h", "3"}).rfind("STALE", 0) == 0);
    CHECK(server.cmd1({"EXISTS", "h"}) == "1");
    CHECK(server.cmd1({"FCALL", "corolock_fenced_del", "2", "f", "h", "12"}) == "1");
    CHECK(server.cmd1({"EXISTS", "h"}) == "0");
    // Tokens compare exactly beyond 2^53, and leading zeros do not matter.
    CHECK(server.cmd1({"FCALL", "corolock_fence_check", "1", "big", "18446744073709551615"}) == "OK");
    CHECK(fcall_error(server, {"FCALL", "corolock_fence_check", "1", "big", "18446744073709551614"})
              .rfind("STALE", 0) == 0);
    CHECK(server.cmd1({"FCALL", "corolock_fence_check", "1", "z", "0012"}) == "OK");
    CHECK(server.cmd1({"GET", "z"}) == "12");
    // Bad input: each named, nothing recorded.
    for (const std::string bad : {"-1", "abc", "1.5", "", "18446744073709551616"}) {
        INFO(bad);
        const auto why = fcall_error(server, {"FCALL", "corolock_fence_check", "1", "bad", bad});
        CHECK(why.find("non-negative integer") != std::string::npos);
    }
    CHECK(server.cmd({"EXISTS", "bad"}) == std::vector<std::string>{"0"});
    CHECK(fcall_error(server, {"FCALL", "corolock_fenced_set", "1", "f", "13", "v"})
              .find("2 keys") != std::string::npos);
    CHECK(fcall_error(server, {"FCALL", "corolock_fenced_set", "2", "f", "k", "13", "v", "PX", "x"})
              .find("TOKEN VALUE [PX milliseconds]") != std::string::npos);
    CHECK(server.cmd1({"GET", "f"}) == "12");
}

TEST_CASE("fence: a write with the recorded token reads the fence once and writes only the data",
          "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await corolock::async_fence_install(c, use_nothrow);
        CHECK_FALSE(ec);
        c.stop();
    });
    // A newer token: GET the fence, SET the data, SET the fence.
    server.cmd({"CONFIG", "RESETSTAT"});
    CHECK(server.cmd1({"FCALL", "corolock_fenced_set", "2", "f", "k", "7", "a"}) == "OK");
    CHECK(calls_of(server, "get") == 1);
    CHECK(calls_of(server, "set") == 2);
    CHECK(server.cmd1({"GET", "f"}) == "7");
    // The same token again (the holder writing on): the fence already holds
    // it, so only the data is written, by every function.
    server.cmd({"CONFIG", "RESETSTAT"});
    CHECK(server.cmd1({"FCALL", "corolock_fenced_set", "2", "f", "k", "7", "b"}) == "OK");
    CHECK(server.cmd1({"FCALL", "corolock_fenced_exec", "2", "f", "k", "7", "SET", "c"}) == "OK");
    CHECK(server.cmd1({"FCALL", "corolock_fence_check", "1", "f", "7"}) == "OK");
    CHECK(calls_of(server, "get") == 3);
    CHECK(calls_of(server, "set") == 2);
    CHECK(server.cmd1({"GET", "k"}) == "c");
    CHECK(server.cmd1({"GET", "f"}) == "7");
    // An equal token written with leading zeros is the same token.
    CHECK(server.cmd1({"FCALL", "corolock_fenced_set", "2", "f", "k", "007", "d"}) == "OK");
    CHECK(server.cmd1({"GET", "f"}) == "7");
    // And the older one is still refused, changing nothing.
    CHECK(fcall_error(server, {"FCALL", "corolock_fenced_set", "2", "f", "k", "6", "e"})
              .rfind("STALE", 0) == 0);
    CHECK(server.cmd1({"GET", "k"}) == "d");
}

TEST_CASE("fence: the sequencer check on Redis is one small read and answers as the status "
          "does, for every lock kind",
          "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // async_check_token's answer for each token, against the rule it
        // documents applied to the full status read just before.
        auto agree = [&](std::string name, const std::vector<std::uint64_t>& tokens,
                         bool current_expected) -> asio::awaitable<void> {
            for (const auto t : tokens) {
                auto [sec, st] = co_await corolock::async_lock_status(c, name, use_nothrow);
                auto [cec, current] = co_await corolock::async_check_token(c, name, t, use_nothrow);
                INFO(name << " token " << t);
                REQUIRE_FALSE(sec);
                REQUIRE_FALSE(cec);
                CHECK(current == (st.held && st.last_token == t));
                CHECK(current == (current_expected && t == tokens.front()));
            }
        };
        corolock::mutex m{c, "chk-mutex"};
        auto [mec, gm] = co_await m.async_acquire({.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(mec);
        // The mutex's check: one GET and one HMGET in one script, no more
        // (the status script reads the time, the TTL, the holder...). The
        // first check loads the script (EVALSHA, NOSCRIPT, EVAL); the second
        // is counted.
        auto [warm_ec, warm] = co_await corolock::async_check_token(c, "chk-mutex", gm.token(),
                                                                    use_nothrow);
        REQUIRE_FALSE(warm_ec);
        server.cmd({"CONFIG", "RESETSTAT"});
        auto [cec, current] = co_await corolock::async_check_token(c, "chk-mutex", gm.token(),
                                                                   use_nothrow);
        REQUIRE_FALSE(cec);
        CHECK(current);
        CHECK(calls_of(server, "evalsha") == 1);
        CHECK(calls_of(server, "eval") == 0);
        CHECK(calls_of(server, "get") == 1);
        CHECK(calls_of(server, "hmget") == 1);
        CHECK(calls_of(server, "hget") == 0);
        CHECK(calls_of(server, "time") == 0);
        CHECK(calls_of(server, "pttl") == 0);
        const std::vector<std::uint64_t> tokens_1{gm.token(), gm.token() + 1, gm.token() - 1, 0};
        co_await agree("chk-mutex", tokens_1, true);

        corolock::fair_mutex f{c, "chk-fair"};
        auto [fec, gf] = co_await f.async_acquire({.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(fec);
        const std::vector<std::uint64_t> tokens_2{gf.token(), gf.token() + 1};
        co_await agree("chk-fair", tokens_2, true);

        corolock::shared_mutex sh{c, "chk-shared"};
        auto [rec, gr] = co_await sh.async_acquire_shared({.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(rec);
        const std::vector<std::uint64_t> tokens_3{gr.token(), gr.token() + 1};
        co_await agree("chk-shared", tokens_3, true);
        corolock::shared_mutex shx{c, "chk-shared-x"};
        auto [xec, gx] = co_await shx.async_acquire({.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(xec);
        const std::vector<std::uint64_t> tokens_4{gx.token(), gx.token() + 1};
        co_await agree("chk-shared-x", tokens_4, true);

        corolock::semaphore sem{c, "chk-sem", 3};
        auto [sec, gs] = co_await sem.async_acquire(1, {.lease = 10s}, use_nothrow);
        REQUIRE_FALSE(sec);
        const std::vector<std::uint64_t> tokens_5{gs.token(), gs.token() + 1};
        co_await agree("chk-sem", tokens_5, true);

        // Released, each is free: every token is stale, as the status says.
        const std::uint64_t tm = gm.token(), tf = gf.token(), tr = gr.token(), tx = gx.token(),
                            ts = gs.token();
        const auto rm = co_await gm.release();
        const auto rf = co_await gf.release();
        const auto rr = co_await gr.release();
        const auto rx = co_await gx.release();
        const auto rs = co_await gs.release();
        CHECK_FALSE((rm || rf || rr || rx || rs));
        const std::vector<std::uint64_t> tokens_6{tm};
        co_await agree("chk-mutex", tokens_6, false);
        const std::vector<std::uint64_t> tokens_7{tf};
        co_await agree("chk-fair", tokens_7, false);
        const std::vector<std::uint64_t> tokens_8{tr};
        co_await agree("chk-shared", tokens_8, false);
        const std::vector<std::uint64_t> tokens_9{tx};
        co_await agree("chk-shared-x", tokens_9, false);
        const std::vector<std::uint64_t> tokens_10{ts};
        co_await agree("chk-sem", tokens_10, false);
        // A key that is no corolock lock: the same error as the status's.
        server.cmd({"SET", "corolock:{chk-str}", "x"});
        auto [wst, wstatus] = co_await corolock::async_lock_status(c, "chk-str", use_nothrow);
        auto [wck, wcurrent] = co_await corolock::async_check_token(c, "chk-str", 1, use_nothrow);
        CHECK(wst == error::wrong_type);
        CHECK(wck == wst);
        c.stop();
    });
}

TEST_CASE("fence: bad input from C++ is refused before anything is sent",
          "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [empty_fence, r1] = co_await fenced(c, "", 1, command{"SET", "k", "v"});
        CHECK(empty_fence == error::invalid_argument);
        CHECK(r1.str.find("fence key is empty") != std::string::npos);
        auto [no_key, r2] = co_await fenced(c, "f", 1, command{"PING"});
        CHECK(no_key == error::invalid_argument);
        CHECK(r2.str.find("needs a key") != std::string::npos);
        c.stop();
    });
    CHECK(server.cmd1({"EXISTS", "k"}) == "0");
    CHECK(server.cmd1({"EXISTS", "f"}) == "0");
}

TEST_CASE("fence: a server without Redis Functions is named as the cause",
          "[integration][fence]") {
    // FUNCTION renamed away, as a server before Redis 7.0 lacks it.
    redis_server_options opts;
    opts.extra_args = {"--rename-command", "FUNCTION", "corolock_test_renamed_function"};
    redis_server server{opts};
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await corolock::async_fence_install(c, use_nothrow);
        CHECK(ec == error::no_functions);
        CHECK(r.str.find("Redis 7.0 or later") != std::string::npos);
        auto [wec, wr] = co_await fenced(c, "f", 1, command{"SET", "k", "v"});
        CHECK(wec == error::no_functions);
        c.stop();
    });
    CHECK(server.cmd({"EXISTS", "k"}) == std::vector<std::string>{"0"});
    // FCALL unknown too, as on Redis 6: the call itself names the cause.
    redis_server_options old;
    old.extra_args = {"--rename-command", "FCALL", "corolock_test_renamed_fcall"};
    redis_server redis6{old};
    corolock::client c6{ioc.get_executor(), redis6.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [wec, wr] = co_await fenced(c6, "f", 1, command{"SET", "k", "v"});
        CHECK(wec == error::no_functions);
        CHECK(wr.str.find("Redis 7.0 or later") != std::string::npos);
        c6.stop();
    });
}

TEST_CASE("fence: a holder whose lease lapsed cannot write after the next holder did",
          "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex a{c, "account:7"};
        corolock::mutex b{c, "account:7"};
        // A: a short lease and no watchdog, as a holder paused past its lease.
        auto [aec, ga] = co_await a.async_acquire({.lease = 300ms, .watchdog = false}, use_nothrow);
        REQUIRE_FALSE(aec);
        // B waits until A's lease ends on the server, then holds the lock.
        auto [bec, gb] = co_await b.async_acquire({.wait = 20s}, use_nothrow);
        REQUIRE_FALSE(bec);
        REQUIRE(gb.token() > ga.token());
        auto [wb, rb] = co_await fenced(c, "{account:7}:fence", gb.token(),
                                        command{"SET", "{account:7}:balance", "from B"});
        CHECK_FALSE(wb);
        // A wakes up and writes with its old token: refused by the server.
        auto [wa, ra] = co_await fenced(c, "{account:7}:fence", ga.token(),
                                        command{"SET", "{account:7}:balance", "from A"});
        CHECK(wa == error::stale_token);
        CHECK(server.cmd1({"GET", "{account:7}:balance"}) == "from B");
        co_await gb.release();
        c.stop();
    });
}

TEST_CASE("fence: on a Cluster a stale write is refused, keys in two slots are refused, "
          "every primary gets the library",
          "[integration][fence][cluster]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    // A Cluster is opened as a backend, not a client (one connection).
    corolock::backend c{ioc.get_executor(), fleet.url()};
    using corolock::detail::cluster::key_slot;
    // Hash tags whose slots lie on different primaries: each loads the
    // library on demand where it is missing.
    const std::vector<std::string> tags{"{a}", "{b}", "{c}", "{d}", "{e}"};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        for (const auto& t : tags) {
            auto [ec2, r2] = co_await fenced(c, t + ":fence", 2, command{"SET", t + ":v", "2"});
            CHECK_FALSE(ec2);
            auto [ec1, r1] = co_await fenced(c, t + ":fence", 1, command{"SET", t + ":v", "1"});
            CHECK(ec1 == error::stale_token);
        }
        REQUIRE(key_slot("fence:x") != key_slot("x"));
        auto [split, rs] = co_await fenced(c, "fence:x", 3, command{"SET", "x", "3"});
        CHECK(split == error::invalid_argument);
        CHECK(rs.str.find("same hash tag") != std::string::npos);
        auto [ec, r] = co_await corolock::async_fence_install(c, use_nothrow);
        CHECK_FALSE(ec);
        c.stop();
    }, 60s);
    for (const auto& t : tags) {
        auto* at = fleet.primary_of_slot(key_slot(t));
        REQUIRE(at != nullptr);
        CHECK(at->cmd1({"GET", t + ":v"}) == "2");
    }
    int primaries = 0;
    for (std::size_t i = 0; i < fleet.size(); ++i) {
        if (fleet.node(i).cmd1({"ROLE"}) != "master") continue;
        ++primaries;
        CHECK(library_loaded(fleet.node(i)));
    }
    CHECK(primaries == 3);
}

TEST_CASE("fence: on a Cluster a primary refusing FUNCTION LOAD is named and the others keep "
          "the library, and a fenced call elsewhere still loads it on demand",
          "[integration][fence][cluster]") {
    cluster_fleet fleet;
    std::vector<redis_server*> primaries;
    for (std::size_t i = 0; i < fleet.size(); ++i)
        if (fleet.node(i).cmd1({"ROLE"}) == "master") primaries.push_back(&fleet.node(i));
    REQUIRE(primaries.size() == 3);
    // A real refusal: this primary's ACL denies FUNCTION LOAD (NOPERM).
    redis_server& refusing = *primaries[2];
    refusing.cmd({"ACL", "SETUSER", "default", "-function|load"});
    const std::string refusing_at = "127.0.0.1:" + std::to_string(refusing.port());
    using corolock::detail::cluster::key_slot;
    // A hash tag served by the refusing primary, and one served by another.
    std::string on_refusing, elsewhere;
    for (int i = 0; i < 200 && (on_refusing.empty() || elsewhere.empty()); ++i) {
        const std::string t = "{t" + std::to_string(i) + "}";
        (fleet.primary_of_slot(key_slot(t)) == &refusing ? on_refusing : elsewhere) = t;
    }
    REQUIRE_FALSE(on_refusing.empty());
    REQUIRE_FALSE(elsewhere.empty());
    asio::io_context ioc;
    corolock::backend c{ioc.get_executor(), fleet.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await corolock::async_fence_install(c, use_nothrow);
        CHECK(ec);
        CHECK_THAT(r.str, Catch::Contains("loaded on 2 of 3 primaries"));
        CHECK_THAT(r.str, Catch::Contains("missing on " + refusing_at + " (NOPERM"));
        for (auto* p : primaries) {
            if (p == &refusing) continue;
            CHECK_THAT(r.str, !Catch::Contains("127.0.0.1:" + std::to_string(p->port()) + " ("));
            CHECK(library_loaded(*p));
            p->cmd({"FUNCTION", "DELETE", "corolock"});  // for the on-demand load below
        }
        CHECK_FALSE(library_loaded(refusing));
        // On demand: the load fails on the refusing primary only; a call
        // whose slot is elsewhere is sent again and written.
        auto [ok, r1] = co_await fenced(c, elsewhere + ":fence", 2,
                                        command{"SET", elsewhere + ":v", "2"});
        CHECK_FALSE(ok);
        CHECK_THAT(r1.str, Catch::Equals("OK"));  // SET's, not the load's report
        // One whose slot is on the refusing primary fails with the report.
        auto [refused, r2] = co_await fenced(c, on_refusing + ":fence", 2,
                                             command{"SET", on_refusing + ":v", "2"});
        CHECK(refused);
        CHECK_THAT(r2.str, Catch::Contains("missing on " + refusing_at + " (NOPERM"));
        c.stop();
    }, 60s);
    for (auto* p : primaries) CHECK(library_loaded(*p) == (p != &refusing));
    CHECK(fleet.primary_of_slot(key_slot(elsewhere))->cmd1({"GET", elsewhere + ":v"}) == "2");
    CHECK(refusing.cmd1({"EXISTS", on_refusing + ":v"}) == "0");
}

TEST_CASE("fence: through Sentinel the fence record survives a failover and still refuses "
          "the older token",
          "[integration][fence][sentinel]") {
    sentinel_fleet fleet;
    asio::io_context ioc;
    corolock::backend b{ioc.get_executor(), fleet.url()};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // The library is loaded on the primary on demand; the write and its
        // token are recorded there.
        auto [e2, r2] = co_await fenced(b, "{acct}:fence", 2, command{"SET", "{acct}:v", "2"});
        REQUIRE_FALSE(e2);
        auto [e1, r1] = co_await fenced(b, "{acct}:fence", 1, command{"SET", "{acct}:v", "1"});
        CHECK(e1 == error::stale_token);
    }, 60s);
    // Both replicas have the library, the value and the fence record (FUNCTION
    // LOAD and the FCALL's writes replicate) before the primary is replaced.
    REQUIRE(fleet.server(0).cmd1({"WAIT", "2", "10000"}) == "2");
    fleet.sentinel(1).cmd({"SENTINEL", "FAILOVER", fleet.options().service});
    const auto now = fleet.wait_for_failover(0, std::chrono::milliseconds(30'000));
    REQUIRE(now != 0);
    CHECK(library_loaded(fleet.server(now)));
    // The old primary demoted too: until then it still takes writes, and a
    // write sent there before the backend followed the switch would be
    // answered by the old record (CI once saw this race). Bounded: 600
    // looks, 50 ms apart.
    bool demoted = false;
    for (int i = 0; i < 600 && !demoted; ++i) {
        const auto role = fleet.server(0).cmd({"ROLE"});
        demoted = !role.empty() && role[0] == "slave";
        if (!demoted) std::this_thread::sleep_for(50ms);
    }
    REQUIRE(demoted);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        // The backend follows Sentinel to the new primary. A write may meet
        // the switch (a dropped or READONLY connection): asked again, at
        // most 100 times, each after the reply, until the server answers
        // the fence's verdict.
        auto write = [&](std::uint64_t token, std::string value) -> asio::awaitable<error_code> {
            error_code last{};
            for (int i = 0; i < 100; ++i) {
                auto [ec, r] =
                    co_await fenced(b, "{acct}:fence", token, command{"SET", "{acct}:v", value});
                last = ec;
                if (ec == error::stale_token || !ec) break;
                asio::steady_timer pause{ioc, 100ms};
                co_await pause.async_wait(use_nothrow);
            }
            co_return last;
        };
        const auto stale = co_await write(1, "1");
        CHECK(stale == error::stale_token);
        const auto e3 = co_await write(3, "3");
        CHECK_FALSE(e3);
        b.stop();
    }, 60s);
    CHECK(fleet.server(now).cmd1({"GET", "{acct}:v"}) == "3");
    CHECK(fleet.server(now).cmd1({"GET", "{acct}:fence"}) == "3");
}

TEST_CASE("fence: a fenced write cancelled before it is written is never sent",
          "[integration][fence]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), server.url()};
    // Connected and the library loaded, so the cancelled call's FCALL is the
    // next thing the connection would write.
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await corolock::async_fence_install(c, use_nothrow);
        REQUIRE_FALSE(ec);
    });
    for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                            asio::cancellation_type::total}) {
        asio::cancellation_signal cancel;
        std::optional<error_code> got;
        corolock::async_fenced_exec(c, "{cancel}:fence", 7, command{"SET", "{cancel}:v", "x"},
                                    asio::bind_cancellation_slot(
                                        cancel.slot(), [&](error_code ec, corolock::reply) {
                                            got = ec;
                                        }));
        cancel.emit(type);  // before the call's first step has run
        run_async(ioc, [&]() -> asio::awaitable<void> {
            // A PING after it: its reply means the connection wrote everything
            // queued before it.
            auto [pec, pr] = co_await c.async_exec(command{"PING"}, use_nothrow);
            CHECK_FALSE(pec);
        });
        REQUIRE(got.has_value());
        CHECK(*got == asio::error::operation_aborted);
        CHECK(server.cmd1({"GET", "{cancel}:v"}).empty());
        CHECK(server.cmd1({"GET", "{cancel}:fence"}).empty());
    }
    c.stop();
}
