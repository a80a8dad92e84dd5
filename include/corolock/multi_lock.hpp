// corolock::multi_lock: several names on one backend, all or nothing.
//
// A multi_lock is one corolock::mutex per distinct name, taken one after the
// other in canonical order: the names sorted bytewise, duplicates merged.
// Two multi-locks whose sets overlap, given in any order, then both wait on
// the lowest name they share first, so neither can hold a name the other
// waits on while waiting for one it holds: no deadlock (docs/safety.md,
// "The multi-lock"). Each member is a plain mutex, so a multi_lock works on
// every backend and topology the mutex does, names in different Cluster
// slots included.
//
// The acquire completes with a multi_guard holding every name, or with an
// error and none of them: members taken before a failure or a cancellation
// are released (and awaited) before it completes.
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace corolock {

// Redis's own client (client.hpp), which is a backend too; declared only, so
// that a lock header does not compile the Redis client for other backends.
class client;

class multi_lock;

// Proof of holding every name of a multi_lock. Move-only; dropping it
// releases every member in the background (each as a dropped guard does:
// never blocking, never throwing).
class COROLOCK_API multi_guard {
public:
    using clock = std::chrono::steady_clock;

    multi_guard() noexcept = default;
    multi_guard(multi_guard&&) noexcept = default;
    multi_guard& operator=(multi_guard&&) noexcept = default;

    // True while it holds its members (not released, not moved from).
    bool owns_lock() const noexcept;
    explicit operator bool() const noexcept { return owns_lock(); }

    // Each name with its fencing token, in canonical (bytewise) order.
    std::vector<std::pair<std::string, std::uint64_t>> tokens() const;
    // The token of one member; 0 when the name is not one of them.
    std::uint64_t token(std::string_view name) const noexcept;
    // The member guards, in canonical order.
    const std::vector<guard>& members() const noexcept { return members_; }

    // The earliest member's lease deadline: the set is safe until then.
    clock::time_point lease_deadline() const noexcept;
    // True once any member's tenure is known or presumed lost.
    bool lost() const noexcept;

    // Completes with error::lock_lost when any member is lost, and otherwise
    // as guard::async_until_lost (error::released on an empty guard,
    // error::client_stopped, operation_aborted when cancelled: terminal
    // cancellation and every weaker kind).
    template <class CompletionToken = detail::default_token>
    auto async_until_lost(CompletionToken&& token = {}) const {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            initiate_until_lost{this}, token);
    }
    boost::asio::awaitable<void> until_lost() const;

    // Releases every member, concurrently; every one is attempted. Completes
    // with success when all were released, else with the error of the first
    // member (in canonical order) that failed, with guard::async_release's
    // meanings; error::released on an empty or released multi_guard.
    template <class CompletionToken = detail::default_token>
    auto async_release(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            initiate_release{this}, token);
    }
    boost::asio::awaitable<error_code> release();

private:
    friend class multi_lock;
    multi_guard(std::vector<guard> members, boost::asio::any_io_executor ex) noexcept
        : members_(std::move(members)), ex_(std::move(ex)) {}

    struct initiate_until_lost {
        using executor_type = boost::asio::any_io_executor;
        const multi_guard* self;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler) const {
            auto h = detail::erase_handler<void(error_code)>(std::forward<Handler>(handler),
                                                             self->client_executor());
            self->until_lost_impl(std::move(h.handler));
        }
    };
    struct initiate_release {
        using executor_type = boost::asio::any_io_executor;
        multi_guard* self;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler) const {
            auto h = detail::erase_handler<void(error_code)>(std::forward<Handler>(handler),
                                                             self->client_executor());
            self->release_impl(std::move(h.handler), h.direct);
        }
    };

    void until_lost_impl(boost::asio::any_completion_handler<void(error_code)> handler) const;
    void release_impl(boost::asio::any_completion_handler<void(error_code)> handler, bool direct);
    // The backend's executor; empty without members.
    boost::asio::any_io_executor client_executor() const noexcept;
    // The backend's executor, or the system executor without members.
    boost::asio::any_io_executor executor() const noexcept;

    std::vector<guard> members_;
    boost::asio::any_io_executor ex_;  // the backend's
};

class COROLOCK_API multi_lock {
public:
    using acquire_signature = void(error_code, multi_guard);

    // Handles on `names` in the backend's lock service (any backend), or in
    // a Redis client's: one mutex, one owner, per distinct name. Throws
    // boost::system::system_error(error::invalid_argument) for an empty set,
    // a name the mutex refuses (validate_lock_name), or two names the server
    // locks as one (PostgreSQL hashes a name to one advisory key: two names
    // of one key would wait for each other inside this acquire).
    multi_lock(const backend& b, std::vector<std::string> names);
    multi_lock(client& c, std::vector<std::string> names);
    // Move-only, as a mutex: a copy would be the same owners.
    multi_lock(multi_lock&&) noexcept = default;
    multi_lock& operator=(multi_lock&&) noexcept = default;
    multi_lock(const multi_lock&) = delete;
    multi_lock& operator=(const multi_lock&) = delete;

    // The distinct names, in canonical (bytewise) order: the acquire order.
    std::vector<std::string> names() const;

    // Acquires every name in canonical order, each with `opts`; opts.wait
    // bounds the whole acquire (each member waits for what is left of it).
    // Completes with the multi_guard, or with the first member's error
    // (error::wait_timeout, a connection error, ...), or operation_aborted
    // when cancelled (any cancellation type: before a member's acquire,
    // while it waits or while its command is in flight), or
    // error::lock_lost when a member taken earlier was lost before the last
    // was granted; in every failure, the members already taken are released
    // before it completes.
    template <class CompletionToken = detail::default_token>
    auto async_acquire(lock_options opts, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this}, token, false, opts);
    }
    // Tries each member once: error::lock_held when another owner holds one.
    template <class CompletionToken = detail::default_token>
    auto async_try_acquire(lock_options opts, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, acquire_signature>(
            initiate_acquire{this}, token, true, opts);
    }

    // Coroutine conveniences, as mutex's: acquire() throws
    // boost::system::system_error; try_acquire() returns an empty optional
    // when a member is held by another owner.
    boost::asio::awaitable<multi_guard> acquire(lock_options opts = {});
    boost::asio::awaitable<std::optional<multi_guard>> try_acquire(lock_options opts = {});

private:
    struct initiate_acquire {
        using executor_type = boost::asio::any_io_executor;
        multi_lock* self;
        executor_type get_executor() const noexcept { return self->executor(); }
        template <class Handler>
        void operator()(Handler&& handler, bool try_once, lock_options opts) const {
            auto h = detail::erase_handler<acquire_signature>(std::forward<Handler>(handler),
                                                              get_executor());
            self->start(try_once, opts, std::move(h.handler), h.direct);
        }
    };

    void start(bool try_once, lock_options opts,
               boost::asio::any_completion_handler<acquire_signature> handler, bool direct);
    boost::asio::any_io_executor executor() const noexcept;

    boost::asio::any_io_executor executor_;  // the backend's
    // Shared with acquires in flight, which may outlive this object.
    std::shared_ptr<std::vector<mutex>> members_;
};

namespace detail {
// The canonical order: distinct names, sorted bytewise.
COROLOCK_API std::vector<std::string> canonical_names(std::vector<std::string> names);
// The remaining wait of an acquire that may wait until `deadline`, at `now`:
// absent without a deadline, never negative.
COROLOCK_API std::optional<std::chrono::steady_clock::duration> remaining_wait(
    std::optional<std::chrono::steady_clock::time_point> deadline,
    std::chrono::steady_clock::time_point now);
}  // namespace detail

}  // namespace corolock
