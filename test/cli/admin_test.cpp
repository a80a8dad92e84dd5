// The admin API behind `corolock status`, `corolock list` and `corolock
// break`, against a live redis-server: what it reports (the holder too),
// what list finds, what break removes and whom it wakes, the owner-checked
// release, argument checks, and cancellation.
#include <corolock/admin.hpp>
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using corolock::lock_status;
using corolock::test::redis_server;
using corolock::test::run_async;

namespace {

using corolock::test::use_nothrow;

corolock::config config_for(const redis_server& server) {
    auto cfg = corolock::config::from_url(server.url());
    cfg.command_timeout = 2s;
    cfg.connect_timeout = 2s;
    return cfg;
}

// The server's clock (TIME) in µs.
std::int64_t server_time_us(const redis_server& server) {
    const auto t = server.cmd({"TIME"});
    REQUIRE(t.size() == 2);
    return std::stoll(t[0]) * 1'000'000 + std::stoll(t[1]);
}

std::int64_t since_us(const corolock::lock_holder& h) {
    return std::chrono::duration_cast<std::chrono::microseconds>(h.since.time_since_epoch()).count();
}

std::string this_host() {
    std::array<char, 256> host{};
    REQUIRE(::gethostname(host.data(), host.size() - 1) == 0);
    return host.data();
}

std::set<std::string> names_of(const corolock::lock_list& list) {
    std::set<std::string> names;
    for (const auto& l : list.locks) names.insert(l.name);
    return names;
}

// One redis-server per test case, and a client of it.
struct admin_fixture {
    redis_server server;
    asio::io_context ioc;
    corolock::client c{ioc.get_executor(), config_for(server)};
};

}  // namespace

TEST_CASE_METHOD(admin_fixture, "cli: admin: status of a lock that was never used", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await corolock::async_lock_status(c, "never", use_nothrow);
        CHECK_FALSE(ec);
        CHECK_FALSE(st.held);
        CHECK(st.owner.empty());
        CHECK(st.ttl == 0ms);
        CHECK(st.levels == 0);
        CHECK(st.last_token == 0);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: status reports owner, levels, ttl and the last token", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "held");
        auto g1 = co_await m.acquire({.lease = 10s});
        auto g2 = co_await m.acquire({.lease = 10s});  // re-entry: a second level
        auto [ec, st] = co_await corolock::async_lock_status(c, "held", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(st.held);
        CHECK(st.owner == m.owner_id());
        CHECK(st.levels == 2);
        CHECK(st.ttl > 0ms);
        CHECK(st.ttl <= 10s);
        CHECK(st.last_token == g2.token());

        co_await g2.release();
        co_await g1.release();
        auto [ec2, after] = co_await corolock::async_lock_status(c, "held", use_nothrow);
        CHECK_FALSE(ec2);
        CHECK_FALSE(after.held);
        CHECK(after.levels == 0);
        CHECK(after.last_token == g2.token());  // the counter outlives the lock
        c.stop();
    });
}

TEST_CASE("cli: admin: a key without expiry reports ttl -1", "[admin]") {
    redis_server server;
    server.cmd({"HSET", "corolock:{manual}", "owner", "someone", "fence", "1", "l:1", "1"});
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await corolock::async_lock_status(c, "manual", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(st.held);
        CHECK(st.owner == "someone");
        CHECK(st.ttl == -1ms);
        CHECK(st.levels == 1);
        CHECK_FALSE(st.holder);  // none recorded
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: break removes the lock and wakes a waiter at once", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(c, "brk");
        corolock::mutex waiter(c, "brk");
        auto g = co_await holder.acquire({.lease = 30s});

        bool woke = false;
        std::chrono::steady_clock::time_point woke_at;
        std::optional<error_code> released;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto w = co_await waiter.acquire({.lease = 30s, .wait = 10s});
            woke_at = std::chrono::steady_clock::now();
            woke = true;
            released = co_await w.release();
        }, asio::detached);
        asio::steady_timer settle(ioc, 200ms);  // let the waiter subscribe
        co_await settle.async_wait(asio::use_awaitable);
        REQUIRE_FALSE(woke);

        const auto broke_at = std::chrono::steady_clock::now();
        auto [ec, removed] = co_await corolock::async_break_lock(c, "brk", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(removed.held);
        CHECK(removed.owner == holder.owner_id());
        CHECK(removed.levels == 1);

        for (int i = 0; i < 500 && !woke; ++i) {
            asio::steady_timer t(ioc, 10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        REQUIRE(woke);
        // Loose: unwoken, the waiter would sleep to its 10 s wait cap (the
        // lease had 30 s left); 3 s still proves the break's message woke it.
        CHECK(woke_at - broke_at < 3s);

        // Break again once the waiter's release has completed: nothing is
        // left to remove.
        for (int i = 0; i < 200 && !released; ++i) {
            asio::steady_timer t(ioc, 10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        REQUIRE(released);
        CHECK_FALSE(*released);
        auto [ec2, again] = co_await corolock::async_break_lock(c, "brk", use_nothrow);
        INFO("holder " << holder.owner_id() << ", waiter " << waiter.owner_id() << ", found "
                       << again.owner << " with " << again.levels << " levels");
        CHECK_FALSE(ec2);
        CHECK_FALSE(again.held);
        CHECK(again.owner.empty());
        auto [rec] = co_await g.async_release(use_nothrow);
        CHECK(rec == error::expired);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: release_owner touches only its owner's lock", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "own");
        auto g1 = co_await m.acquire({.lease = 10s});
        auto g2 = co_await m.acquire({.lease = 10s});

        auto [other] = co_await corolock::async_release_owner(c, "own", "somebody-else", use_nothrow);
        CHECK(other == error::not_owner);
        auto [still, st] = co_await corolock::async_lock_status(c, "own", use_nothrow);
        CHECK(st.held);

        auto [mine] = co_await corolock::async_release_owner(c, "own", m.owner_id(), use_nothrow);
        CHECK_FALSE(mine);  // every level at once
        auto [gone_ec, gone] = co_await corolock::async_lock_status(c, "own", use_nothrow);
        CHECK_FALSE(gone.held);

        auto [twice] = co_await corolock::async_release_owner(c, "own", m.owner_id(), use_nothrow);
        CHECK(twice == error::expired);
        auto [empty_owner] = co_await corolock::async_release_owner(c, "own", "", use_nothrow);
        CHECK(empty_owner == error::invalid_argument);
        c.stop();
    });
}

TEST_CASE("cli: admin: bad names, foreign keys, a stopped client", "[admin]") {
    redis_server server;
    server.cmd({"SET", "corolock:{plain}", "x"});
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [e1, s1] = co_await corolock::async_lock_status(c, "a{b", use_nothrow);
        CHECK(e1 == error::invalid_argument);
        auto [e2, s2] = co_await corolock::async_break_lock(c, "", use_nothrow);
        CHECK(e2 == error::invalid_argument);
        auto [e3, s3] = co_await corolock::async_lock_status(c, "plain", use_nothrow);
        CHECK(e3 == error::wrong_type);
        c.stop();
        auto [e4, s4] = co_await corolock::async_lock_status(c, "x", use_nothrow);
        CHECK(e4 == error::client_stopped);
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: cancellation right after initiation completes at once", "[admin]") {
    // The server is paused, so only cancellation can complete the operation
    // before the command timeout.
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ping_ec, pong] = co_await c.async_exec(corolock::command{"PING"}, use_nothrow);
        REQUIRE_FALSE(ping_ec);
        server.pause();
        asio::cancellation_signal cancel;
        bool done = false;
        error_code result;
        corolock::async_lock_status(
            c, "x", asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, lock_status) {
                result = ec;
                done = true;
            }));
        cancel.emit(asio::cancellation_type::terminal);
        for (int i = 0; i < 100 && !done; ++i) {
            asio::steady_timer t(ioc, 5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        server.resume();
        CHECK(done);
        CHECK(result == asio::error::operation_aborted);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: works with a plain callback", "[admin]") {
    bool called = false;
    corolock::async_lock_status(c, "cb", [&](error_code ec, lock_status st) {
        CHECK_FALSE(ec);
        CHECK_FALSE(st.held);
        called = true;
        c.stop();
    });
    CHECK_FALSE(called);  // never inside the initiating call
    ioc.run_for(5s);
    CHECK(called);
}

TEST_CASE("cli: admin: status names the holder, with since by the server's clock", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    auto cfg = config_for(server);
    cfg.holder_label = "nightly report\n--full";
    corolock::client c(ioc.get_executor(), cfg);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "who");
        const auto before = server_time_us(server);
        auto g1 = co_await m.acquire({.lease = 10s});
        const auto after = server_time_us(server);
        auto [ec, st] = co_await corolock::async_lock_status(c, "who", use_nothrow);
        const auto read = server_time_us(server);
        REQUIRE_FALSE(ec);
        REQUIRE(st.holder);
        CHECK(st.holder->host == this_host());
        CHECK(st.holder->pid == ::getpid());
        CHECK(st.holder->label == "nightly report\n--full");
        const auto since = since_us(*st.holder);
        CHECK(before <= since);
        CHECK(since <= after);
        // held_for is the server's TIME in the status script minus since.
        CHECK(st.holder->held_for >= 0ms);
        CHECK(st.holder->held_for.count() <= (read - since) / 1000);

        // A re-entry is the same tenure: the holder and its since stay.
        auto g2 = co_await m.acquire({.lease = 10s});
        auto [ec2, st2] = co_await corolock::async_lock_status(c, "who", use_nothrow);
        REQUIRE_FALSE(ec2);
        REQUIRE(st2.holder);
        CHECK(st2.levels == 2);
        CHECK(since_us(*st2.holder) == since);
        co_await g2.release();
        co_await g1.release();

        // Not held: no holder. The next tenure records its own since.
        auto [ec3, st3] = co_await corolock::async_lock_status(c, "who", use_nothrow);
        CHECK_FALSE(ec3);
        CHECK_FALSE(st3.holder);
        const auto before_next = server_time_us(server);
        auto g3 = co_await m.acquire({.lease = 10s});
        auto [ec4, st4] = co_await corolock::async_lock_status(c, "who", use_nothrow);
        REQUIRE(st4.holder);
        CHECK(since_us(*st4.holder) >= before_next);
        co_await g3.release();
        c.stop();
    });
}

TEST_CASE("cli: admin: the holder label is cut to its limit, none is fine", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    auto cfg = config_for(server);
    cfg.holder_label = std::string(corolock::max_holder_label_length + 50, 'x');
    corolock::client long_label(ioc.get_executor(), cfg);
    corolock::client no_label(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex a(long_label, "long"), b(no_label, "none");
        auto ga = co_await a.acquire({.lease = 10s});
        auto gb = co_await b.acquire({.lease = 10s});
        auto [ea, sa] = co_await corolock::async_lock_status(no_label, "long", use_nothrow);
        auto [eb, sb] = co_await corolock::async_lock_status(no_label, "none", use_nothrow);
        REQUIRE(sa.holder);
        CHECK(sa.holder->label == std::string(corolock::max_holder_label_length, 'x'));
        REQUIRE(sb.holder);
        CHECK(sb.holder->label.empty());
        CHECK(sb.holder->host == this_host());
        co_await ga.release();
        co_await gb.release();
        long_label.stop();
        no_label.stop();
    });
}

TEST_CASE("cli: admin: list finds held locks only, by pattern, and skips other keys",
          "[admin]") {
    redis_server server;
    asio::io_context ioc;
    auto cfg = config_for(server);
    cfg.holder_label = "lister";
    corolock::client c(ioc.get_executor(), cfg);
    // Keys that are not locks: a fence counter, a hash that only looks like
    // a lock key's neighbour, a string under a lock key's name.
    server.cmd({"SET", "corolock:{gone}:fence", "5"});
    server.cmd({"HSET", "corolock:{x}:other", "owner", "y"});
    server.cmd({"SET", "corolock:{plain}", "x"});
    server.cmd({"HSET", "unrelated", "owner", "z"});
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex a(c, "db-1"), b(c, "db-2"), d(c, "web\nfront"), free_lock(c, "free");
        auto ga = co_await a.acquire({.lease = 10s});
        auto gb = co_await b.acquire({.lease = 10s});
        auto gd = co_await d.acquire({.lease = 10s});
        auto gf = co_await free_lock.acquire({.lease = 10s});
        co_await gf.release();
        const corolock::lock_list_options every;

        auto [ec, all] = co_await corolock::async_list_locks(c, every, use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK_FALSE(all.truncated);
        CHECK(names_of(all) == std::set<std::string>{"db-1", "db-2", "web\nfront"});
        for (const auto& l : all.locks) {
            CHECK(l.status.held);
            REQUIRE(l.status.holder);
            CHECK(l.status.holder->label == "lister");
            CHECK(l.status.holder->pid == ::getpid());
            CHECK(l.status.levels == 1);
        }
        // Named, not braced into the call: g++ 12 destroys a braced
        // temporary in a co_await expression twice.
        corolock::lock_list_options db_only{.pattern = "db-*"};
        auto [ec2, db] = co_await corolock::async_list_locks(c, db_only, use_nothrow);
        REQUIRE_FALSE(ec2);
        CHECK(names_of(db) == std::set<std::string>{"db-1", "db-2"});
        corolock::lock_list_options db_2{.pattern = "db-[2]"};
        auto [ec3, one] = co_await corolock::async_list_locks(c, db_2, use_nothrow);
        REQUIRE_FALSE(ec3);
        CHECK(names_of(one) == std::set<std::string>{"db-2"});
        corolock::lock_list_options braced{.pattern = "a{b"};
        auto [ec4, bad] = co_await corolock::async_list_locks(c, braced, use_nothrow);
        CHECK(ec4 == error::invalid_argument);

        co_await ga.release();
        auto [ec5, after] = co_await corolock::async_list_locks(c, every, use_nothrow);
        REQUIRE_FALSE(ec5);
        CHECK(names_of(after) == std::set<std::string>{"db-2", "web\nfront"});
        co_await gb.release();
        co_await gd.release();
        c.stop();
        auto [ec6, stopped] = co_await corolock::async_list_locks(c, every, use_nothrow);
        CHECK(ec6 == error::client_stopped);
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: list pages through SCAN and stops at its bounds", "[admin]") {
    // Many more keys than one SCAN step looks at: locks among other keys.
    constexpr int locks = 120, others = 300;
    for (int i = 0; i < others; ++i) server.cmd({"SET", "other:" + std::to_string(i), "v"});
    run_async(ioc, [&]() -> asio::awaitable<void> {
        std::vector<std::unique_ptr<corolock::mutex>> handles;
        std::vector<corolock::guard> guards;
        std::set<std::string> expected;
        for (int i = 0; i < locks; ++i) {
            const auto name = "job-" + std::to_string(i);
            handles.push_back(std::make_unique<corolock::mutex>(c, name));
            guards.push_back(co_await handles.back()->acquire({.lease = 30s}));
            expected.insert(name);
        }
        server.cmd({"CONFIG", "RESETSTAT"});
        corolock::lock_list_options small_steps{.count_per_step = 10};
        auto [ec, all] = co_await corolock::async_list_locks(c, small_steps, use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK_FALSE(all.truncated);
        CHECK(all.locks.size() == expected.size());  // each once
        CHECK(names_of(all) == expected);
        // It took many SCAN steps (about 420 / 10), and never KEYS.
        const auto stats = server.cmd1({"INFO", "commandstats"});
        const auto at = stats.find("cmdstat_scan:calls=");
        REQUIRE(at != std::string::npos);
        CHECK(std::stoll(stats.substr(at + 19)) >= 20);
        CHECK(stats.find("cmdstat_keys:") == std::string::npos);

        // Two steps of 10 cannot cover 420 keys.
        corolock::lock_list_options two_steps{.count_per_step = 10, .max_steps = 2};
        auto [ec2, part] = co_await corolock::async_list_locks(c, two_steps, use_nothrow);
        REQUIRE_FALSE(ec2);
        CHECK(part.truncated);
        CHECK(part.locks.size() < expected.size());

        corolock::lock_list_options five{.max_locks = 5};
        auto [ec3, few] = co_await corolock::async_list_locks(c, five, use_nothrow);
        REQUIRE_FALSE(ec3);
        CHECK(few.truncated);
        CHECK(few.locks.size() == 5);

        for (auto& g : guards) co_await g.release();
        const corolock::lock_list_options every;
        auto [ec4, none] = co_await corolock::async_list_locks(c, every, use_nothrow);
        REQUIRE_FALSE(ec4);
        CHECK(none.locks.empty());
        CHECK_FALSE(none.truncated);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: list cancelled while the server is paused completes at once", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ping_ec, pong] = co_await c.async_exec(corolock::command{"PING"}, use_nothrow);
        REQUIRE_FALSE(ping_ec);
        server.pause();
        asio::cancellation_signal cancel;
        bool done = false;
        error_code result;
        corolock::async_list_locks(
            c, corolock::lock_list_options{},
            asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, corolock::lock_list) {
                result = ec;
                done = true;
            }));
        cancel.emit(asio::cancellation_type::terminal);
        for (int i = 0; i < 100 && !done; ++i) {
            asio::steady_timer t(ioc, 5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        server.resume();
        CHECK(done);
        CHECK(result == asio::error::operation_aborted);
        c.stop();
    });
}

TEST_CASE("cli: admin: status, list and break on a backend opened from a config", "[admin]") {
    redis_server server;
    asio::io_context ioc;
    corolock::backend locks(ioc.get_executor(), config_for(server));
    // Another service answers through its own admin (the seam): etcd, with
    // nothing listening on port 1, fails to connect (never a status).
    corolock::backend other(ioc.get_executor(), "etcd://127.0.0.1:1");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        CHECK(locks.scheme() == "redis");
        corolock::mutex m(locks, "on-backend");
        auto g = co_await m.acquire({.lease = 10s});
        auto [ec, st] = co_await corolock::async_lock_status(locks, "on-backend", use_nothrow);
        CHECK_FALSE(ec);
        CHECK(st.held);
        CHECK(st.owner == m.owner_id());
        CHECK(st.last_token == g.token());

        corolock::lock_list_options lo;
        lo.pattern = "on-*";
        auto [lec, list] = co_await corolock::async_list_locks(locks, lo, use_nothrow);
        CHECK_FALSE(lec);
        CHECK(names_of(list) == std::set<std::string>{"on-backend"});

        auto [bec, removed] = co_await corolock::async_break_lock(locks, "on-backend", use_nothrow);
        CHECK_FALSE(bec);
        CHECK(removed.held);
        CHECK(removed.owner == m.owner_id());
        auto [aec, after] = co_await corolock::async_lock_status(locks, "on-backend", use_nothrow);
        CHECK_FALSE(aec);
        CHECK_FALSE(after.held);

        auto [eec, est] = co_await corolock::async_lock_status(other, "on-backend", use_nothrow);
        INFO(eec.message());
        CHECK(eec == boost::asio::error::connection_refused);
        CHECK_FALSE(est.held);
        locks.stop();
        other.stop();
    });
}

// ---- every kind: the fair mutex and the semaphore ----

namespace {

// Polls `done` every 10 ms for at most 10 s.
asio::awaitable<void> wait_for_flag(asio::io_context& ioc, const bool& done) {
    for (int i = 0; i < 1000 && !done; ++i) {
        asio::steady_timer t(ioc, 10ms);
        co_await t.async_wait(asio::use_awaitable);
    }
}

}  // namespace

TEST_CASE_METHOD(admin_fixture, "cli: admin: status of a semaphore: capacity, permits, holders", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::semaphore a(c, "sem", 5);
        corolock::semaphore b(c, "sem", 5);
        auto a1 = co_await a.acquire(2, {.lease = 10s});
        auto a2 = co_await a.acquire(1, {.lease = 10s});
        auto b1 = co_await b.acquire(1, {.lease = 10s});
        auto [ec, st] = co_await corolock::async_lock_status(c, "sem", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(st.type == corolock::lock_type::semaphore);
        CHECK(st.held);
        CHECK(st.owner.empty());
        CHECK(st.capacity == 5);
        CHECK(st.permits_in_use == 4);
        CHECK(st.holder_count == 2);
        CHECK(st.levels == 3);
        CHECK(st.ttl > 0ms);
        CHECK(st.ttl <= 10s);
        CHECK(st.last_token == b1.token());
        REQUIRE(st.holders.size() == 2);
        CHECK(st.holders[0].ttl <= st.holders[1].ttl);  // soonest lease end first
        const auto& ha = st.holders[0].owner == a.owner_id() ? st.holders[0] : st.holders[1];
        const auto& hb = st.holders[0].owner == a.owner_id() ? st.holders[1] : st.holders[0];
        CHECK(ha.owner == a.owner_id());
        CHECK(ha.permits == 3);
        CHECK(ha.levels == 2);
        CHECK(hb.owner == b.owner_id());
        CHECK(hb.permits == 1);
        CHECK(hb.ttl > 0ms);
        REQUIRE(hb.holder);
        CHECK(hb.holder->pid == ::getpid());

        co_await a1.release();
        co_await a2.release();
        co_await b1.release();
        auto [ec2, free] = co_await corolock::async_lock_status(c, "sem", use_nothrow);
        REQUIRE_FALSE(ec2);
        CHECK_FALSE(free.held);
        CHECK(free.permits_in_use == 0);
        CHECK(free.holder_count == 0);
        CHECK(free.holders.empty());
        CHECK(free.last_token == b1.token());
        c.stop();
    });
}

TEST_CASE("cli: admin: a semaphore counts live grants only, and lists 16 owners at most",
          "[admin]") {
    redis_server server;
    const auto now_ms = server_time_us(server) / 1000;
    // x's lease ended a second ago (no script has pruned it yet); y's is live.
    server.cmd({"HSET", "corolock:{hand}", "kind", "semaphore", "capacity", "3", "used", "3",
                "next", std::to_string(now_ms - 1000), "g:x", "2 1/2", "g:y", "1 1/1"});
    server.cmd({"ZADD", "corolock:{hand}:leases", std::to_string(now_ms - 1000), "x",
                std::to_string(now_ms + 60000), "y"});
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await corolock::async_lock_status(c, "hand", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(st.held);
        CHECK(st.permits_in_use == 1);
        CHECK(st.holder_count == 1);
        REQUIRE(st.holders.size() == 1);
        CHECK(st.holders[0].owner == "y");
        CHECK_FALSE(st.holders[0].holder);  // none recorded
        // Break deletes both keys of the semaphore: its hash and lease ends.
        auto [ecb, broken] = co_await corolock::async_break_lock(c, "hand", use_nothrow);
        REQUIRE_FALSE(ecb);
        CHECK(broken.permits_in_use == 1);
        CHECK(server.cmd({"EXISTS", "corolock:{hand}", "corolock:{hand}:leases"}).at(0) == "0");

        std::vector<corolock::semaphore> handles;
        std::vector<corolock::guard> guards;
        for (int i = 0; i < 20; ++i) handles.emplace_back(c, "many", 20);
        // Lease ends in the reverse of the handles' order (and of nothing
        // in their owner ids): the listing follows the lease ends.
        for (std::size_t i = 0; i < handles.size(); ++i)
            guards.push_back(co_await handles[i].acquire(1, {.lease = 20s - i * 200ms}));
        auto [ec2, many] = co_await corolock::async_lock_status(c, "many", use_nothrow);
        REQUIRE_FALSE(ec2);
        CHECK(many.holder_count == 20);
        CHECK(many.permits_in_use == 20);
        CHECK(many.holders.size() == corolock::max_listed_lock_owners);
        for (std::size_t i = 0; i < many.holders.size(); ++i)  // soonest lease end first
            CHECK(many.holders[i].owner == handles[handles.size() - 1 - i].owner_id());
        for (auto& g : guards) co_await g.release();
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: status of a fair mutex counts its queue", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "fq");
        corolock::fair_mutex waiter(c, "fq");
        auto g = co_await holder.acquire({.lease = 30s});
        bool got = false;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto w = co_await waiter.acquire({.lease = 30s, .wait = 20s});
            got = true;
            co_await w.release();
        }, asio::detached);
        co_await corolock::test::sleep_for(300ms);
        auto [ec, st] = co_await corolock::async_lock_status(c, "fq", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(st.type == corolock::lock_type::fair_mutex);
        CHECK(st.held);
        CHECK(st.owner == holder.owner_id());
        CHECK(st.levels == 1);
        CHECK(st.queued == 1);
        CHECK(st.holder_count == 1);
        CHECK(st.holders.empty());
        REQUIRE(st.holder);
        co_await g.release();
        co_await wait_for_flag(ioc, got);
        CHECK(got);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: break of a semaphore frees every permit and wakes a waiter at once",
          "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::semaphore holder(c, "sbrk", 2);
        corolock::semaphore waiter(c, "sbrk", 2);
        auto g = co_await holder.acquire(2, {.lease = 30s});
        bool woke = false;
        std::chrono::steady_clock::time_point woke_at;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto w = co_await waiter.acquire(1, {.lease = 30s, .wait = 20s});
            woke_at = std::chrono::steady_clock::now();
            woke = true;
            co_await w.release();
        }, asio::detached);
        co_await corolock::test::sleep_for(200ms);  // the waiter's cap is the holder's lease, 30 s
        REQUIRE_FALSE(woke);

        const auto broke_at = std::chrono::steady_clock::now();
        auto [ec, removed] = co_await corolock::async_break_lock(c, "sbrk", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(removed.type == corolock::lock_type::semaphore);
        CHECK(removed.held);
        CHECK(removed.permits_in_use == 2);
        CHECK(removed.holder_count == 1);
        co_await wait_for_flag(ioc, woke);
        REQUIRE(woke);
        // Loose: unwoken, the waiter would sleep to its cap (the holder's 30 s
        // lease; its wait is 20 s); 3 s still proves the break's message woke it.
        CHECK(woke_at - broke_at < 3s);
        auto [rec] = co_await g.async_release(use_nothrow);
        CHECK(rec == error::expired);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: break of a fair mutex keeps the queue and wakes its head at once",
          "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::fair_mutex holder(c, "fbrk");
        corolock::fair_mutex first(c, "fbrk");
        corolock::fair_mutex second(c, "fbrk");
        auto g = co_await holder.acquire({.lease = 30s});
        std::vector<int> order;
        bool first_in = false;
        std::chrono::steady_clock::time_point first_at;
        std::uint64_t handoffs_at_first = 0;
        auto wait_in = [&](corolock::fair_mutex& m, int id) -> asio::awaitable<void> {
            auto w = co_await m.acquire({.lease = 30s, .wait = 20s});
            order.push_back(id);
            if (id == 1) {
                first_at = std::chrono::steady_clock::now();
                // The grant is counted before its caller resumes.
                handoffs_at_first = c.metrics().handoff.count();
                first_in = true;
                co_await corolock::test::sleep_for(100ms);  // the second must not get in meanwhile
            }
            co_await w.release();
        };
        asio::co_spawn(ioc, wait_in(first, 1), asio::detached);
        co_await corolock::test::sleep_for(100ms);
        asio::co_spawn(ioc, wait_in(second, 2), asio::detached);
        co_await corolock::test::sleep_for(200ms);

        const auto handoffs_before = c.metrics().handoff.count();
        const auto broke_at = std::chrono::steady_clock::now();
        auto [ec, removed] = co_await corolock::async_break_lock(c, "fbrk", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(removed.type == corolock::lock_type::fair_mutex);
        CHECK(removed.held);
        CHECK(removed.owner == holder.owner_id());
        CHECK(removed.queued == 2);
        co_await wait_for_flag(ioc, first_in);
        REQUIRE(first_in);
        // Which wake-up let the head in: a grant whose attempt followed an
        // unlock message counts as a handoff (metrics_snapshot::handoff); one
        // by the waiter's own retry (every third of its 2 s entry lease,
        // 667 ms) does not. No time bound can tell those two apart (the retry
        // may come at any moment after the break), so the check is the metric.
        // The one benign exception: a retry that happened to be sent between
        // the break and its message (a window of about a round trip) is
        // granted as it arrives, with no handoff; it lands at once, so it is
        // allowed only when the grant came within 100 ms of the break.
        const bool by_message = handoffs_at_first == handoffs_before + 1;
        INFO("handoffs before the break " << handoffs_before << ", at the head's grant "
                                          << handoffs_at_first);
        CHECK((by_message || first_at - broke_at < 100ms));
        // Loose sanity bound: well below the 20 s wait and the 30 s lease.
        CHECK(first_at - broke_at < 3s);
        for (int i = 0; i < 500 && order.size() < 2; ++i) co_await corolock::test::sleep_for(10ms);
        CHECK(order == std::vector<int>{1, 2});
        auto [rec] = co_await g.async_release(use_nothrow);
        CHECK(rec == error::expired);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: release_owner of a semaphore or fair mutex, per kind", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::semaphore a(c, "sown", 3);
        corolock::semaphore b(c, "sown", 3);
        auto a1 = co_await a.acquire(1, {.lease = 10s});
        auto a2 = co_await a.acquire(1, {.lease = 10s});
        auto b1 = co_await b.acquire(1, {.lease = 10s});
        auto [mine] = co_await corolock::async_release_owner(c, "sown", a.owner_id(), use_nothrow);
        CHECK_FALSE(mine);
        auto [ec, st] = co_await corolock::async_lock_status(c, "sown", use_nothrow);
        CHECK(st.permits_in_use == 1);
        REQUIRE(st.holders.size() == 1);
        CHECK(st.holders[0].owner == b.owner_id());
        auto [again] = co_await corolock::async_release_owner(c, "sown", a.owner_id(), use_nothrow);
        CHECK(again == error::not_owner);  // b still holds permits
        co_await b1.release();
        auto [none] = co_await corolock::async_release_owner(c, "sown", a.owner_id(), use_nothrow);
        CHECK(none == error::expired);

        // A fair mutex's owner released: the lock passes to its queue's head.
        corolock::fair_mutex holder(c, "fown");
        corolock::fair_mutex waiter(c, "fown");
        auto g = co_await holder.acquire({.lease = 30s});
        bool got = false;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto w = co_await waiter.acquire({.lease = 30s, .wait = 20s});
            got = true;
            co_await w.release();
        }, asio::detached);
        co_await corolock::test::sleep_for(200ms);
        auto [other] = co_await corolock::async_release_owner(c, "fown", "somebody", use_nothrow);
        CHECK(other == error::not_owner);
        auto [fair] = co_await corolock::async_release_owner(c, "fown", holder.owner_id(), use_nothrow);
        CHECK_FALSE(fair);
        co_await wait_for_flag(ioc, got);
        CHECK(got);
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: list shows every kind once, with its kind", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "k-mutex");
        corolock::fair_mutex f(c, "k-fair");
        corolock::fair_mutex fw(c, "k-fair");
        corolock::semaphore s(c, "k-sem", 4);
        auto gm = co_await m.acquire({.lease = 10s});
        auto gf = co_await f.acquire({.lease = 10s});
        auto gs = co_await s.acquire(3, {.lease = 10s});
        bool got = false;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto w = co_await fw.acquire({.lease = 10s, .wait = 20s});
            got = true;
            co_await w.release();
        }, asio::detached);
        co_await corolock::test::sleep_for(200ms);
        REQUIRE(server.cmd({"EXISTS", "corolock:{k-fair}:queue"}).at(0) == "1");

        corolock::lock_list_options all;
        auto [ec, list] = co_await corolock::async_list_locks(c, all, use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(names_of(list) == std::set<std::string>{"k-mutex", "k-fair", "k-sem"});
        CHECK(list.locks.size() == 3);
        for (const auto& l : list.locks) {
            if (l.name == "k-mutex") CHECK(l.status.type == corolock::lock_type::mutex);
            if (l.name == "k-fair") {
                CHECK(l.status.type == corolock::lock_type::fair_mutex);
                CHECK(l.status.queued == 1);
            }
            if (l.name == "k-sem") {
                CHECK(l.status.type == corolock::lock_type::semaphore);
                CHECK(l.status.permits_in_use == 3);
                CHECK(l.status.capacity == 4);
            }
        }
        co_await gm.release();
        co_await gs.release();
        co_await gf.release();
        co_await wait_for_flag(ioc, got);
        c.stop();
    });
}

TEST_CASE("cli: admin: lock_type names, and a kind this version does not know", "[admin]") {
    CHECK(corolock::lock_type_name(corolock::lock_type::mutex) == "mutex");
    CHECK(corolock::lock_type_name(corolock::lock_type::fair_mutex) == "fair");
    CHECK(corolock::lock_type_name(corolock::lock_type::shared_mutex) == "shared");
    CHECK(corolock::lock_type_name(corolock::lock_type::semaphore) == "semaphore");
    redis_server server;
    // A shared mutex nobody holds, with a waiting writer's marker that ends
    // far in the future (server ms).
    server.cmd({"HSET", "corolock:{sh}", "kind", "shared", "ww", "x 99999999999999"});
    server.cmd({"HSET", "corolock:{odd}", "kind", "latch", "n", "3"});
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, st] = co_await corolock::async_lock_status(c, "sh", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(st.type == corolock::lock_type::shared_mutex);
        CHECK_FALSE(st.held);
        CHECK(st.queued == 1);
        CHECK(st.holder_count == 0);
        // Another owner's release touches nothing (the marker's owner's
        // would take its marker back, as a wait given up does).
        auto [rel] = co_await corolock::async_release_owner(c, "sh", "y", use_nothrow);
        CHECK(rel == error::expired);
        auto [e2, odd] = co_await corolock::async_lock_status(c, "odd", use_nothrow);
        CHECK(e2 == error::wrong_type);
        auto [e3, br] = co_await corolock::async_break_lock(c, "odd", use_nothrow);
        CHECK(e3 == error::wrong_type);
        CHECK(server.cmd({"EXISTS", "corolock:{odd}"}).at(0) == "1");  // untouched
        auto [e4, gone] = co_await corolock::async_break_lock(c, "sh", use_nothrow);
        CHECK_FALSE(e4);
        CHECK(gone.type == corolock::lock_type::shared_mutex);
        CHECK(server.cmd({"EXISTS", "corolock:{sh}"}).at(0) == "0");
        c.stop();
    });
}

TEST_CASE_METHOD(admin_fixture, "cli: admin: status, release_owner and break of a shared mutex", "[admin]") {
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::shared_mutex r1(c, "rw"), r2(c, "rw");
        // Without writer preference the writer's wait is capped by the
        // readers' leases (30 s), so only a wake-up lets it in sooner.
        corolock::shared_mutex w(c, "rw", {.writer_preference = false});
        auto a1 = co_await r1.acquire_shared({.lease = 30s});
        auto a2 = co_await r1.acquire_shared({.lease = 30s});
        auto b = co_await r2.acquire_shared({.lease = 20s});
        auto [ec, st] = co_await corolock::async_lock_status(c, "rw", use_nothrow);
        REQUIRE_FALSE(ec);
        CHECK(st.type == corolock::lock_type::shared_mutex);
        CHECK(st.held);
        CHECK(st.owner.empty());  // no writer
        CHECK(st.holder_count == 2);
        CHECK(st.queued == 0);
        REQUIRE(st.holders.size() == 2);
        // Soonest lease end first: r2's 20 s, then r1's two shares.
        CHECK(st.holders[0].owner == r2.owner_id());
        CHECK(st.holders[1].owner == r1.owner_id());
        CHECK(st.holders[1].levels == 2);
        CHECK(st.holders[1].permits == 0);
        CHECK(st.holders[1].ttl > 25s);

        bool wrote = false;
        std::chrono::steady_clock::time_point wrote_at;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto g = co_await w.acquire({.lease = 30s, .wait = 20s});
            wrote_at = std::chrono::steady_clock::now();
            wrote = true;
            co_await g.release();
        }, asio::detached);
        co_await corolock::test::sleep_for(200ms);
        REQUIRE_FALSE(wrote);

        // One reader's shares go; the other's stay, and the writer waits on.
        auto [rel] = co_await corolock::async_release_owner(c, "rw", r2.owner_id(), use_nothrow);
        CHECK_FALSE(rel);
        auto [e2, st2] = co_await corolock::async_lock_status(c, "rw", use_nothrow);
        CHECK(st2.holder_count == 1);
        REQUIRE(st2.holders.size() == 1);
        CHECK(st2.holders[0].owner == r1.owner_id());
        co_await corolock::test::sleep_for(100ms);
        CHECK_FALSE(wrote);

        // The break removes the readers with the hash and wakes the writer.
        const auto broke_at = std::chrono::steady_clock::now();
        auto [e3, removed] = co_await corolock::async_break_lock(c, "rw", use_nothrow);
        REQUIRE_FALSE(e3);
        CHECK(removed.type == corolock::lock_type::shared_mutex);
        CHECK(removed.held);
        CHECK(removed.holder_count == 1);
        co_await wait_for_flag(ioc, wrote);
        REQUIRE(wrote);
        // Loose: unwoken, the writer would sleep to its cap (the readers' 30 s
        // leases; its wait is 20 s); 3 s still proves the break's message woke it.
        CHECK(wrote_at - broke_at < 3s);
        CHECK(server.cmd({"EXISTS", "corolock:{rw}:leases"}).at(0) == "0");
        auto [rec] = co_await a1.async_release(use_nothrow);
        CHECK(rec == error::expired);
        c.stop();
    });
}
