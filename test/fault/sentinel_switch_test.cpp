// Sentinel failovers in which the old primary stays alive (docs/topologies.md,
// "Following a failover"): nothing breaks the client's connection to it, so
// one trigger alone must move the client to the new primary, and each case
// makes sure no other one can.
//  - +switch-master: SENTINEL FAILOVER promotes a replica while the old
//    primary keeps running as a primary with the client's connection open
//    (the Sentinels turn it into a replica, killing its clients, only about
//    8 s later). The subscription's message must move the client, and a
//    held lock the new primary lacks must fire its lost signal, before that.
//  - -READONLY: the Sentinel the client subscribed to is paused (it hears
//    no +switch-master), the others fail over, and the old primary is made
//    a replica of the new one by hand (REPLICAOF kills no client). The
//    client's next write gets -READONLY from it; that reply must make the
//    client ask the Sentinels again and move, and re-verify its held locks.
// Real processes: a primary, two replicas and three Sentinels
// (support/sentinel_fleet.hpp).
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/sentinel_fleet.hpp"
#include "support/sentinel_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <iostream>
#include <optional>
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
constexpr const char* client_name = "switch-test-client";

// `health`: the silence after which a connection (the subscription to a
// Sentinel among them) is PINGed.
corolock::config switch_config_for(const sentinel_fleet& fleet, std::chrono::milliseconds health = 2s) {
    auto cfg = quick_config_for(fleet);
    cfg.health_check_interval = health;
    cfg.client_name = client_name;
    return cfg;
}

// Connections to Sentinel `i` in subscribed mode (CLIENT LIST's sub=1):
// the clients' +switch-master subscriptions (Sentinels subscribe to one
// another's hello channel on the monitored servers, not on each other).
int subscribers_of(sentinel_fleet& fleet, std::size_t i) {
    const auto list = fleet.sentinel(i).cmd1({"CLIENT", "LIST"});
    int n = 0;
    for (std::size_t at = list.find(" sub=1 "); at != std::string::npos;
         at = list.find(" sub=1 ", at + 1))
        ++n;
    return n;
}

double ms_since(long long from_ns) { return static_cast<double>(mono_ns() - from_ns) / 1e6; }

std::string role_of(redis_server& s) { return s.cmd1({"ROLE"}); }

// Whether the test's lock client has a connection to `s` now.
bool client_on(redis_server& s) {
    const auto list = s.cmd1({"CLIENT", "LIST"});
    return list.find(std::string("name=") + client_name) != std::string::npos;
}

// Until `name`'s lock hash has reached every replica (bounded).
asio::awaitable<bool> replicated(sentinel_fleet& fleet, const std::string& name) {
    co_return co_await eventually([&] {
        for (std::size_t i = 1; i < fleet.servers(); ++i)
            if (fleet.server(i).cmd1({"HGET", lock_key(name), "owner"}).empty()) return false;
        return true;
    }, 10s);
}

// The server the given Sentinels all name, once it is not `old` and says it
// is a primary; polled without blocking the lock client's io for long.
asio::awaitable<std::optional<std::size_t>> promoted(sentinel_fleet& fleet, std::size_t old,
                                                     const std::vector<std::size_t>& asked) {
    std::optional<std::size_t> found;
    const bool done = co_await eventually([&] {
        int agreed = -2;
        for (auto i : asked) {
            const int p = fleet.primary_index(i);
            agreed = (agreed == -2 || agreed == p) ? p : -1;
        }
        if (agreed < 0 || static_cast<std::size_t>(agreed) == old) return false;
        try {
            if (role_of(fleet.server(static_cast<std::size_t>(agreed))) != "master") return false;
        } catch (const std::exception&) {
            return false;
        }
        found = static_cast<std::size_t>(agreed);
        return true;
    }, 20s);
    if (!done) found.reset();
    co_return found;
}

// SIGCONT for a paused Sentinel however the case ends.
struct resume_on_exit {
    redis_server& s;
    ~resume_on_exit() {
        try {
            s.resume();
        } catch (...) {
        }
    }
};

// A lock `m` takes with a long lease (the first renewal 20 s away, so that
// only a failover trigger makes the client look again), replicated, then
// forgotten by every replica: the one promoted next lacks it.
asio::awaitable<corolock::guard> held_but_lost_on_replicas(sentinel_fleet& fleet,
                                                           corolock::mutex& m) {
    auto g = co_await m.acquire({.lease = 60s});
    const bool both = co_await replicated(fleet, m.name());
    REQUIRE(both);
    forget_on_replicas(fleet, m.name());
    co_return g;
}

struct switch_seen {
    double lost_ms = 0;    // from SENTINEL FAILOVER to the lost signal
    std::string old_role;  // the old primary's ROLE when it came
};

// SENTINEL FAILOVER through Sentinel 1, then the lost signal of `gone` (a
// lock the promoted replica lacks) within 15 s. The old primary's role is
// read at once: "master" means the Sentinels had not yet turned it into a
// replica (which kills its clients), so only +switch-master can have moved
// the client.
asio::awaitable<switch_seen> fail_over_until_lost(sentinel_fleet& fleet, corolock::guard& gone) {
    const long long failover_at = mono_ns();
    fleet.sentinel(1).cmd({"SENTINEL", "FAILOVER", fleet.options().service});
    auto lost = co_await (gone.async_until_lost(use_nothrow) || sleep_for(15s));
    switch_seen seen{ms_since(failover_at), role_of(fleet.server(0))};
    REQUIRE(lost.index() == 0);
    CHECK(std::get<0>(lost) == std::tuple<error_code>{error::lock_lost});
    INFO("the old primary says " << seen.old_role << " when the lost signal came, "
                                 << seen.lost_ms << " ms after SENTINEL FAILOVER");
    CHECK(seen.old_role == "master");
    co_return seen;
}

}  // namespace

TEST_CASE("sentinel failover: +switch-master alone moves the client off a live old primary",
          "[sentinel][fault]") {
    sentinel_fleet fleet;
    const auto service = fleet.options().service;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), switch_config_for(fleet));
    corolock::client other(ioc.get_executor(), switch_config_for(fleet));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex kept_m(c, "switch-kept"), gone_m(c, "switch-gone");
        auto kept = co_await kept_m.acquire({.lease = 60s});
        {
            const bool replicated_kept = co_await replicated(fleet, "switch-kept");
            REQUIRE(replicated_kept);
        }
        auto gone = co_await held_but_lost_on_replicas(fleet, gone_m);
        REQUIRE(client_on(fleet.server(0)));
        const auto seen = co_await fail_over_until_lost(fleet, gone);
        const std::vector<std::size_t> every{0, 1, 2};  // a named local: g++ 12 and co_await
        const auto now = co_await promoted(fleet, 0, every);
        REQUIRE(now);
        CHECK(client_on(fleet.server(*now)));

        // The lock the new primary kept is still held, there, by its owner.
        CHECK(kept_m.held_levels() == 1);
        {
            corolock::mutex rival(other, "switch-kept");
            auto [ec, g] = co_await rival.async_try_acquire({.lease = 5s}, use_nothrow);
            CHECK(ec == error::lock_held);
        }
        CHECK(fleet.server(*now).cmd1({"HGET", lock_key("switch-kept"), "owner"}) ==
              kept_m.owner_id());
        const auto rec = co_await kept.release();
        CHECK_FALSE(rec);
        std::cout << "sentinel +switch-master: lost signal " << seen.lost_ms
                  << " ms after SENTINEL FAILOVER; the old primary then a " << seen.old_role
                  << "\n";
    }, 60s);
}

TEST_CASE("sentinel failover: a -READONLY reply from a demoted primary moves the client",
          "[sentinel][fault]") {
    sentinel_fleet fleet;
    const auto service = fleet.options().service;
    asio::io_context ioc;
    // No health check within the case: the subscription must stay on the
    // paused Sentinel, deaf, so that only the -READONLY reply can move it.
    corolock::client c(ioc.get_executor(), switch_config_for(fleet, 60s));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex held_m(c, "readonly-held");
        auto held = co_await held_but_lost_on_replicas(fleet, held_m);
        REQUIRE(client_on(fleet.server(0)));

        // The client follows failovers through the first Sentinel of its
        // URL (sentinel 0): paused, it announces nothing.
        fleet.sentinel(0).pause();
        resume_on_exit resume{fleet.sentinel(0)};
        fleet.sentinel(1).cmd({"SENTINEL", "FAILOVER", service});
        const std::vector<std::size_t> running{1, 2};  // a named local: g++ 12 and co_await
        const auto now = co_await promoted(fleet, 0, running);
        REQUIRE(now);
        const auto new_port = std::to_string(fleet.server(*now).port());
        fleet.server(0).cmd({"REPLICAOF", "127.0.0.1", new_port});
        REQUIRE(role_of(fleet.server(0)) == "slave");
        REQUIRE(client_on(fleet.server(0)));  // nothing has moved the client yet

        // The first write reaches the demoted primary and fails.
        corolock::mutex probe(c, "readonly-probe");
        const long long first_at = mono_ns();
        {
            auto [ec, g] = co_await probe.async_try_acquire({.lease = 5s}, use_nothrow);
            INFO("first try: " << ec.message() << "; last error: " << c.last_error().message);
            CHECK(ec == error::server_error);
            CHECK(c.last_error().message.find("READONLY") != std::string::npos);
        }
        // That reply alone sends the client to the new primary: a few tries
        // later the lock is granted there.
        std::optional<corolock::guard> g;
        for (int i = 0; i < 200 && !g; ++i) {
            auto [ec, got] = co_await probe.async_try_acquire({.lease = 5s}, use_nothrow);
            if (!ec) g = std::move(got);
            else co_await sleep_for(50ms);
        }
        const double moved_ms = ms_since(first_at);
        INFO("last error: " << c.last_error().message);
        REQUIRE(g);
        CHECK(fleet.server(*now).cmd1({"HGET", lock_key("readonly-probe"), "owner"}) ==
              probe.owner_id());
        // And its held lock, missing there, was re-verified.
        auto lost = co_await (held.async_until_lost(use_nothrow) || sleep_for(10s));
        REQUIRE(lost.index() == 0);
        CHECK(std::get<0>(lost) == std::tuple<error_code>{error::lock_lost});
        const auto rec = co_await g->release();
        CHECK_FALSE(rec);
        std::cout << "sentinel -READONLY: granted on the new primary " << moved_ms
                  << " ms after the refused write\n";
    }, 60s);
}

TEST_CASE("sentinel failover: a paused Sentinel is left for another that reports the switch",
          "[sentinel][fault]") {
    sentinel_fleet fleet;
    const auto service = fleet.options().service;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), switch_config_for(fleet, 300ms));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex gone_m(c, "keepalive-gone");
        auto gone = co_await held_but_lost_on_replicas(fleet, gone_m);
        {
            // The subscription goes to the URL's first Sentinel.
            const bool subscribed =
                co_await eventually([&] { return subscribers_of(fleet, 0) == 1; }, 10s);
            REQUIRE(subscribed);
        }
        fleet.sentinel(0).pause();
        resume_on_exit resume{fleet.sentinel(0)};
        const long long paused_at = mono_ns();
        // Silent for 300 ms, then no answer to PING within command_timeout
        // (2 s): the subscription moves to the next Sentinel.
        const bool moved =
            co_await eventually([&] { return subscribers_of(fleet, 1) == 1; }, 15s);
        const double moved_ms = ms_since(paused_at);
        INFO("subscription on sentinel 1 " << moved_ms << " ms after pausing sentinel 0");
        REQUIRE(moved);

        // Still a primary when the lost signal came: the new subscription's
        // message moved the client.
        const auto seen = co_await fail_over_until_lost(fleet, gone);
        std::cout << "sentinel keepalive: subscription moved " << moved_ms
                  << " ms after the pause; lost signal " << seen.lost_ms
                  << " ms after SENTINEL FAILOVER\n";
    }, 60s);
}
