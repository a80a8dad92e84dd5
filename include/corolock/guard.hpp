// corolock::guard: proof of holding one level of a lock.
//
// A guard is move-only. It carries the fencing token minted when this level
// was acquired, and the local steady_clock time until which the lease is
// known to be valid. Dropping a guard without release() hands the release to
// the client's background work: the destructor never blocks and never throws.
#pragma once

#include <corolock/export.hpp>

#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace corolock {

class guard;
namespace detail {
struct guard_access;
struct lock_state;
class tenure;
guard make_guard(std::shared_ptr<lock_state> st, std::uint64_t level, std::uint64_t token,
                 std::shared_ptr<tenure> t) noexcept;
}  // namespace detail

class COROLOCK_API guard {
public:
    using clock = std::chrono::steady_clock;

    guard() noexcept = default;
    guard(guard&& other) noexcept;
    guard& operator=(guard&& other) noexcept;
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    ~guard();

    // True while this guard holds its level (not released, not moved from).
    // A lost lease still owns_lock() until released: check lost().
    bool owns_lock() const noexcept;
    explicit operator bool() const noexcept { return owns_lock(); }

    // The fencing token: strictly larger than every token minted for this
    // lock name before it, by any owner. Pass it to the protected resource.
    std::uint64_t token() const noexcept { return token_; }

    // The local monotonic time until which the lease is known to be valid:
    // when the last successful acquire or renewal was *sent*, plus the lease,
    // minus a drift allowance. Renewals move it forward. It belongs to this
    // guard's tenure (the levels held without a break since it was granted):
    // once that tenure is lost or has ended, it is no later than that moment.
    clock::time_point lease_deadline() const noexcept;

    // True once this guard's tenure is known or presumed lost.
    bool lost() const noexcept;

    // The lock's name, and how many levels this guard's owner holds.
    const std::string& name() const noexcept;

    // Completes with error::lock_lost when the lease is lost. If the guard
    // is released while waiting, it does not complete on its own (there is
    // nothing left to lose): bind it to work with ||, which cancels it.
    // Completes at once with error::released on an empty or released guard,
    // with error::client_stopped after the client stops, and with
    // operation_aborted when cancelled.
    template <class CompletionToken = detail::default_token>
    auto async_until_lost(CompletionToken&& token = {}) const {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            initiate_until_lost{state_, tenure_}, token);
    }
    // Coroutine form: returns when the lease is lost; throws
    // boost::system::system_error for every other outcome.
    boost::asio::awaitable<void> until_lost() const;

    // Releases this level: owner-checked, idempotent, bounded by the command
    // timeout. Completes with success when released, error::expired when the
    // lease had already ended (whatever was done after the deadline was not
    // protected), error::not_owner when someone else holds the lock now,
    // error::lock_lost when this guard's tenure was lost and the server now
    // holds a later tenure of the same handle (never success after a loss),
    // error::wrong_type when the lock's key holds fields corolock never
    // writes (the key is left untouched), error::released when this guard
    // was released already or is empty.
    // Renewal of the lock stops before the release is sent.
    template <class CompletionToken = detail::default_token>
    auto async_release(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            initiate_release{this}, token);
    }
    boost::asio::awaitable<error_code> release();

private:
    friend struct detail::guard_access;
    friend guard detail::make_guard(std::shared_ptr<detail::lock_state>, std::uint64_t,
                                    std::uint64_t, std::shared_ptr<detail::tenure>) noexcept;
    guard(std::shared_ptr<detail::lock_state> st, std::uint64_t level, std::uint64_t token,
          std::shared_ptr<detail::tenure> t) noexcept;

    // The initiations (see detail/completion.hpp). An empty guard's
    // operations answer on the system executor.
    struct initiate_until_lost {
        using executor_type = boost::asio::any_io_executor;
        std::shared_ptr<detail::lock_state> st;
        std::shared_ptr<detail::tenure> t;
        executor_type get_executor() const noexcept { return operation_executor(st); }
        template <class Handler>
        void operator()(Handler&& handler) const {
            auto h = detail::erase_handler<void(error_code)>(std::forward<Handler>(handler),
                                                             client_executor(st));
            until_lost_impl(st, t, std::move(h.handler));
        }
    };
    struct initiate_release {
        using executor_type = boost::asio::any_io_executor;
        guard* self;
        executor_type get_executor() const noexcept { return operation_executor(self->state_); }
        template <class Handler>
        void operator()(Handler&& handler) const {
            auto h = detail::erase_handler<void(error_code)>(std::forward<Handler>(handler),
                                                             client_executor(self->state_));
            self->release_impl(std::move(h.handler), h.direct);
        }
    };

    static void until_lost_impl(std::shared_ptr<detail::lock_state> st,
                                std::shared_ptr<detail::tenure> t,
                                boost::asio::any_completion_handler<void(error_code)> handler);
    // direct: the handler's executor is the client's (see detail/completion.hpp).
    void release_impl(boost::asio::any_completion_handler<void(error_code)> handler, bool direct);
    // The client's executor; empty without a state.
    static boost::asio::any_io_executor client_executor(
        const std::shared_ptr<detail::lock_state>& st) noexcept;
    // The client's executor, or the system executor without a state.
    static boost::asio::any_io_executor operation_executor(
        const std::shared_ptr<detail::lock_state>& st) noexcept;

    std::shared_ptr<detail::lock_state> state_;
    std::shared_ptr<detail::tenure> tenure_;
    std::uint64_t level_ = 0;
    std::uint64_t token_ = 0;
};

}  // namespace corolock
