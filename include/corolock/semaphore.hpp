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

#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace corolock {

// The largest capacity a semaphore may have.
inline constexpr std::uint32_t max_semaphore_capacity = 1'000'000;

class semaphore {
public:
    using acquire_signature = void(error_code, guard);

    // A handle on `name` with `capacity` permits. Throws
    // boost::system::system_error(error::invalid_argument) for a bad name
    // (as mutex's), a capacity of 0 or over max_semaphore_capacity, or a
    // backend without semaphores.
    semaphore(const backend& b, std::string name, std::uint32_t capacity);
    semaphore(client& c, std::string name, std::uint32_t capacity);

    semaphore(semaphore&&) noexcept = default;
    semaphore& operator=(semaphore&&) noexcept = default;
    semaphore(const semaphore&) = delete;
    semaphore& operator=(const semaphore&) = delete;
    ~semaphore();

    const std::string& name() const noexcept;
    const std::string& owner_id() const noexcept;
    std::uint32_t capacity() const noexcept;
    // Grants this handle holds now (locally known), not permits.
    std::size_t held_grants() const noexcept;

    // Takes `permits` (1 to capacity()), waiting up to options.wait (absent:
    // until cancelled). Completes with a guard, or with error::wait_timeout,
    // invalid_argument (permits outside [1, capacity], bad options),
    // wrong_type (the name is a mutex, or holds something else), a
    // connection error, client_stopped, or operation_aborted on
    // cancellation. Cancellation as mutex::async_acquire: permits granted
    // after it are given back at once.
    template <class CompletionToken>
    auto async_acquire(std::uint32_t permits, lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this, false}, token, permits, opts);
    }

    // Tries once: completes with error::lock_held when the permits do not fit.
    template <class CompletionToken>
    auto async_try_acquire(std::uint32_t permits, lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this, true}, token, permits, opts);
    }

    // Coroutine conveniences. acquire() throws boost::system::system_error
    // on failure; try_acquire() returns an empty optional when the permits
    // do not fit and throws for every other failure.
    boost::asio::awaitable<guard> acquire(std::uint32_t permits = 1, lock_options opts = {});
    boost::asio::awaitable<std::optional<guard>> try_acquire(std::uint32_t permits = 1,
                                                             lock_options opts = {});

private:
    struct initiate_acquire {
        using executor_type = boost::asio::any_io_executor;
        semaphore* self;
        bool try_once;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler, std::uint32_t permits, lock_options opts) const {
            auto h = detail::erase_handler<acquire_signature>(std::forward<Handler>(handler),
                                                              get_executor());
            self->acquire_impl(permits, opts, try_once, std::move(h.handler), h.direct);
        }
    };

    void acquire_impl(std::uint32_t permits, lock_options opts, bool try_once,
                      boost::asio::any_completion_handler<acquire_signature> handler, bool direct);
    boost::asio::any_io_executor executor() const noexcept;

    std::shared_ptr<detail::lock_state> state_;
    std::uint32_t capacity_ = 0;
};

}  // namespace corolock
