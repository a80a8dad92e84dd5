// redis+sentinel://: the client asks the Sentinels for the primary,
// confirms it with ROLE, and says why when no Sentinel names a primary
// (docs/topologies.md, "Redis Sentinel"). Real processes: a primary, a
// replica and two Sentinels (support/sentinel_fleet.hpp).
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/sentinel_fleet.hpp"
#include "support/sentinel_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;


}  // namespace

TEST_CASE("sentinel: locks through the primary the Sentinels name, or none: no_primary",
          "[sentinel][integration]") {
    sentinel_fleet fleet({.replicas = 1, .sentinels = 2});
    const std::string replica = "127.0.0.1:" + std::to_string(fleet.server(1).port());
    asio::io_context ioc;

    {  // a lock through a redis+sentinel:// URL lives on the primary
        corolock::client c(ioc.get_executor(), quick_config(fleet.url()));
        corolock::backend by_url(ioc.get_executor(), fleet.url());
        CHECK(by_url.scheme() == "redis+sentinel");
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "sentinel-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 5s}, use_nothrow);
            REQUIRE(ec == error_code{});
            CHECK(g.token() > 0);
            CHECK_FALSE(fleet.server(0).cmd1({"HGET", lock_key("sentinel-lock"), "owner"}).empty());
            // A backend opened by the same URL is another owner of the same lock.
            corolock::mutex other(by_url, "sentinel-lock");
            auto [oec, og] = co_await other.async_try_acquire({.lease = 5s}, use_nothrow);
            CHECK(oec == error::lock_held);
            const auto released = co_await g.release();
            CHECK(released == error_code{});
            auto [aec, ag] = co_await other.async_try_acquire({.lease = 5s}, use_nothrow);
            REQUIRE(aec == error_code{});
            CHECK(ag.token() > g.token());
            const auto released_after = co_await ag.release();
            CHECK(released_after == error_code{});
        });
        CHECK(c.last_error().code == error_code{});
    }

    {  // a service no Sentinel knows fails with no_primary, naming each Sentinel
        corolock::client c(ioc.get_executor(), quick_config(fleet.url("no-such-service")));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "sentinel-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 2s}, use_nothrow);
            CHECK(ec == error::no_primary);
        });
        const auto why = c.last_error();
        CHECK(why.code == error::no_primary);
        INFO(why.message);
        CHECK_THAT(why.message, Catch::Contains("sentinel 127.0.0.1:" +
                                                std::to_string(fleet.sentinel(0).port()) +
                                                ": service unknown"));
        CHECK_THAT(why.message, Catch::Contains("sentinel 127.0.0.1:" +
                                                std::to_string(fleet.sentinel(1).port()) +
                                                ": service unknown"));
    }

    {  // a Sentinel that names a replica is refused by ROLE, never used as the primary
        // A second name for the replica's address: the Sentinel believes it a
        // primary (until it gives up on it, seconds later), and says so.
        fleet.sentinel(0).cmd({"SENTINEL", "MONITOR", "decoy", "127.0.0.1",
                               std::to_string(fleet.server(1).port()), "1"});
        REQUIRE(fleet.sentinel(0).cmd({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "decoy"}).at(1) ==
                std::to_string(fleet.server(1).port()));
        corolock::client c(ioc.get_executor(), quick_config(fleet.url("decoy", {0, 1})));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "decoy-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 2s}, use_nothrow);
            CHECK(ec != error_code{});
        });
        // Nothing was written to the replica (it would refuse: READONLY).
        CHECK(fleet.server(1).cmd({"EXISTS", lock_key("decoy-lock")}).at(0) == "0");
        const auto why = c.last_error();
        CHECK(why.code == error::no_primary);
        INFO(why.message);
        CHECK_THAT(why.message, Catch::Contains(replica + " is a replica"));
        CHECK_THAT(why.message, Catch::Contains("sentinel 127.0.0.1:" +
                                                std::to_string(fleet.sentinel(1).port()) +
                                                ": service unknown"));
        fleet.sentinel(0).cmd({"SENTINEL", "REMOVE", "decoy"});
    }
}
