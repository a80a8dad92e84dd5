#include "core/strand_leader_watch.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>

#include <utility>

namespace corolock::detail {

namespace asio = boost::asio;

strand_leader_watch::strand_leader_watch(asio::any_io_executor strand,
                                         asio::any_io_executor completion)
    : strand_(std::move(strand)), completion_(std::move(completion)), timer_(strand_) {}

void strand_leader_watch::wait(clock::duration cap, done_handler h) {
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected()) {
        slot.assign([weak = weak_from_this(), strand = strand_](asio::cancellation_type t) {
            if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                asio::cancellation_type::none)
                return;
            asio::post(strand, [weak] {
                if (auto w = weak.lock()) w->finish(asio::error::operation_aborted);
            });
        });
    }
    asio::post(strand_, [self = shared_from_this(), cap, h = std::move(h)]() mutable {
        self->handler_.swap(h);
        if (self->closed_ || self->backend_stopped()) return self->finish(error::client_stopped);
        if (self->pending_) return self->finish({});
        if (cap == clock::duration::max()) return;
        self->timer_.expires_after(cap);
        self->timer_.async_wait([weak = self->weak_from_this()](error_code ec) {
            if (ec) return;
            if (auto w = weak.lock()) w->finish({});
        });
    });
}

void strand_leader_watch::close() noexcept {
    // Abandons the watch when dropped unrun: whatever keeps a subscription
    // alive (a cycle through the backend) must end even then.
    struct closing {
        std::shared_ptr<strand_leader_watch> watch;
        explicit closing(std::shared_ptr<strand_leader_watch> w) : watch(std::move(w)) {}
        closing(closing&&) noexcept = default;
        closing(const closing&) = delete;
        closing& operator=(const closing&) = delete;
        closing& operator=(closing&&) = delete;
        ~closing() {
            if (watch) watch->abandon();
        }
    };
    try {
        asio::post(strand_, [c = closing(shared_from_this())]() mutable {
            auto self = std::move(c.watch);
            self->closed_ = true;
            self->finish(asio::error::operation_aborted);
            self->on_close();
        });
    } catch (...) {
    }
}

void strand_leader_watch::announce() {
    pending_ = true;
    if (handler_) finish({});
}

void strand_leader_watch::end() {
    closed_ = true;
    finish(error::client_stopped);
}

// A success takes the announcement.
void strand_leader_watch::finish(error_code ec) {
    timer_.cancel();
    if (!handler_) return;
    if (!ec) {
        pending_ = false;
        on_taken();
    }
    done_handler h;
    h.swap(handler_);
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected()) slot.clear();
    complete_now(std::move(h), false, completion_, ec);
}

}  // namespace corolock::detail
