// client::metrics() and config::observer against a live redis-server: one
// scenario per figure, each checked to move by exactly what it caused.
#include <corolock/corolock.hpp>
#include "redis/connection/client_impl.hpp"
#include "redis/lock/lock_service.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error;
using corolock::error_code;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

// Records every event, and whether it came on the client's strand.
struct recording_observer : corolock::observer {
    const corolock::client* client = nullptr;
    std::vector<std::string> events;
    bool off_strand = false;

    void note(std::string e) {
        if (client && !client->impl()->strand().running_in_this_thread()) off_strand = true;
        events.push_back(std::move(e));
    }
    void on_acquired(std::string_view lock, duration, bool contended) override {
        note("acquired " + std::string(lock) + (contended ? " contended" : ""));
    }
    void on_lost(std::string_view lock, std::string_view) override {
        note("lost " + std::string(lock));
    }
    void on_renewal_failed(std::string_view lock, error_code ec) override {
        note("renewal_failed " + std::string(lock) + " " + ec.message());
    }
    void on_release_found_gone(std::string_view lock, error_code ec) override {
        note("release_found_gone " + std::string(lock) + " " + ec.message());
    }
    void on_reconnected() override { note("reconnected"); }
};

struct throwing_observer : corolock::observer {
    int calls = 0;
    void on_acquired(std::string_view, duration, bool) override {
        ++calls;
        throw std::runtime_error("observer bug");
    }
    void on_release_found_gone(std::string_view, error_code) override {
        ++calls;
        throw 42;  // not even a std::exception
    }
};

std::string channel_of(const std::string& name) { return "corolock:{" + name + "}:unlock"; }

}  // namespace

TEST_CASE("metrics: each scenario moves exactly its counters, and the observer hears it",
          "[metrics][integration]") {
    redis_server server;
    asio::io_context ioc;
    auto obs = std::make_shared<recording_observer>();
    auto cfg = config_for(server);
    cfg.observer = obs;
    corolock::client c(ioc.get_executor(), cfg);
    obs->client = &c;
    // Holds the lock for the contended case: its own client, its own metrics.
    corolock::client other(ioc.get_executor(), config_for(server));

    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        corolock::metrics_snapshot m = c.metrics();
        CHECK(m.acquisitions == 0);
        CHECK(m.reconnects == 0);

        // 1. Uncontended: one acquisition, one wait observation, no handoff.
        {
            corolock::mutex lock(c, "m:free");
            auto g = co_await lock.acquire({.lease = 30s});
            CHECK(obs->events.size() == 1);  // told before the caller resumed
            const auto rec = co_await g.release();
            CHECK_FALSE(rec);
        }
        m = c.metrics();
        CHECK(m.acquisitions == 1);
        CHECK(m.contended_acquisitions == 0);
        CHECK(m.wait.count() == 1);
        CHECK(m.handoff.count() == 0);
        CHECK(m.releases_found_gone == 0);

        // 2. Contended: the waiter is woken by the holder's release.
        {
            corolock::mutex holder(other, "m:busy"), waiter(c, "m:busy");
            auto hg = co_await holder.acquire({.lease = 30s});
            std::optional<error_code> got;
            asio::co_spawn(co_await asio::this_coro::executor, [&]() -> asio::awaitable<void> {
                auto [ec, g] = co_await waiter.async_acquire({.lease = 30s, .wait = 10s}, use_nothrow);
                got = ec;
                if (!ec) co_await g.release();
            }, asio::detached);
            const bool subscribed = co_await eventually([&] {
                return server.cmd({"PUBSUB", "NUMSUB", channel_of("m:busy")}).back() == "1";
            }, 5s);
            REQUIRE(subscribed);
            // Refused once more after subscribing: it waits now, capped at
            // the holder's TTL (which it notes as the lock's expiry hint).
            auto svc = corolock::detail::lock_service::of(*c.impl());
            const bool waiting = co_await eventually([&] {
                return svc->expiry_hint(channel_of("m:busy")) !=
                       std::chrono::steady_clock::time_point::min();
            }, 5s);
            REQUIRE(waiting);
            co_await hg.release();
            const bool done = co_await eventually([&] { return got.has_value(); }, 5s);
            REQUIRE(done);
            CHECK_FALSE(*got);
        }
        m = c.metrics();
        CHECK(m.acquisitions == 2);
        CHECK(m.contended_acquisitions == 1);
        CHECK(m.wait.count() == 2);
        CHECK(m.handoff.count() == 1);
        CHECK(m.wait.sum > decltype(m.wait.sum)::zero());
        CHECK(other.metrics().acquisitions == 1);

        // 3. A lease lost: the key deleted behind the holder; the renewal
        // finds it gone. The release then finds it gone too.
        {
            corolock::mutex lock(c, "m:lost");
            auto g = co_await lock.acquire({.lease = 600ms});  // renewal every 200 ms
            server.cmd({"DEL", lock_key("m:lost")});
            auto r = co_await (g.until_lost() || sleep_for(5s));
            CHECK(r.index() == 0);
            const auto rec = co_await g.release();
            CHECK(rec == corolock::condition::lease_gone);
        }
        m = c.metrics();
        CHECK(m.acquisitions == 3);
        CHECK(m.renewals_sent == 1);
        CHECK(m.renewals_failed == 1);
        CHECK(m.leases_lost == 1);
        CHECK(m.releases_found_gone == 1);

        // 4. A release that finds the lock gone, with no loss noticed before.
        {
            corolock::mutex lock(c, "m:gone");
            auto g = co_await lock.acquire({.lease = 30s, .watchdog = false});
            server.cmd({"DEL", lock_key("m:gone")});
            const auto rec = co_await g.release();
            CHECK(rec == error::expired);
        }
        m = c.metrics();
        CHECK(m.acquisitions == 4);
        CHECK(m.leases_lost == 1);
        CHECK(m.releases_found_gone == 2);
        CHECK(m.renewals_sent == 1);

        // 5. A reconnect: the server drops the connection.
        server.cmd({"CLIENT", "KILL", "TYPE", "normal"});
        const bool back = co_await eventually([&] { return c.metrics().reconnects == 1; }, 5s);
        REQUIRE(back);
        co_await wait_connected(c);

        const bool idle = co_await eventually([&] { return c.metrics().commands_in_flight == 0; }, 5s);
        CHECK(idle);
        m = c.metrics();
        CHECK(m.reconnects == 1);
        CHECK(m.acquisitions == 4);
        CHECK(m.contended_acquisitions == 1);
        CHECK(m.handoff.count() == 1);
        CHECK(m.leases_lost == 1);
        CHECK(m.renewals_failed == 1);
        CHECK(m.releases_found_gone == 2);
        const auto text = corolock::to_prometheus(m, {{"client", "test"}});
        CHECK(text.find("corolock_acquisitions_total{client=\"test\"} 4\n") != std::string::npos);
        CHECK(text.find("corolock_handoff_seconds_count{client=\"test\"} 1\n") != std::string::npos);
    }, 60s);

    const std::vector<std::string> expected{
        "acquired m:free",
        "acquired m:busy contended",
        "acquired m:lost",
        "renewal_failed m:lost " + error_code(error::expired).message(),
        "lost m:lost",
        "release_found_gone m:lost " + error_code(error::expired).message(),
        "acquired m:gone",
        "release_found_gone m:gone " + error_code(error::expired).message(),
        "reconnected",
    };
    CHECK(obs->events == expected);
    CHECK_FALSE(obs->off_strand);
    c.stop();
    other.stop();
}

TEST_CASE("metrics: an observer that throws is logged and changes nothing",
          "[metrics][integration]") {
    redis_server server;
    asio::io_context ioc;
    auto obs = std::make_shared<throwing_observer>();
    std::ostringstream log_text;
    auto logger = std::make_shared<spdlog::logger>(
        "metrics-test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_text));
    logger->set_level(spdlog::level::err);
    auto cfg = config_for(server);
    cfg.observer = obs;
    cfg.logger = logger;
    corolock::client c(ioc.get_executor(), cfg);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex lock(c, "m:throw");
        auto g = co_await lock.acquire({.lease = 30s, .watchdog = false});
        CHECK(g.owns_lock());
        server.cmd({"DEL", lock_key("m:throw")});
        const auto rec = co_await g.release();
        CHECK(rec == error::expired);
        // The client still works: acquire and release once more.
        auto g2 = co_await lock.acquire({.lease = 30s});
        const auto rec2 = co_await g2.release();
        CHECK_FALSE(rec2);
    });
    c.stop();
    CHECK(obs->calls == 3);
    const auto m = c.metrics();
    CHECK(m.acquisitions == 2);
    CHECK(m.releases_found_gone == 1);
    const auto text = log_text.str();
    CHECK(text.find("observer's on_acquired threw: observer bug") != std::string::npos);
    CHECK(text.find("observer's on_release_found_gone threw") != std::string::npos);
}
