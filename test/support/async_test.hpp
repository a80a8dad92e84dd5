// Runs a coroutine test body on an io_context with a hard time limit.
// Every integration test goes through this, so none can hang.
//
// Never write co_await inside a Catch2 assertion (CHECK(co_await x)): the
// macros repeat their argument in a short-circuited expression, and g++ 12's
// coroutine lowering still runs the co_await there, so x runs twice. Await
// into a local, then check the local.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <thread>

namespace corolock::test {

// The completion token of the cases that check an error: co_await yields
// (error_code, results...) instead of throwing.
inline constexpr auto use_nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);

template <class F>
void run_async(boost::asio::io_context& ioc, F&& body,
               std::chrono::steady_clock::duration limit = std::chrono::seconds(30)) {
    bool done = false;
    std::exception_ptr failure;
    boost::asio::co_spawn(ioc, std::forward<F>(body)(), [&](std::exception_ptr e) {
        done = true;
        failure = e;
    });
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done && std::chrono::steady_clock::now() < deadline) {
        if (ioc.run_one_until(deadline) == 0 && ioc.stopped()) break;  // out of work: stuck
    }
    if (ioc.stopped()) ioc.restart();
    if (failure) std::rethrow_exception(failure);
    REQUIRE(done);  // false: the test body did not finish within its limit
}

// Blocks the calling (non-io) thread until pred() holds, polling every
// `poll`, for at most `limit`; returns whether it held. For tests whose
// io_context runs on other threads or in other processes.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit,
                std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(poll);
    }
    return true;
}

// Sleeps inside a coroutine (for pacing fault scenarios, never for
// synchronising with the code under test).
boost::asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d);

}  // namespace corolock::test
