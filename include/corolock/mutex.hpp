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

class mutex {
public:
    using acquire_signature = void(error_code, guard);

    // A handle on `name` in the backend's lock service (any backend: see
    // backend.hpp), or in a Redis client's. Throws
    // boost::system::system_error(error::invalid_argument) for an empty name,
    // a name over max_lock_name_length bytes, or one with braces.
    mutex(const backend& b, std::string name);
    mutex(client& c, std::string name);

    mutex(mutex&&) noexcept = default;
    mutex& operator=(mutex&&) noexcept = default;
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;
    ~mutex();

    const std::string& name() const noexcept;
    const std::string& owner_id() const noexcept;
    // Levels this handle holds now (locally known).
    std::size_t held_levels() const noexcept;

    // Acquires, waiting up to options.wait (absent: until cancelled).
    // Completes with a guard, or with error::wait_timeout, invalid_argument,
    // wrong_type (the name's key holds something else), a connection error,
    // client_stopped, or operation_aborted on cancellation. Honours terminal
    // and partial cancellation while waiting and while a command is in flight;
    // if the server granted the lock after cancellation, it is released at once.
    template <class CompletionToken>
    auto async_acquire(lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this, false}, token, opts);
    }

    // Tries once: completes with error::lock_held when another owner holds it.
    template <class CompletionToken>
    auto async_try_acquire(lock_options opts, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this, true}, token, opts);
    }

    // Coroutine conveniences. acquire() throws boost::system::system_error on
    // failure; try_acquire() returns an empty optional when the lock is held
    // and throws for every other failure.
    boost::asio::awaitable<guard> acquire(lock_options opts = {});
    boost::asio::awaitable<std::optional<guard>> try_acquire(lock_options opts = {});

private:
    // The initiation of async_acquire and async_try_acquire (see
    // detail/completion.hpp).
    struct initiate_acquire {
        using executor_type = boost::asio::any_io_executor;
        mutex* self;
        bool try_once;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler, lock_options opts) const {
            auto h = detail::erase_handler<acquire_signature>(std::forward<Handler>(handler),
                                                              get_executor());
            self->acquire_impl(opts, try_once, std::move(h.handler), h.direct);
        }
    };

    // direct: the handler's executor is the client's (see detail/completion.hpp).
    void acquire_impl(lock_options opts, bool try_once,
                      boost::asio::any_completion_handler<acquire_signature> handler, bool direct);
    boost::asio::any_io_executor executor() const noexcept;

    std::shared_ptr<detail::lock_state> state_;
};

// Checks a name against the rules above; empty why on success.
error_code validate_lock_name(std::string_view name, std::string& why);

}  // namespace corolock
