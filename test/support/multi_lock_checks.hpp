// The multi-lock's checks that hold on every backend and topology, for the
// tests of each (cluster, sentinel, etcd).
#pragma once

#include <corolock/backend.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace corolock::test {

// Whether another owner finds `name` held: a try by a fresh handle on b,
// given back at once when it succeeds. Works on any backend.
inline boost::asio::awaitable<bool> held_for_others(const backend& b, const std::string& name) {
    mutex probe(b, name);
    auto [ec, g] = co_await probe.async_try_acquire({.lease = std::chrono::seconds(5)},
                                                    boost::asio::as_tuple(boost::asio::use_awaitable));
    if (!ec) co_await g.release();
    co_return ec == error::lock_held;
}

// Two owners (on backends a and b) take one set of at least three names,
// given in opposite orders: each is refused the whole set while the other
// holds it, a member held elsewhere leaves none of the others held, and
// every name's token rises from one holder of the set to the next.
inline boost::asio::awaitable<void> check_multi_lock_between(const backend& a, const backend& b,
                                                           std::vector<std::string> names) {
    using namespace std::chrono_literals;
    REQUIRE(names.size() >= 3);
    multi_lock ma(a, names);
    multi_lock mb(b, std::vector<std::string>(names.rbegin(), names.rend()));
    auto ga = co_await ma.acquire({.lease = 5s, .wait = 5s});
    for (const auto& n : names) {
        const bool held = co_await held_for_others(b, n);
        CHECK(held);
    }
    auto refused = co_await mb.try_acquire({.lease = 5s});
    CHECK_FALSE(refused.has_value());
    const auto released = co_await ga.release();
    CHECK(released == error_code{});

    // One member held elsewhere: none of the others stays held.
    mutex middle(b, names[1]);
    auto gm = co_await middle.acquire({.lease = 5s, .wait = 5s});
    auto tried = co_await ma.try_acquire({.lease = 5s});
    CHECK_FALSE(tried.has_value());
    for (const auto& n : {names.front(), names.back()}) {
        const bool held = co_await held_for_others(b, n);
        CHECK_FALSE(held);
    }
    co_await gm.release();

    auto gb = co_await mb.acquire({.lease = 5s, .wait = 5s});
    for (const auto& n : names) CHECK(gb.token(n) > ga.token(n));
    const auto released_b = co_await gb.release();
    CHECK(released_b == error_code{});
}

}  // namespace corolock::test
