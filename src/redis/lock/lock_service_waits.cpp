// lock_service (lock_service.hpp): the waiters of the client's locks (the
// unlock channels' subscriptions, the fair mutex's handoffs, the stop hooks)
// and the one timer of their timed waits.
#include "redis/lock/lock_service.hpp"

#include <corolock/command.hpp>
#include "core/logging.hpp"

#include <boost/asio/bind_executor.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace corolock::detail {

namespace asio = boost::asio;

// ---- waiters ----

void lock_service::send_subscribe(std::string_view channel, bool subscribe, bool priority) {
    // On a cluster the channel is the lock slot's shard channel.
    const bool shard = impl_.sharded_pubsub();
    command cmd{subscribe ? (shard ? "SSUBSCRIBE" : "SUBSCRIBE")
                          : (shard ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"),
                channel};
    client_impl::exec_options opts;
    opts.kind = reply_kind::subscribe;
    opts.priority = priority;
    opts.direct = true;
    auto self = weak_from_this();
    impl_.exec(cmd.payload(), opts,
               exec_handler([self, channel = std::string(channel), subscribe](error_code ec, reply) {
                   auto s = self.lock();
                   if (!s || !ec || ec == error::client_stopped) return;
                   // A failed SUBSCRIBE only costs latency: every wait is
                   // capped at the lock's TTL, so waiters still get through.
                   s->impl_.log().warn("{} {} failed: {}", subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE",
                                       escaped{channel}, ec.message());
               }));
}

void lock_service::add_fair_waiter(std::string_view owner, unlock_waiters::waiter& w) {
    auto [first, last] = fair_waiters_.equal_range(owner);
    for (auto it = first; it != last; ++it)
        if (it->second == &w) return;
    fair_waiters_.emplace(owner, &w);
}

void lock_service::remove_fair_waiter(std::string_view owner,
                                      unlock_waiters::waiter& w) noexcept {
    if (fair_waiters_.empty()) return;
    auto [first, last] = fair_waiters_.equal_range(owner);
    for (auto it = first; it != last; ++it) {
        if (it->second == &w) {
            fair_waiters_.erase(it);
            return;
        }
    }
}

void lock_service::on_fair_grant(std::string_view payload) {
    const auto g = parse_fair_grant(payload);
    if (!g) return;
    auto [first, last] = fair_waiters_.equal_range(g->owner);
    delivering_ = &*g;
    for (auto it = first; it != last; ++it)
        if (it->second->wake) it->second->wake(it->second->context);
    delivering_ = nullptr;
}

void lock_service::add_waiter(unlock_waiters::waiter& w, std::string_view channel) {
    if (waiters_.add(w, channel)) send_subscribe(channel, true, false);
}

void lock_service::remove_waiter(unlock_waiters::waiter& w, bool acquired) {
    if (!w.registered) return;
    // The name outlives the channel's entry only when this is its last
    // waiter; only then is it copied.
    const std::string channel = waiters_.waiter_count(*w.channel) == 1 ? *w.channel : std::string();
    if (!waiters_.remove(w, acquired)) return;
    expiry_hints_.erase(channel);
    if (!stopped_) send_subscribe(channel, false, false);
}

lock_service::clock::time_point lock_service::expiry_hint(std::string_view channel) const {
    auto it = find_channel(expiry_hints_, channel);
    return it == expiry_hints_.end() ? clock::time_point::min() : it->second;
}

void lock_service::note_expiry_hint(std::string_view channel, clock::time_point t) {
    if (waiters_.waiter_count(channel) == 0) return;
    if (auto it = find_channel(expiry_hints_, channel); it != expiry_hints_.end())
        it->second = t;
    else
        expiry_hints_.emplace(std::string(channel), t);
}

lock_service::clock::time_point lock_service::yield_until(std::string_view channel) {
    return handoffs_.yield_until(channel, clock::now());
}

void lock_service::on_release_reply(std::string_view channel, bool tracked,
                                    std::int64_t receivers, clock::time_point sent) {
    const auto d = handoffs_.on_release_reply(channel, tracked, receivers,
                                              waiters_.waiter_count(channel) > 0, sent,
                                              clock::now(), !stopped_);
    if (d.wake_now) waiters_.on_message(channel);
    if (d.arm_at != clock::time_point::min()) arm_handoff_timer(channel, d.arm_at);
}

void lock_service::arm_handoff_timer(std::string_view channel, clock::time_point at) {
    auto& timer = handoffs_.timer(channel);
    if (!timer) timer = std::make_unique<asio::steady_timer>(impl_.get_executor());
    timer->expires_at(at);
    timer->async_wait(asio::bind_executor(
        impl_.strand(), [weak = weak_from_this(), channel = std::string(channel)](error_code ec) {
            auto self = weak.lock();
            // Cancelled only by stop(), which ends every wait anyway.
            if (!self || self->stopped_ || ec) return;
            const int wakes = self->handoffs_.on_timer(channel);
            for (int i = 0; i < wakes; ++i) self->waiters_.on_message(channel);
            self->handoffs_.erase_if_idle(channel, clock::now());
        }));
}

void lock_service::hook_node::unlink(hook_node& n) noexcept {
    n.prev->next = n.next;
    n.next->prev = n.prev;
    n.prev = n.next = &n;
}

void lock_service::hook_node::link_before(hook_node& n, hook_node& at) noexcept {
    n.prev = at.prev;
    n.next = &at;
    at.prev->next = &n;
    at.prev = &n;
}

void lock_service::register_stop_hook(wait_target& op) noexcept {
    hook_node& node = op;
    hook_node::unlink(node);
    hook_node::link_before(node, stop_hooks_);
}

void lock_service::unregister_stop_hook(wait_target& op) noexcept {
    hook_node& node = op;
    hook_node::unlink(node);
}

// ---- timed waits ----

lock_service::wait_list::iterator lock_service::add_wait(clock::time_point until,
                                                        std::shared_ptr<wait_target> target) {
    const auto pos = waits_.emplace(until, std::move(target));
    try {
        arm_wait_timer();
    } catch (...) {
        waits_.erase(pos);
        throw;
    }
    return pos;
}

lock_service::wait_list::iterator lock_service::hasten_wait(wait_list::iterator pos,
                                                            clock::time_point until) noexcept {
    if (until >= pos->first) return pos;
    // Re-keyed in place: extracting and inserting a node allocates nothing.
    auto node = waits_.extract(pos);
    node.key() = until;
    const auto moved = waits_.insert(std::move(node));
    try {
        arm_wait_timer();
    } catch (...) {
        // Only the timer's wait can fail (allocation). The next add_wait()
        // arms it again, and on_wait_timer() ends every wait that is due.
        wait_timer_armed_ = false;
    }
    return moved;
}

std::shared_ptr<lock_service::wait_target> lock_service::remove_wait(wait_list::iterator pos) noexcept {
    auto target = std::move(pos->second);
    waits_.erase(pos);
    // The timer may now fire with nothing due; it re-arms for the next then.
    return target;
}

void lock_service::arm_wait_timer() {
    if (waits_.empty() || stopped_) return;
    const auto first = waits_.begin()->first;
    if (wait_timer_armed_ && wait_timer_.expiry() <= first) return;
    wait_timer_.expires_at(first);  // a pending wait ends with operation_aborted
    wait_timer_armed_ = true;
    wait_timer_.async_wait([weak = weak_from_this()](error_code ec) {
        if (ec == boost::asio::error::operation_aborted) return;  // re-armed, or stopped
        if (auto self = weak.lock()) self->on_wait_timer();
    });
}

void lock_service::on_wait_timer() {
    wait_timer_armed_ = false;
    const auto now = clock::now();
    // wait_over() only posts, so the list does not change under this loop.
    while (!waits_.empty() && waits_.begin()->first <= now) {
        auto target = std::move(waits_.begin()->second);
        waits_.erase(waits_.begin());
        try {
            target->wait_over();
        } catch (const std::exception& e) {
            impl_.log().error("resuming a timed wait failed: {}", escaped{e.what()});
        }
    }
    arm_wait_timer();
}

}  // namespace corolock::detail
