// A Redis Cluster as a lock backend (redis+cluster://): three primaries with
// a replica each (support/cluster_fleet.hpp). Locks over names on every
// primary, each lock's keys on its slot's primary, and the unlock message
// sent by sharded pub/sub on the lock's shard only.
#include <corolock/corolock.hpp>

#include "redis/cluster/cluster_router.hpp"
#include "redis/cluster/slot_map.hpp"
#include "redis/scripts.hpp"
#include "support/async_test.hpp"
#include "support/cluster_fleet.hpp"
#include "support/lock_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error_code;
using corolock::detail::cluster::key_slot;
using namespace corolock::test;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// A CLUSTER INFO field as a number (absent: 0, as the server leaves out
// counters that never moved).
long info_field(redis_server& n, const std::string& field) {
    const auto text = n.cmd1({"CLUSTER", "INFO"});
    const auto at = text.find(field + ":");
    if (at == std::string::npos) return 0;
    return std::stol(text.substr(at + field.size() + 1));
}

}  // namespace

TEST_CASE("cluster: locks on every primary exclude each other and their tokens rise",
          "[cluster][integration]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    auto a = fleet.open_backend(ioc.get_executor());
    auto b = fleet.open_backend(ioc.get_executor());
    CHECK(a.scheme() == "redis+cluster");

    // Names until each primary serves at least 8 of them.
    std::map<std::uint16_t, int> per_primary;
    std::vector<std::string> names;
    for (int i = 0; i < 1000 && (per_primary.size() < 3 || std::any_of(
                                     per_primary.begin(), per_primary.end(),
                                     [](const auto& p) { return p.second < 8; }));
         ++i) {
        const std::string name = "spread-" + std::to_string(i);
        auto* owner = fleet.primary_of_slot(key_slot(name));
        REQUIRE(owner != nullptr);
        if (per_primary[owner->port()] >= 8) continue;
        ++per_primary[owner->port()];
        names.push_back(name);
    }
    REQUIRE(per_primary.size() == 3);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        for (const auto& name : names) {
            CAPTURE(name);
            corolock::mutex ma(a, name);
            corolock::mutex mb(b, name);
            auto ga = co_await ma.acquire({.lease = 5s});
            // The lock's keys live on its slot's primary.
            const corolock::detail::lock_keys keys(name);
            auto* owner = fleet.primary_of_slot(key_slot(name));
            REQUIRE(owner != nullptr);
            CHECK(owner->cmd1({"EXISTS", std::string(keys.lock())}) == "1");
            CHECK(owner->cmd1({"EXISTS", std::string(keys.fence())}) == "1");
            auto held = co_await mb.try_acquire({.lease = 5s});
            CHECK_FALSE(held.has_value());
            const auto released = co_await ga.release();
            CHECK(released == error_code{});
            auto gb = co_await mb.try_acquire({.lease = 5s});
            REQUIRE(gb.has_value());
            CHECK(gb->token() > ga.token());
            const auto released_b = co_await gb->release();
            CHECK(released_b == error_code{});
        }
        // Replica acknowledgement is refused on a cluster, before any grant.
        corolock::mutex mr(a, names.front());
        auto [rec, rg] = co_await mr.async_acquire({.lease = 5s, .wait = 1s, .replicas = 1},
                                                   use_nothrow);
        CHECK(rec == corolock::error::invalid_argument);
        CHECK(mr.held_levels() == 0);
    }, 60s);
    CHECK(a.metrics().acquisitions == names.size());
    CHECK(b.metrics().acquisitions == names.size());
    // A fresh map: nothing was redirected.
    CHECK(a.metrics().cluster_moved == 0);
    CHECK(a.metrics().cluster_ask == 0);
}

TEST_CASE("cluster: a release is delivered by the lock's shard only", "[cluster][integration]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    auto a = fleet.open_backend(ioc.get_executor());
    auto b = fleet.open_backend(ioc.get_executor());
    const std::string name = "sharded-release";
    const corolock::detail::lock_keys keys(name);
    const std::string channel(keys.channel());
    auto* owner = fleet.primary_of_slot(key_slot(name));
    REQUIRE(owner != nullptr);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex ma(a, name);
        corolock::mutex mb(b, name);
        auto ga = co_await ma.acquire({.lease = 10s});
        std::optional<corolock::guard> gb;
        bool done = false;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto [ec, g] = co_await mb.async_acquire({.lease = 10s, .wait = 20s}, use_nothrow);
                CHECK(ec == error_code{});
                if (!ec) gb.emplace(std::move(g));
                done = true;
            },
            asio::detached);
        // The waiter's subscription is a shard channel on the slot's primary.
        const bool subscribed = co_await eventually(
            [&] {
                const auto r = owner->cmd({"PUBSUB", "SHARDNUMSUB", channel});
                return r.size() == 2 && r[1] == "1";
            },
            5s);
        REQUIRE(subscribed);
        for (std::size_t i = 0; i < fleet.size(); ++i) {
            auto& n = fleet.node(i);
            CHECK(n.cmd({"PUBSUB", "NUMSUB", channel}).at(1) == "0");  // nothing global
            if (&n != owner) CHECK(n.cmd({"PUBSUB", "SHARDNUMSUB", channel}).at(1) == "0");
        }
        std::vector<long> broadcast_before;
        for (std::size_t i = 0; i < fleet.size(); ++i)
            broadcast_before.push_back(info_field(fleet.node(i), "cluster_stats_messages_publish_received") +
                                       info_field(fleet.node(i), "cluster_stats_messages_publish_sent"));
        const auto shard_sent_before =
            info_field(*owner, "cluster_stats_messages_publishshard_sent");

        const auto waits_before = b.metrics().wait.count();
        const auto released = co_await ga.release();
        CHECK(released == error_code{});
        const bool granted = co_await eventually([&] { return done; }, 5s);
        REQUIRE(granted);
        REQUIRE(gb.has_value());
        CHECK(gb->token() > ga.token());
        (void)waits_before;

        // No node sent or received a broadcast PUBLISH over the cluster bus;
        // the owner sent the message to its own replica only.
        for (std::size_t i = 0; i < fleet.size(); ++i) {
            CAPTURE(i, fleet.node(i).port(), owner->port());
            CHECK(info_field(fleet.node(i), "cluster_stats_messages_publish_received") +
                      info_field(fleet.node(i), "cluster_stats_messages_publish_sent") ==
                  broadcast_before[i]);
        }
        CHECK(info_field(*owner, "cluster_stats_messages_publishshard_sent") > shard_sent_before);
        const auto released_b = co_await gb->release();
        CHECK(released_b == error_code{});
    }, 30s);
}

TEST_CASE("cluster: corolock::client refuses a cluster URL and says what to use",
          "[cluster][integration]") {
    asio::io_context ioc;
    try {
        corolock::client c(ioc.get_executor(), "redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
        FAIL("no exception");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == corolock::error::invalid_argument);
        CHECK(std::string(e.what()).find("corolock::backend") != std::string::npos);
    }
}
