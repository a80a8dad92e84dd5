// corolock::fair_mutex: a re-entrant lease lock on one Redis name that is
// granted first come, first served.
//
// Everything corolock::mutex says holds (one owner per handle, re-entry,
// leases, the watchdog, the lost signal, fencing tokens, the guard), and:
// waiters queue on the server in the order their first attempt arrived
// there, and a release hands the lock to the first of them inside the
// release itself, so the waiter completes without another round trip. A
// waiter that dies leaves the queue within its entry lease (min(lease, 2 s));
// a waiter that gives up leaves it at once. docs/safety.md ("The fair
// mutex") states the guarantees; docs/protocol.md the keys and scripts.
//
// Redis only: other backends refuse it with error::invalid_argument. A fair
// mutex and a mutex on the same name refuse each other (error::wrong_type).
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/lock_handle.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>

namespace corolock {

// Redis's own client (client.hpp), which is a backend too; declared only, so
// that a lock header does not compile the Redis client for other backends.
class client;

class COROLOCK_API fair_mutex : public detail::lock_handle {
public:
    // As mutex's constructors; also throws system_error(invalid_argument)
    // for a backend that has no fair mutex.
    fair_mutex(const backend& b, std::string name);
    fair_mutex(client& c, std::string name);

    std::size_t held_levels() const noexcept { return levels(); }

    // As mutex::async_acquire. The wait holds a place in the server's queue;
    // a wait that ends without the lock (cancelled, timed out) gives it up
    // at once, and passes the turn on when it was first.
    template <class CompletionToken = detail::default_token>
    auto async_acquire(lock_options opts, CompletionToken&& token = {}) {
        return initiate({}, opts, std::forward<CompletionToken>(token));
    }

    // Tries once: error::lock_held when another owner holds it, or when it
    // is free but others queue for it (a try never jumps the queue).
    template <class CompletionToken = detail::default_token>
    auto async_try_acquire(lock_options opts, CompletionToken&& token = {}) {
        return initiate({.try_once = true}, opts, std::forward<CompletionToken>(token));
    }

    boost::asio::awaitable<guard> acquire(lock_options opts = {}) { return acquire_or_throw({}, opts); }
    boost::asio::awaitable<std::optional<guard>> try_acquire(lock_options opts = {}) {
        return try_or_throw({}, opts);
    }
};

}  // namespace corolock
