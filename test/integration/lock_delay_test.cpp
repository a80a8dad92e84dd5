// Lock-delay on a live redis-server (docs/safety.md, "Lock-delay"): a holder
// process killed with kill -9 keeps the name for its lease plus the delay,
// a clean release frees it at once, the holder's own loss does not shorten
// it, a delay of 0 writes nothing new, and the kinds without it refuse it.
#include <corolock/admin.hpp>
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/child_process.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using namespace corolock::test;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto lease = 1000ms;
constexpr auto delay = 2000ms;

std::chrono::milliseconds pttl_of(const redis_server& server, const std::string& name) {
    return std::chrono::milliseconds(std::stoll(server.cmd1({"PTTL", lock_key(name)})));
}

// The name's status once it is in lock-delay, polled (bounded) from outside.
asio::awaitable<corolock::lock_status> status_in_delay(corolock::backend& b,
                                                       const std::string& name) {
    corolock::lock_status st;
    const auto deadline = clock_type::now() + 10s;
    for (int i = 0; i < 1000 && clock_type::now() < deadline; ++i) {
        auto [ec, s] = co_await corolock::async_lock_status(b, name, use_nothrow);
        REQUIRE_FALSE(ec);
        st = s;
        if (st.delayed_for > 0ms || !st.held) break;
        co_await sleep_for(10ms);
    }
    co_return st;
}

}  // namespace

TEST_CASE("lock-delay: a holder killed with kill -9 keeps the name for its lease plus the delay",
          "[lock-delay][integration]") {
    redis_server server;
    const std::string name = "delay-kill";
    child_process holder({COROLOCK_TEST_WORKER, "hold", client_url(server), name,
                          std::to_string(lease.count()), std::to_string(delay.count())});
    REQUIRE_FALSE(wait_for_line(holder, "acquired", 10s).empty());
    CHECK(server.cmd1({"HGET", lock_key(name), "delay"}) == std::to_string(delay.count()));
    holder.kill9();
    const auto killed = clock_type::now();
    // Killed mid-lease (the watchdog kept it): what the server still keeps
    // is the lease's rest, then the whole delay.
    const auto left = pttl_of(server, name);
    CHECK(left > delay);
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), client_url(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, name);
        // Past the lease the name is in lock-delay: held, with its holder's
        // delay, and refused to a try.
        const auto st = co_await status_in_delay(b, name);
        CHECK(st.held);
        CHECK(st.lock_delay == delay);
        CHECK(st.delayed_for > 0ms);
        CHECK(st.delayed_for <= delay);
        if (st.delayed_for > 500ms) {
            auto [ec, g] = co_await m.async_try_acquire({.lease = lease}, use_nothrow);
            CHECK(ec == error::lock_held);
        }
        // A waiter gets it when the record expires, not before (its wait is
        // capped at the record's PTTL, and no release publishes).
        auto g = co_await m.acquire({.lease = lease, .wait = 20s});
        const auto took = clock_type::now() - killed;
        INFO("free " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms after the kill; " << left.count() << " ms were left");
        CHECK(took >= left - (left / 100 + 20ms));
        CHECK(took >= delay);
        CHECK(took < left + 10s);  // a sanity bound only
        const auto released = co_await g.release();
        CHECK_FALSE(released);
        b.stop();
    }, 60s);
}

TEST_CASE("lock-delay: a holder process that releases cleanly frees the name at once",
          "[lock-delay][integration]") {
    redis_server server;
    const std::string name = "delay-clean";
    child_process holder({COROLOCK_TEST_WORKER, "hold", client_url(server), name,
                          std::to_string(lease.count()), std::to_string(delay.count()),
                          "release"});
    REQUIRE_FALSE(wait_for_line(holder, "released ok", 10s).empty());
    CHECK(server.cmd1({"EXISTS", lock_key(name)}) == "0");
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), client_url(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, name);
        // The same holder restarted, or anyone: the first try gets it.
        auto [ec, g] = co_await m.async_try_acquire({.lease = lease, .lock_delay = delay},
                                                    use_nothrow);
        CHECK_FALSE(ec);
        const auto released = co_await g.release();
        CHECK_FALSE(released);
        b.stop();
    }, 30s);
}

TEST_CASE("lock-delay: the holder's own loss leaves the record to expire, refused to it too",
          "[lock-delay][integration]") {
    redis_server server;
    const std::string name = "delay-lost";
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), client_url(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, name);
        auto g = co_await m.acquire(
            {.lease = 300ms, .wait = 5s, .watchdog = false, .lock_delay = delay});
        const auto lost = co_await eventually([&] { return g.lost(); }, 10s);
        REQUIRE(lost);
        // The clean-up removed its level, and kept owner, fence, holder and
        // delay until the record expires.
        const auto cleaned = co_await eventually(
            [&] { return server.cmd1({"HLEN", lock_key(name)}) == "4"; }, 10s, 10ms);
        CHECK(cleaned);
        CHECK(server.cmd1({"HGET", lock_key(name), "delay"}) == std::to_string(delay.count()));
        {
            // The holder's deadline comes a drift allowance before the
            // server's lease end. In that window (stretched here, so that the
            // case does not hang on timing) the emptied record refuses its
            // own owner too: a re-entry would let a clean release end the
            // delay early.
            server.cmd({"PEXPIRE", lock_key(name), "30000"});
            auto [ec, again] = co_await m.async_try_acquire({.lease = lease}, use_nothrow);
            CHECK(ec == error::lock_held);
            server.cmd({"PEXPIRE", lock_key(name), std::to_string(delay.count())});
        }
        // The holder's deadline comes a drift allowance before the server's
        // lease end; from there on the record is in lock-delay.
        const auto in_delay =
            co_await eventually([&] { return pttl_of(server, name) <= delay; }, 5s, 10ms);
        CHECK(in_delay);
        const auto left = pttl_of(server, name);
        CHECK(left > 0ms);
        if (left > 500ms) {
            // The same handle is refused too while the delay lasts.
            auto [ec, again] = co_await m.async_try_acquire({.lease = lease}, use_nothrow);
            CHECK(ec == error::lock_held);
        }
        const auto released = co_await g.release();
        CHECK(released);  // a lost tenure's release never reports success...
        CHECK(server.cmd1({"EXISTS", lock_key(name)}) == "1");  // ...nor deletes the record
        b.stop();
    }, 30s);
}

TEST_CASE("lock-delay: a delay of 0 writes no field and no key, and the other kinds refuse one",
          "[lock-delay][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), client_url(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        {
            corolock::mutex m(b, "delay-zero");
            auto g = co_await m.acquire({.lease = 5s});
            CHECK(server.cmd1({"HEXISTS", lock_key("delay-zero"), "delay"}) == "0");
            CHECK(server.cmd({"KEYS", "corolock:{delay-zero}*"}).size() == 2);  // hash, fence
            CHECK(pttl_of(server, "delay-zero") <= 5000ms);
            const auto released = co_await g.release();
            CHECK_FALSE(released);
        }
        {
            corolock::mutex m(b, "delay-two");
            auto g = co_await m.acquire({.lease = 5s, .lock_delay = delay});
            CHECK(server.cmd({"KEYS", "corolock:{delay-two}*"}).size() == 2);
            CHECK(pttl_of(server, "delay-two") > 5000ms);  // the lease, then the delay
            const auto released = co_await g.release();
            CHECK_FALSE(released);
        }
        const corolock::lock_options delayed{.lease = 5s, .lock_delay = delay};
        corolock::fair_mutex fair(b, "delay-fair");
        auto [fec, fg] = co_await fair.async_try_acquire(delayed, use_nothrow);
        CHECK(fec == error::not_supported);
        corolock::shared_mutex shared(b, "delay-shared");
        auto [sec, sg] = co_await shared.async_try_acquire(delayed, use_nothrow);
        CHECK(sec == error::not_supported);
        corolock::semaphore sem(b, "delay-sem", 2);
        auto [mec, mg] = co_await sem.async_try_acquire(1, delayed, use_nothrow);
        CHECK(mec == error::not_supported);
        // Refused before any request: nothing of theirs is on the server.
        CHECK(server.cmd({"KEYS", "corolock:{delay-[fs]*"}).empty());
        b.stop();
    }, 30s);
}
