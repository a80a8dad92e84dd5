// corolock::multi_lock on a Redis Cluster, its names on different primaries:
// each member's keys on its own slot's primary, all or nothing across them.
#include <corolock/corolock.hpp>

#include "redis/topology/slot_map.hpp"
#include "redis/lock/scripts.hpp"
#include "support/async_test.hpp"
#include "support/cluster_fleet.hpp"
#include "support/lock_testing.hpp"
#include "support/multi_lock_checks.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::detail::cluster::key_slot;
using namespace corolock::test;

TEST_CASE("cluster: a multi-lock over names on different primaries is all or nothing",
          "[cluster][integration][multi]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    auto a = fleet.open_backend(ioc.get_executor());
    auto b = fleet.open_backend(ioc.get_executor());

    // Three names, each on a different primary.
    std::vector<std::string> names;
    std::set<std::uint16_t> ports;
    for (int i = 0; i < 1000 && names.size() < 3; ++i) {
        const std::string name = "mslot-" + std::to_string(i);
        auto* owner = fleet.primary_of_slot(key_slot(name));
        REQUIRE(owner != nullptr);
        if (ports.insert(owner->port()).second) names.push_back(name);
    }
    REQUIRE(names.size() == 3);
    const auto held_where_it_lives = [&](const std::string& name) {
        auto* owner = fleet.primary_of_slot(key_slot(name));
        const corolock::detail::lock_keys keys(name);
        return owner != nullptr && owner->cmd1({"EXISTS", std::string(keys.lock())}) == "1";
    };

    run_async(ioc, [&]() -> asio::awaitable<void> {
        // Each member's keys on its own slot's primary while the set is held.
        corolock::multi_lock ma(a, names);
        auto ga = co_await ma.acquire({.lease = 5s, .wait = 2s});
        for (const auto& n : names) CHECK(held_where_it_lives(n));
        co_await ga.release();
        for (const auto& n : names) CHECK_FALSE(held_where_it_lives(n));
        co_await check_multi_lock_between(a, b, names);
    }, 60s);
}
