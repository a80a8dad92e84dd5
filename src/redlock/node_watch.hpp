// A RedLock waiter's place on one node's unlock channel (docs/redlock.md,
// "Waiting"): a waiter in the node client's lock service, so that a release
// on that node wakes it. It shares the client's one SUBSCRIBE per channel
// with the process's other waiters, and its re-subscription and wake-up
// after a reconnect. Everything but make() runs on the node's strand.
#pragma once

#include "core/backend.hpp"
#include "redis/lock/waiters.hpp"

#include <corolock/backend.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace corolock::detail {

class lock_service;

class node_watch : public std::enable_shared_from_this<node_watch> {
public:
    using clock = std::chrono::steady_clock;
    // Called on the node's strand at a wake-up. It may post, never add or
    // remove waiters (the service is walking its lists).
    using wake_fn = std::function<void()>;

    // Null when `node` is not a Redis backend: nothing to subscribe to.
    static std::shared_ptr<node_watch> make(const backend& node, std::string_view lock_name,
                                            wake_fn wake);
    node_watch(std::shared_ptr<lock_backend> node, std::string channel, wake_fn wake);
    ~node_watch();
    node_watch(const node_watch&) = delete;
    node_watch& operator=(const node_watch&) = delete;

    const lock_backend::strand_type& strand() const noexcept { return node_->strand(); }

    // Posted to the node's strand in call order, so that one posted before a
    // try is initiated reaches the connection ahead of the try's script.
    void join();                 // a waiter now (SUBSCRIBE if the first)
    void rearm();                // woken: waiting again, same place
    void leave(bool acquired);   // not a waiter (a wake-up unused is passed on)

    // Node strand only: when the holder's key on this node expires, as the
    // node's last refused try or acquire saw it (min(): unknown).
    clock::time_point expiry_hint() const;

private:
    static void on_wake(void* self) noexcept;

    std::shared_ptr<lock_backend> node_;  // keeps the node's client alive
    std::string channel_;
    wake_fn wake_;
    std::shared_ptr<lock_service> svc_;   // from join() on
    unlock_waiters::waiter waiter_;
};

}  // namespace corolock::detail
