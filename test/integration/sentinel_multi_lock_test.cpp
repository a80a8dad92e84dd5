// corolock::multi_lock behind Redis Sentinel (redis+sentinel://): the set is
// taken on the primary the Sentinels name, all or nothing.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/multi_lock_checks.hpp"
#include "support/sentinel_fleet.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;

TEST_CASE("sentinel: a multi-lock is taken on the primary, all or nothing",
          "[sentinel][integration][multi]") {
    sentinel_fleet fleet({.replicas = 1, .sentinels = 2});
    asio::io_context ioc;
    corolock::backend a(ioc.get_executor(), fleet.url());
    corolock::backend b(ioc.get_executor(), fleet.url());
    const std::vector<std::string> names{"sm:1", "sm:2", "sm:3"};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::multi_lock ma(a, names);
        auto ga = co_await ma.acquire({.lease = 5s, .wait = 5s});
        for (const auto& n : names) CHECK(fleet.server(0).cmd1({"EXISTS", lock_key(n)}) == "1");
        co_await ga.release();
        co_await check_multi_lock_between(a, b, names);
    }, 60s);
}
