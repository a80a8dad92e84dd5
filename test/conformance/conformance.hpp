// Shared by the conformance suite's files: the lock service of the backend
// under test (COROLOCK_CONFORMANCE_BACKEND, see support/lock_server.hpp) and
// the helpers its cases share.
#pragma once

#include "support/async_test.hpp"
#include "support/lock_server.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

namespace corolock::test::conformance {

using namespace std::chrono_literals;

using corolock::test::use_nothrow;

// A fresh server of the backend under test; fails the case if its scheme is
// not the backend asked for.
inline std::unique_ptr<lock_server> start_server() {
    const auto name = conformance_backend();
    auto s = start_lock_server(name);
    REQUIRE(s);
    INFO("backend " << name);
    REQUIRE(s->backend() == name);
    return s;
}

// Whether a fault proxy on s.url_via() stands in the lock traffic's path.
// When it does not (a fleet's client learns its data nodes from the
// Sentinels or the slot map, not from the URL), the case is reported as
// skipped, with the reason, in a warning (Catch2 v2 has no skip), and the
// caller returns.
inline bool proxy_in_lock_path(const lock_server& s) {
    const auto why = s.proxy_unsupported();
    if (why.empty()) return true;
    WARN("skipped on " << s.backend() << ": " << why);
    return false;
}

// Whether the backend's tokens are fencing tokens (each holder's larger than
// the last). When not (RedLock: docs/redlock.md, "Tokens"), the case's
// token assertions are skipped, with the reason, in a warning.
inline bool fencing_tokens(const lock_server& s) {
    const auto why = s.tokens_unfenced();
    if (why.empty()) return true;
    WARN("token checks skipped on " << s.backend() << ": " << why);
    return false;
}

// Tries `m` until it gets the lock, for at most `limit`; the guard, or none.
// For "the lock is free again" checks: polling try_acquire is the one public
// way every backend has to ask.
inline boost::asio::awaitable<std::optional<guard>> try_until(mutex& m, lock_options o,
                                                              std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        auto [ec, g] = co_await m.async_try_acquire(o, use_nothrow);
        if (!ec) co_return std::optional<guard>(std::move(g));
        if (ec != error::lock_held) {
            UNSCOPED_INFO("try_acquire: " << ec.message());
        }
        if (std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
        co_await sleep_for(5ms);
    }
}

}  // namespace corolock::test::conformance
