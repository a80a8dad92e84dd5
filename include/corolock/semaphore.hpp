// corolock::semaphore: N permits on one Redis name, each grant a lease.
//
// A semaphore is a handle, and each handle is one owner, as with a mutex.
// Every acquire through a handle takes `permits` of the name's `capacity`
// permits and returns a guard of its own (token, release, lost signal); the
// grants of one handle share one lease, renewed by one watchdog, so a
// crashed holder's permits come back at its lease end. A handle's own
// permits count like anyone's: acquiring more than are free waits, even
// when the handle holds some.
//
// Waiting is driven by the name's unlock channel: a release wakes the
// local waiters whose permits fit in what is free after it, oldest first.
// Each wait is capped at the time until enough leases end, so a lost
// message costs at most that. The semaphore is not
// fair: a waiter of many permits can wait while smaller ones get in.
//
// Every handle of one name should give the same capacity: each acquire is
// checked against its own handle's, and a lower one revokes nothing
// (docs/safety.md, "The semaphore"). Redis only: another backend refuses
// the handle with error::invalid_argument. lock_options::replicas is the
// mutex's only (an acquire asking for it fails with invalid_argument).
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/lock_handle.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace corolock {

// Redis's own client (client.hpp), which is a backend too; declared only, so
// that a lock header does not compile the Redis client for other backends.
class client;

// The largest capacity a semaphore may have.
inline constexpr std::uint32_t max_semaphore_capacity = 1'000'000;

class COROLOCK_API semaphore : public detail::lock_handle {
public:
    // A handle on `name` with `capacity` permits. Throws
    // boost::system::system_error(error::invalid_argument) for a bad name
    // (as mutex's), a capacity of 0 or over max_semaphore_capacity, or a
    // backend without semaphores.
    semaphore(const backend& b, std::string name, std::uint32_t capacity);
    semaphore(client& c, std::string name, std::uint32_t capacity);

    std::uint32_t capacity() const noexcept { return permits_in_all(); }
    // Grants this handle holds now (locally known), not permits.
    std::size_t held_grants() const noexcept { return levels(); }

    // Takes `permits` (1 to capacity()), waiting up to options.wait (absent:
    // until cancelled). Completes with a guard, or with error::wait_timeout,
    // invalid_argument (permits outside [1, capacity], bad options),
    // wrong_type (the name is a mutex, or holds something else), a
    // connection error, client_stopped, or operation_aborted on
    // cancellation. Cancellation as mutex::async_acquire: permits granted
    // after it are given back at once.
    template <class CompletionToken = detail::default_token>
    auto async_acquire(std::uint32_t permits, lock_options opts, CompletionToken&& token = {}) {
        return initiate({.permits = permits}, opts, std::forward<CompletionToken>(token));
    }

    // Tries once: completes with error::lock_held when the permits do not fit.
    template <class CompletionToken = detail::default_token>
    auto async_try_acquire(std::uint32_t permits, lock_options opts, CompletionToken&& token = {}) {
        return initiate({.try_once = true, .permits = permits}, opts,
                        std::forward<CompletionToken>(token));
    }

    // Coroutine conveniences. acquire() throws boost::system::system_error
    // on failure; try_acquire() returns an empty optional when the permits
    // do not fit and throws for every other failure.
    boost::asio::awaitable<guard> acquire(std::uint32_t permits = 1, lock_options opts = {}) {
        return acquire_or_throw({.permits = permits}, opts);
    }
    boost::asio::awaitable<std::optional<guard>> try_acquire(std::uint32_t permits = 1,
                                                             lock_options opts = {}) {
        return try_or_throw({.permits = permits}, opts);
    }
};

}  // namespace corolock
