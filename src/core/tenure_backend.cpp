#include "core/tenure_backend.hpp"

#include "core/logging.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

namespace corolock::detail {

namespace asio = boost::asio;

tenure_backend::tenure_backend(asio::any_io_executor ex, const backend_config& settings)
    : executor_(ex),
      strand_(asio::make_strand(inner_executor(ex))),
      logger_(logger_or_default(settings.logger)),
      observer_(settings.observer),
      work_(std::make_shared<background_work>(strand_, ex)) {}

void tenure_backend::stop() noexcept {
    if (stopped_.exchange(true)) return;
    try {
        asio::post(strand_, [self = shared_from_this()] {
            self->wake_for_stop();
            // Holders' until_lost() waits end (with client_stopped); what
            // their sessions or leases hold goes with them on the server.
            auto holding = std::move(self->holding_);
            for (auto& [id, weak] : holding) {
                if (auto st = weak.lock()) {
                    if (st->deadline_timer) st->deadline_timer->cancel();
                    st->signal_lost();
                }
            }
            self->stop_protocol();
            self->work_->stop();
        });
    } catch (...) {
        // Allocation failed: each operation sees stopped() at its next step.
    }
}

void tenure_backend::drain(clock::duration bound, release_handler handler, bool direct) {
    asio::post(strand_, [self = shared_from_this(), bound, h = std::move(handler),
                         direct]() mutable {
        if (self->stopped()) {
            complete_now(std::move(h), direct, self->executor_, error_code(error::client_stopped));
            return;
        }
        self->work_->drain(bound, std::move(h), direct);
    });
}

void tenure_backend::release_in_background(const std::shared_ptr<lock_state>& base,
                                           std::uint64_t level) {
    auto st = std::static_pointer_cast<tenure_state>(base);
    if (!st->current || take_level(*st, level, *st->current) != release_step::last_level) return;
    end_tenure(st);
    give_back(st);
}

void tenure_backend::lose_tenure(const std::shared_ptr<tenure_state>& st, const char* why) {
    if (!lose_live(*st, metrics_, log(), why)) return;
    end_tenure(st);
    st->signal_lost();
    give_back(st);
}

void tenure_backend::hold(const std::shared_ptr<tenure_state>& st) {
    holding_[st->watch_id] = st;
}

void tenure_backend::end_tenure(const std::shared_ptr<tenure_state>& st) noexcept {
    st->levels.clear();
    st->held.store(0, std::memory_order_release);
    if (st->deadline_timer) st->deadline_timer->cancel();
    holding_.erase(st->watch_id);
    on_tenure_end(st);
}

void tenure_backend::arm_deadline(std::shared_ptr<tenure_state> st, std::uint64_t epoch) {
    if (!st->deadline_timer) st->deadline_timer = std::make_unique<asio::steady_timer>(strand_);
    auto at = st->current->deadline();
    if (const auto every = deadline_recheck(); every.count() > 0)
        at = std::min(at, clock::now() + every);
    st->deadline_timer->expires_at(at);
    st->deadline_timer->async_wait([self = shared_from_this(), st, epoch](error_code ec) {
        // Cancelled: a re-arm's wait replaced this one, or the tenure ended,
        // or the backend stopped. Either way this wait is no check of its
        // own (a cancelled wait that re-armed would cancel the new one, and
        // so on for as long as the lock is held).
        if (ec == asio::error::operation_aborted) return;
        auto* t = st->live();
        if (!t || t->epoch != epoch || t->lost() || self->stopped()) return;
        const auto now = clock::now();
        const auto deadline = self->deadline_now(*st);
        if (now >= deadline) return self->lose_tenure(st, self->deadline_passed(*st, now));
        // A renewal or a heartbeat moved the deadline: publish it.
        t->publish_deadline(deadline);
        self->arm_deadline(st, epoch);
    });
}

void tenure_backend::answer_release(const lock_state& st, release_handler h, bool direct,
                                    error_code ec) {
    if (ec) metrics_.release_found_gone(observer_.get(), log(), st.name, ec);
    asio::post(strand_, [h = std::move(h), ec, direct, ex = executor_]() mutable {
        complete_now(std::move(h), direct, ex, ec);
    });
}

tenure_backend::clock::time_point tenure_backend::deadline_now(const tenure_state& st) const
    noexcept {
    return st.current->deadline();
}

const char* tenure_backend::deadline_passed(const tenure_state&, clock::time_point) const {
    return "the lease deadline passed without a confirmed renewal";
}

}  // namespace corolock::detail
