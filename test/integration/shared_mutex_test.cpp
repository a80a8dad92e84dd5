// corolock::shared_mutex against a live redis-server: readers together, a
// writer alone, wake-ups by release (never by a wait cap: the leases are
// long), writer preference, cancellation, downgrade and upgrade, the lost
// signal and other kinds on the name.
#include <corolock/corolock.hpp>
#include "redis/lock/lock_service.hpp"
#include "redis/lock/shared_scripts.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using corolock::shared_mutex;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;
// Long leases: a waiter woken only by its wait cap would take 30 s.
const corolock::lock_options long_lease{.lease = 30s, .wait = 20s};


// An acquire's outcome, filled by its handler.
struct outcome {
    std::optional<error_code> ec;
    guard g;
    auto handler() {
        return [this](error_code e, guard got) {
            ec = e;
            g = std::move(got);
        };
    }
};
}  // namespace

TEST_CASE("shared_mutex: readers hold together, a writer waits for the last of them",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        // Without the preference the writer sets no marker, so its only wait
        // cap is the readers' 30 s lease: only a wake-up ends it in time.
        std::vector<shared_mutex> readers;
        std::vector<guard> held;
        for (int i = 0; i < 3; ++i) readers.emplace_back(c, "rw:readers", corolock::shared_mutex_options{false});
        for (auto& r : readers) held.push_back(co_await r.acquire_shared(long_lease));
        CHECK(held[0].token() < held[1].token());
        CHECK(held[1].token() < held[2].token());
        shared_mutex writer(c, "rw:readers", {false});
        auto busy = co_await writer.try_acquire();
        CHECK_FALSE(busy);
        outcome w;
        writer.async_acquire(long_lease, w.handler());
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
        REQUIRE(waiting);
        const auto got1 = co_await held[0].release();
        CHECK_FALSE(got1);
        const auto got2 = co_await held[1].release();
        CHECK_FALSE(got2);
        co_await sleep_for(100ms);
        CHECK_FALSE(w.ec);  // one reader still holds
        const auto got3 = co_await held[2].release();
        CHECK_FALSE(got3);
        const bool woken = co_await eventually([&] { return w.ec.has_value(); }, 10s);
        REQUIRE(woken);
        CHECK_FALSE(*w.ec);
        CHECK(w.g.token() > held[2].token());
        CHECK(writer.held_levels() == 1);
    });
}

TEST_CASE("shared_mutex: a writer's release wakes every waiting reader together",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        shared_mutex writer(c, "rw:wake");
        auto held = co_await writer.acquire(long_lease);
        std::vector<shared_mutex> readers;
        for (int i = 0; i < 4; ++i) readers.emplace_back(c, "rw:wake");
        std::vector<outcome> got(readers.size());
        for (std::size_t i = 0; i < readers.size(); ++i)
            readers[i].async_acquire_shared(long_lease, got[i].handler());
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 4; }, 5s);
        REQUIRE(waiting);
        const auto got4 = co_await held.release();
        CHECK_FALSE(got4);
        const bool all = co_await eventually([&] {
            for (auto& o : got)
                if (!o.ec) return false;
            return true;
        }, 10s);
        REQUIRE(all);
        // All four hold at once.
        for (auto& o : got) {
            CHECK_FALSE(*o.ec);
            CHECK(o.g.owns_lock());
            CHECK_FALSE(o.g.lost());
        }
        CHECK(local_waiters(c) == 0);
    });
}

TEST_CASE("shared_mutex: a waiting writer holds back new readers; without preference it does not",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        for (const bool preference : {true, false}) {
            const std::string name = preference ? "rw:pref" : "rw:nopref";
            shared_mutex r1(c, name, {preference}), r2(c, name, {preference}),
                w(c, name, {preference});
            auto first = co_await r1.acquire_shared(long_lease);
            outcome wo;
            w.async_acquire(long_lease, wo.handler());
            const bool waiting = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
            REQUIRE(waiting);
            co_await sleep_for(50ms);  // the writer's second attempt marks it
            auto second = co_await r2.try_acquire_shared(long_lease);
            CHECK(second.has_value() == !preference);
            if (second) co_await second->release();
            // A reader already in re-enters even past a waiting writer.
            auto again = co_await r1.try_acquire_shared(long_lease);
            CHECK(again);
            if (again) co_await again->release();
            co_await first.release();
            const bool woken = co_await eventually([&] { return wo.ec.has_value(); }, 10s);
            REQUIRE(woken);
            CHECK_FALSE(*wo.ec);
            co_await wo.g.release();
        }
    });
}

TEST_CASE("shared_mutex: a reader sleeps through a writer's turn, and a dead writer's marker "
          "holds it back only for the marker's lease",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server& server) -> asio::awaitable<void> {
        // The reader on a client of its own, to count what it sends: no
        // health-check PING within the test.
        auto cfg = plain_config_for(server);
        cfg.health_check_interval = 60s;
        corolock::client rc(co_await asio::this_coro::executor, cfg);
        co_await wait_connected(rc);
        const std::string name = "rw:defer";
        const std::string key = lock_key(name);
        shared_mutex writer(c, name), reader(rc, name);
        auto warm = co_await reader.acquire_shared(long_lease);  // its scripts are loaded
        co_await warm.release();
        auto held = co_await writer.acquire(long_lease);
        outcome ro;
        reader.async_acquire_shared(long_lease, ro.handler());
        // Waiting, with its attempt after subscribing answered.
        const bool waiting = co_await eventually(
            [&] { return local_waiters(rc) == 1 && rc.stats().queued == 0; }, 5s);
        REQUIRE(waiting);
        // A writer marks itself waiting and dies: its marker lives 2 s.
        const auto marked_at = std::chrono::steady_clock::now();
        server.cmd({"EVAL", std::string(corolock::detail::shared_acquire_script().source), "3", key,
                    key + ":leases", key + ":fence", "dead", "30000", "1", "1 host test", "x",
                    "2000"});
        REQUIRE(server.cmd1({"HEXISTS", key, "ww"}) == "1");
        const auto sent = rc.stats().commands_sent;
        const auto released = co_await held.release();
        CHECK_FALSE(released);
        const auto released_at = std::chrono::steady_clock::now();
        // Only writers may get in now: the reader is not woken to try.
        co_await sleep_for(300ms);
        CHECK(rc.stats().commands_sent == sent);
        CHECK_FALSE(ro.ec);
        // It gets in once the marker ended, not at the holder's 30 s lease end.
        const bool in = co_await eventually([&] { return ro.ec.has_value(); }, 10s);
        REQUIRE(in);
        CHECK_FALSE(*ro.ec);
        CHECK(std::chrono::steady_clock::now() - marked_at >= 1900ms);
        CHECK(std::chrono::steady_clock::now() - released_at < 5s);
        co_await ro.g.release();
        rc.stop();
    });
}

TEST_CASE("shared_mutex: a cancelled writer's wait leaks nothing and holds back no reader",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server& server) -> asio::awaitable<void> {
        shared_mutex r1(c, "rw:cancel"), r2(c, "rw:cancel"), w(c, "rw:cancel");
        auto first = co_await r1.acquire_shared(long_lease);
        asio::cancellation_signal signal;
        outcome wo;
        w.async_acquire(long_lease, asio::bind_cancellation_slot(signal.slot(), wo.handler()));
        const bool marked = co_await eventually(
            [&] { return server.cmd1({"HEXISTS", lock_key("rw:cancel"), "ww"}) == "1"; }, 5s);
        REQUIRE(marked);
        signal.emit(asio::cancellation_type::terminal);
        const bool ended = co_await eventually([&] { return wo.ec.has_value(); }, 5s);
        REQUIRE(ended);
        CHECK(*wo.ec == asio::error::operation_aborted);
        // The marker goes with the wait, long before its own 2 s lease.
        const bool unmarked = co_await eventually(
            [&] { return server.cmd1({"HEXISTS", lock_key("rw:cancel"), "ww"}) == "0"; }, 1s);
        CHECK(unmarked);
        auto second = co_await r2.try_acquire_shared(long_lease);
        CHECK(second);
        CHECK(w.held_levels() == 0);
        CHECK(local_waiters(c) == 0);
        // A cancelled reader's wait leaks nothing either.
        if (second) co_await second->release();
        co_await first.release();
        auto excl = co_await w.acquire(long_lease);
        outcome ro;
        asio::cancellation_signal rsignal;
        r2.async_acquire_shared(long_lease, asio::bind_cancellation_slot(rsignal.slot(), ro.handler()));
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
        REQUIRE(waiting);
        rsignal.emit(asio::cancellation_type::terminal);
        const bool rended = co_await eventually([&] { return ro.ec.has_value(); }, 5s);
        REQUIRE(rended);
        CHECK(r2.held_levels() == 0);
        co_await excl.release();
        CHECK(server.cmd1({"EXISTS", lock_key("rw:cancel")}) == "0");
        CHECK(server.cmd1({"EXISTS", lock_key("rw:cancel") + ":leases"}) == "0");
    });
}

TEST_CASE("shared_mutex: a downgrade leaves no gap; an upgrade is refused",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        shared_mutex a(c, "rw:grade"), other(c, "rw:grade"), reader(c, "rw:grade");
        auto excl = co_await a.acquire(long_lease);
        outcome wo;
        other.async_acquire(long_lease, wo.handler());
        const bool waiting = co_await eventually([&] { return local_waiters(c) == 1; }, 5s);
        REQUIRE(waiting);
        const auto excl_token = excl.token();
        auto shared = co_await a.downgrade(excl);
        CHECK_FALSE(excl.owns_lock());
        CHECK(shared.token() > excl_token);
        CHECK(a.held_levels() == 1);
        co_await sleep_for(200ms);
        CHECK_FALSE(wo.ec);  // the other writer never got in between
        // An upgrade: the handle holds only a share now.
        auto [uec, ug] = co_await a.async_acquire(long_lease, use_nothrow);
        CHECK(uec == error::upgrade_refused);
        CHECK_FALSE(ug.owns_lock());
        auto [tec, tg] = co_await a.async_try_acquire({}, use_nothrow);
        CHECK(tec == error::upgrade_refused);
        const auto got5 = co_await shared.release();
        CHECK_FALSE(got5);
        const bool woken = co_await eventually([&] { return wo.ec.has_value(); }, 10s);
        REQUIRE(woken);
        CHECK_FALSE(*wo.ec);
        CHECK(wo.g.token() > shared.token());
    });
}

TEST_CASE("shared_mutex: the watchdog keeps a reader's share; a deleted key fires lost",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server& server) -> asio::awaitable<void> {
        shared_mutex r(c, "rw:renew"), w(c, "rw:renew");
        auto g = co_await r.acquire_shared({.lease = 300ms});
        co_await sleep_for(900ms);  // three leases
        auto none = co_await w.try_acquire();
        CHECK_FALSE(none);
        CHECK(g.lease_deadline() > std::chrono::steady_clock::now());
        server.cmd({"DEL", lock_key("rw:renew"), lock_key("rw:renew") + ":leases"});
        auto result = co_await (g.until_lost() || sleep_for(5s));
        CHECK(result.index() == 0);
        const auto got6 = co_await g.release();
        CHECK(got6);
    });
}

TEST_CASE("shared_mutex: other kinds on the name refuse it, and it refuses them",
          "[shared][integration]") {
    with_client([](corolock::client& c, redis_server&) -> asio::awaitable<void> {
        shared_mutex s(c, "rw:kinds");
        corolock::mutex m(c, "rw:kinds");
        corolock::semaphore sem(c, "rw:kinds", 2);
        {
            auto g = co_await s.acquire_shared(long_lease);
            auto [mec, mg] = co_await m.async_try_acquire({}, use_nothrow);
            CHECK(mec == error::wrong_type);
            auto [sec, sg] = co_await sem.async_try_acquire(1, {}, use_nothrow);
            CHECK(sec == error::wrong_type);
            co_await g.release();
        }
        auto g = co_await m.acquire(long_lease);
        auto [rec, rg] = co_await s.async_try_acquire_shared({}, use_nothrow);
        CHECK(rec == error::wrong_type);
        auto [wec, wg] = co_await s.async_acquire({.wait = 1s}, use_nothrow);
        CHECK(wec == error::wrong_type);
        co_await g.release();
        CHECK_THROWS_AS(shared_mutex(c, "bad{name}"), boost::system::system_error);
    });
}
