// corolock::mutex: a distributed, re-entrant lease lock on one Redis name.
//
// A mutex is a handle, and each handle is one owner (a 128-bit random id).
// Acquiring again through the same handle re-enters: each level gets its own
// guard, token and release. Different handles are different owners, even in
// one process or one coroutine. Ownership never depends on threads.
//
// Waiting is driven by the lock's unlock channel (pub/sub), never by polling:
// a release wakes one local waiter. Each wait is also capped at the lock's
// remaining TTL, so a lost message costs at most one TTL.
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/lock_handle.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace corolock {

// Redis's own client (client.hpp), which is a backend too; declared only, so
// that a lock header does not compile the Redis client for other backends.
class client;

class COROLOCK_API mutex : public detail::lock_handle {
public:
    // A handle on `name` in the backend's lock service (any backend: see
    // backend.hpp), or in a Redis client's. Throws
    // boost::system::system_error(error::invalid_argument) for an empty name,
    // a name over max_lock_name_length bytes, or one with braces.
    mutex(const backend& b, std::string name);
    mutex(client& c, std::string name);

    // Levels this handle holds now (locally known).
    std::size_t held_levels() const noexcept { return levels(); }

    // Acquires, waiting up to options.wait (absent: until cancelled).
    // Completes with a guard, or with error::wait_timeout, invalid_argument,
    // wrong_type (the name's key holds something else), a connection error,
    // client_stopped, or operation_aborted on cancellation. Honours terminal
    // and partial cancellation while waiting and while a command is in flight;
    // if the server granted the lock after cancellation, it is released at once.
    template <class CompletionToken = detail::default_token>
    auto async_acquire(lock_options opts, CompletionToken&& token = {}) {
        return initiate({}, opts, std::forward<CompletionToken>(token));
    }

    // Tries once: completes with error::lock_held when another owner holds it.
    template <class CompletionToken = detail::default_token>
    auto async_try_acquire(lock_options opts, CompletionToken&& token = {}) {
        return initiate({.try_once = true}, opts, std::forward<CompletionToken>(token));
    }

    // Coroutine conveniences. acquire() throws boost::system::system_error on
    // failure; try_acquire() returns an empty optional when the lock is held
    // and throws for every other failure.
    boost::asio::awaitable<guard> acquire(lock_options opts = {}) { return acquire_or_throw({}, opts); }
    boost::asio::awaitable<std::optional<guard>> try_acquire(lock_options opts = {}) {
        return try_or_throw({}, opts);
    }
};

// Checks a name against the rules above; empty why on success.
COROLOCK_API error_code validate_lock_name(std::string_view name, std::string& why);

}  // namespace corolock
