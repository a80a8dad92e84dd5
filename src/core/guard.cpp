#include <corolock/guard.hpp>

#include "core/backend.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace corolock {

namespace asio = boost::asio;
using detail::lock_state;

namespace {
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// On the strand: hands the level to the lock service's background releases.
void release_now(const std::shared_ptr<lock_state>& st, std::uint64_t level) {
    st->backend->release_in_background(st, level);
}

// Hands a level's release to the client's background work, without waiting.
void release_detached(std::shared_ptr<lock_state> st, std::uint64_t level) noexcept {
    try {
        if (st->backend->stopped()) return;  // nothing can be sent; the TTL frees it
        if (st->backend->strand().running_in_this_thread()) {
            // Dropped where the client runs (code its completion resumed):
            // released now, so the level is gone before whatever that code
            // does next. Posted, the release would come after the same
            // handle's next acquire, which would then be granted as a
            // re-entry: the lock never free, its waiters never woken.
            release_now(st, level);
            return;
        }
        auto strand = st->backend->strand();  // before `st` is moved from
        asio::post(strand, [st = std::move(st), level] { release_now(st, level); });
    } catch (...) {
        // Allocation failed: the lease expires by itself within its TTL.
    }
}
}  // namespace

guard detail::make_guard(std::shared_ptr<lock_state> st, std::uint64_t level, std::uint64_t token,
                         std::shared_ptr<tenure> t) noexcept {
    return guard(std::move(st), level, token, std::move(t));
}

guard::guard(std::shared_ptr<lock_state> st, std::uint64_t level, std::uint64_t token,
             std::shared_ptr<detail::tenure> t) noexcept
    : state_(std::move(st)), tenure_(std::move(t)), level_(level), token_(token) {}

guard::guard(guard&& other) noexcept
    : state_(std::move(other.state_)),
      tenure_(std::move(other.tenure_)),
      level_(std::exchange(other.level_, 0)),
      token_(other.token_) {}

guard& guard::operator=(guard&& other) noexcept {
    if (this != &other) {
        if (state_ && level_ != 0) release_detached(std::move(state_), level_);
        state_ = std::move(other.state_);
        tenure_ = std::move(other.tenure_);
        level_ = std::exchange(other.level_, 0);
        token_ = other.token_;
    }
    return *this;
}

guard::~guard() {
    if (state_ && level_ != 0) release_detached(std::move(state_), level_);
}

bool guard::owns_lock() const noexcept { return state_ && level_ != 0; }

guard::clock::time_point guard::lease_deadline() const noexcept {
    return tenure_ ? tenure_->deadline() : clock::time_point::min();
}

bool guard::lost() const noexcept { return tenure_ && tenure_->lost(); }

const std::string& guard::name() const noexcept {
    static const std::string empty;
    return state_ ? state_->name : empty;
}

asio::any_io_executor guard::client_executor(const std::shared_ptr<lock_state>& st) noexcept {
    return st ? st->backend->get_executor() : asio::any_io_executor{};
}

asio::any_io_executor guard::operation_executor(const std::shared_ptr<lock_state>& st) noexcept {
    if (st) return st->backend->get_executor();
    return asio::system_executor();
}

void guard::release_impl(asio::any_completion_handler<void(error_code)> handler, bool direct) {
    if (!owns_lock()) {
        detail::complete_posted(std::move(handler), client_executor(state_), error::released);
        return;
    }
    auto st = state_;
    const auto level = std::exchange(level_, 0);
    if (st->backend->stopped()) {
        detail::complete_posted(std::move(handler), st->backend->get_executor(), error::client_stopped);
        return;
    }
    auto release = [st, level, t = tenure_, direct, handler = std::move(handler)]() mutable {
        st->backend->release(st, level, std::move(t), std::move(handler), direct);
    };
    // Called from the strand (a caller resumed by the client's own
    // completion, the usual case), the release is queued at once: it never
    // completes inside this call, since its answer comes from the server (or,
    // when the client has stopped meanwhile, by a post). Otherwise posted.
    if (st->backend->strand().running_in_this_thread())
        release();
    else
        asio::post(st->backend->strand(), std::move(release));
}

void guard::until_lost_impl(std::shared_ptr<lock_state> st, std::shared_ptr<detail::tenure> t,
                            asio::any_completion_handler<void(error_code)> handler) {
    if (!st || !t) {
        detail::complete_posted(std::move(handler), {}, error::released);
        return;
    }
    // The wait is registered on the strand, later. A cancellation emitted
    // before then (work() || until_lost() where work() finishes at once) must
    // not be lost: note it now, and let the strand side see the note.
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto cancelled_early = std::make_shared<bool>(false);
    if (slot.is_connected())
        slot.assign([cancelled_early](asio::cancellation_type) { *cancelled_early = true; });

    asio::post(st->backend->strand(), [st, t, cancelled_early,
                                      handler = std::move(handler)]() mutable {
        auto finish = [&](error_code ec) {
            auto s = asio::get_associated_cancellation_slot(handler);
            if (s.is_connected()) s.clear();
            detail::complete_now(std::move(handler), false, st->backend->get_executor(), ec);
        };
        if (*cancelled_early) return finish(asio::error::operation_aborted);
        if (t->lost()) return finish(error::lock_lost);
        if (st->backend->stopped())
            return finish(error::client_stopped);
        if (st->live() != t.get()) return finish(error::released);
        // lost_signal is a condition variable: it is cancelled when the lease
        // is lost or the client stops. From here the caller's cancellation
        // reaches this one wait through its slot (which replaces the note).
        auto slot = asio::get_associated_cancellation_slot(handler);
        st->lost_timer().async_wait(asio::bind_cancellation_slot(
            slot, [st, t, handler = std::move(handler)](error_code) mutable {
                error_code result = asio::error::operation_aborted;
                if (t->lost())
                    result = error::lock_lost;
                else if (st->backend->stopped())
                    result = error::client_stopped;
                detail::complete_now(std::move(handler), false, st->backend->get_executor(),
                                     result);
            }));
    });
}

asio::awaitable<void> guard::until_lost() const {
    auto [ec] = co_await async_until_lost(use_nothrow);
    if (ec != error::lock_lost) throw boost::system::system_error(ec, "corolock: until_lost");
}

asio::awaitable<error_code> guard::release() {
    auto [ec] = co_await async_release(use_nothrow);
    co_return ec;
}

}  // namespace corolock
