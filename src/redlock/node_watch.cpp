#include "redlock/node_watch.hpp"

#include "redis/lock/lock_service.hpp"
#include "redis/lock/redis_backend.hpp"
#include "redis/lock/scripts.hpp"

#include <boost/asio/post.hpp>

namespace corolock::detail {

namespace asio = boost::asio;

std::shared_ptr<node_watch> node_watch::make(const backend& node, std::string_view lock_name,
                                             wake_fn wake) {
    if (dynamic_cast<redis_backend*>(backend_access::impl(node).get()) == nullptr) return nullptr;
    return std::make_shared<node_watch>(backend_access::impl(node), std::string(lock_keys(lock_name).channel()),
                                        std::move(wake));
}

node_watch::node_watch(std::shared_ptr<lock_backend> node, std::string channel, wake_fn wake)
    : node_(std::move(node)), channel_(std::move(channel)), wake_(std::move(wake)) {
    waiter_.wake = &node_watch::on_wake;
    waiter_.context = this;
}

node_watch::~node_watch() {
    // leave() ran unless the io_context was destroyed with it still queued:
    // then nothing runs any more, and the waiter only has to be unlinked.
    if (svc_ && waiter_.registered) svc_->forget_waiter(waiter_);
}

void node_watch::join() {
    asio::post(strand(), [self = shared_from_this()] {
        try {
            auto& client = static_cast<redis_backend&>(*self->node_).client();
            if (!self->svc_) self->svc_ = lock_service::of(client);
            if (!self->waiter_.registered) self->svc_->add_waiter(self->waiter_, self->channel_);
        } catch (...) {
            // Allocation failed: no wake-ups from this node; the cap ends waits.
        }
    });
}

void node_watch::rearm() {
    asio::post(strand(), [self = shared_from_this()] {
        if (self->svc_ && self->waiter_.registered) self->svc_->rearm_waiter(self->waiter_);
    });
}

void node_watch::leave(bool acquired) {
    asio::post(strand(), [self = shared_from_this(), acquired] {
        self->waiter_.wake = nullptr;
        if (!self->svc_) return;
        try {
            self->svc_->remove_waiter(self->waiter_, acquired);
        } catch (...) {
            self->svc_->forget_waiter(self->waiter_);  // the UNSUBSCRIBE failed to queue
        }
    });
}

node_watch::clock::time_point node_watch::expiry_hint() const {
    return svc_ ? svc_->expiry_hint(channel_) : clock::time_point::min();
}

void node_watch::on_wake(void* self) noexcept {
    try {
        static_cast<node_watch*>(self)->wake_();
    } catch (...) {
        // Only posting can fail (allocation): the wait's TTL cap ends it.
    }
}

}  // namespace corolock::detail
