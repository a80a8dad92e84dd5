// A check shared by the lost-signal tests of the lock types' guards.
#pragma once

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

namespace corolock::test {

// Deletes the lock key of `name` behind the holder `g` (a guard, or a
// multi_guard with `name` among its members), whose lease is 3 s (renewed
// every 1 s), and checks that g's lost signal fires within a renewal
// period, long before its lease deadline.
template <class Guard>
boost::asio::awaitable<void> expect_lost_when_deleted(const redis_server& server,
                                                      const std::string& name, const Guard& g) {
    using namespace boost::asio::experimental::awaitable_operators;
    using namespace std::chrono_literals;
    const auto deadline = g.lease_deadline();
    server.cmd({"DEL", lock_key(name)});
    const auto start = std::chrono::steady_clock::now();
    auto result = co_await (g.until_lost() || sleep_for(5s));
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(result.index() == 0);
    CHECK(took < 1500ms);
    CHECK(g.lost());
    CHECK(std::chrono::steady_clock::now() < deadline);  // long before the lease would end
}

}  // namespace corolock::test
