#include "support/bystander.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

namespace corolock::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
constexpr auto lease = 600ms;
}  // namespace

bystander::bystander(corolock::client& c, std::string tag)
    : client_(c), mutex_(c, "bystander-" + tag), counter_(data_prefix + ("bystander:" + tag)) {}

asio::awaitable<void> bystander::begin() {
    guard_ = co_await mutex_.acquire({.lease = lease});
    token_ = guard_.token();
    first_deadline_ = guard_.lease_deadline();
    asio::co_spawn(co_await asio::this_coro::executor, stream(), asio::detached);
}

asio::awaitable<void> bystander::end(const redis_server& server, clock::time_point renewed_after) {
    const auto past = renewed_after == clock::time_point{}
                          ? first_deadline_ + 50ms
                          : std::max(first_deadline_ + 50ms, renewed_after + lease);
    const bool renewed = co_await eventually([&] { return guard_.lease_deadline() > past; }, 2000ms);
    CHECK(renewed);
    stop_ = true;
    const bool stopped = co_await eventually([&] { return done_; }, 5000ms);
    REQUIRE(stopped);
    INFO("first INCR error: " << first_error_.message());
    CHECK(sent_ > 0);
    CHECK(ok_ == sent_);
    CHECK(server.cmd1({"GET", counter_}) == std::to_string(ok_));
    CHECK_FALSE(guard_.lost());
    CHECK(guard_.owns_lock());
    CHECK(guard_.token() == token_);
    const auto released = co_await guard_.release();
    CHECK_FALSE(released);
}

asio::awaitable<void> bystander::stream() {
    using corolock::test::use_nothrow;
    for (int i = 0; i < 100'000 && !stop_; ++i) {
        ++sent_;
        auto [ec, r] = co_await client_.async_exec(command{"INCR", counter_}, use_nothrow);
        if (!ec) {
            ++ok_;
        } else if (!first_error_) {
            first_error_ = ec;
        }
        co_await sleep_for(1ms);
    }
    done_ = true;
}

}  // namespace corolock::test
