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

#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <memory>
#include <optional>
#include <string>

namespace corolock {

class fair_mutex {
public:
    using acquire_signature = void(error_code, guard);

    // As mutex's constructors; also throws system_error(invalid_argument)
    // for a backend that has no fair mutex.
    fair_mutex(const backend& b, std::string name);
    fair_mutex(client& c, std::string name);

    fair_mutex(fair_mutex&&) noexcept = default;
    fair_mutex& operator=(fair_mutex&&) noexcept = default;
    fair_mutex(const fair_mutex&) = delete;
    fair_mutex& operator=(const fair_mutex&) = delete;
    ~fair_mutex();

    const std::string& name() const noexcept;
    const std::string& owner_id() const noexcept;
    std::size_t held_levels() const noexcept;

    // As mutex::async_acquire. The wait holds a place in the server's queue;
    // a wait that ends without the lock (cancelled, timed out) gives it up
    // at once, and passes the turn on when it was first.
    template <class CompletionToken>
    auto async_acquire(lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this, false}, token, opts);
    }

    // Tries once: error::lock_held when another owner holds it, or when it
    // is free but others queue for it (a try never jumps the queue).
    template <class CompletionToken>
    auto async_try_acquire(lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this, true}, token, opts);
    }

    boost::asio::awaitable<guard> acquire(lock_options opts = {});
    boost::asio::awaitable<std::optional<guard>> try_acquire(lock_options opts = {});

private:
    struct initiate_acquire {
        using executor_type = boost::asio::any_io_executor;
        fair_mutex* self;
        bool try_once;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler, lock_options opts) const {
            auto h = detail::erase_handler<acquire_signature>(std::forward<Handler>(handler),
                                                              get_executor());
            self->acquire_impl(opts, try_once, std::move(h.handler), h.direct);
        }
    };

    void acquire_impl(lock_options opts, bool try_once,
                      boost::asio::any_completion_handler<acquire_signature> handler, bool direct);
    boost::asio::any_io_executor executor() const noexcept;

    std::shared_ptr<detail::lock_state> state_;
};

}  // namespace corolock
