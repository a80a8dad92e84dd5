#include "core/background_work.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <utility>
#include <vector>

namespace corolock::detail {

namespace asio = boost::asio;

background_work::background_work(strand_type strand, asio::any_io_executor user_ex)
    : strand_(std::move(strand)), user_ex_(std::move(user_ex)) {}

background_work::job background_work::begin() noexcept {
    ++open_jobs_;
    ++outstanding_;
    return {epoch_ + 1};
}

background_work::job background_work::begin_with(const job& parent) noexcept {
    if (!parent.counted() || parent.epoch() == epoch_) return begin();
    auto it = closed_.find(parent.epoch());
    if (it == closed_.end()) return begin();  // not counted after all
    ++it->second;
    ++outstanding_;
    return parent;
}

void background_work::end(job& j) noexcept {
    if (!j.counted()) return;
    const auto epoch = j.epoch();
    j.epoch_plus_one = 0;
    --outstanding_;
    if (epoch == epoch_) {
        --open_jobs_;
        return;
    }
    auto it = closed_.find(epoch);
    if (it == closed_.end() || --it->second != 0) return;
    closed_.erase(it);
    wake_drained();
}

void background_work::drain(clock::duration bound, handler h, bool direct) {
    if (stopped_) {
        complete_now(std::move(h), direct, user_ex_, error_code(error::client_stopped));
        return;
    }
    if (open_jobs_ > 0) closed_.emplace(epoch_, open_jobs_);  // may throw: nothing changed yet
    open_jobs_ = 0;
    const auto horizon = epoch_++;
    if (closed_.empty() || closed_.begin()->first > horizon) {
        complete_now(std::move(h), direct, user_ex_, error_code{});
        return;
    }
    const auto id = next_id_++;
    std::unique_ptr<asio::steady_timer> timer;
    if (bound != clock::duration::max()) {
        timer = std::make_unique<asio::steady_timer>(strand_);
        timer->expires_after(bound);
        timer->async_wait([weak = weak_from_this(), id](error_code ec) {
            if (ec) return;  // the drain ended otherwise
            if (auto self = weak.lock()) self->finish(id, error::drain_timeout);
        });
    }
    auto slot = asio::get_associated_cancellation_slot(h);
    // Constructed, not assigned: Boost 1.81's any_completion_handler move
    // assignment wraps the handler in itself until the stack runs out.
    waiters_.emplace(id, waiter{horizon, std::move(h), direct, std::move(timer)});
    if (slot.is_connected()) {
        // Posted: finishing clears this slot, which must not happen from
        // inside the slot's own handler.
        slot.assign([weak = weak_from_this(), strand = strand_, id](asio::cancellation_type) {
            asio::post(strand, [weak, id] {
                if (auto self = weak.lock()) self->finish(id, asio::error::operation_aborted);
            });
        });
    }
}

void background_work::finish(std::uint64_t id, error_code ec) noexcept {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    auto w = std::move(it->second);
    waiters_.erase(it);
    if (w.timer) w.timer->cancel();
    auto slot = asio::get_associated_cancellation_slot(w.h);
    if (slot.is_connected()) slot.clear();
    try {
        complete_now(std::move(w.h), w.direct, user_ex_, ec);
    } catch (...) {
        // Only dispatching can fail (allocation); the handler is dropped.
    }
}

void background_work::wake_drained() noexcept {
    const auto oldest = closed_.empty() ? ~std::uint64_t{0} : closed_.begin()->first;
    // Collected first: a handler run directly may start another drain.
    std::vector<std::uint64_t> done;
    try {
        for (const auto& [id, w] : waiters_)
            if (w.horizon < oldest) done.push_back(id);
    } catch (...) {
        // Allocation failed: the drains left behind end by their bound.
    }
    for (auto id : done) finish(id, {});
}

void background_work::stop() noexcept {
    stopped_ = true;
    while (!waiters_.empty()) finish(waiters_.begin()->first, error::client_stopped);
}

}  // namespace corolock::detail
