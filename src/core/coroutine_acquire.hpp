// What every backend's acquire has in common when it runs as a coroutine on
// the backend's strand (etcd, ZooKeeper): its handler and how it completes
// once, cancellation (abandon: the caller hears operation_aborted at once,
// and the run goes on as background clean-up that drain() waits for), a
// timer used as a condition variable for wake-ups, and the wait's end.
//
// A backend derives its operation from coroutine_acquire<Backend> (Backend
// has strand(), stopped(), get_executor(), work() and recorder()), gives it a run()
// coroutine that calls end_run() when it ends, and starts it with
// start_coroutine_acquire().
#pragma once

#include "core/backend.hpp"
#include "core/background_work.hpp"
#include "core/metrics_recorder.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace corolock::detail {

template <class Backend>
struct coroutine_acquire {
    using clock = std::chrono::steady_clock;

    coroutine_acquire(std::shared_ptr<Backend> b, const lock_options& o, bool once,
                      lock_backend::acquire_handler h, bool d)
        : backend(std::move(b)),
          opts(o),
          try_once(once),
          handler(std::move(h)),
          direct(d),
          wake(backend->strand()) {}

    std::shared_ptr<Backend> backend;
    lock_options opts;
    bool try_once;
    lock_backend::acquire_handler handler;
    bool direct;
    boost::asio::steady_timer wake;  // cancelled by poke() or by abandon()
    bool woken = false;
    bool abandoned = false;
    bool done = false;  // run() ended (or never started)
    // Abandoned while running: background clean-up until run() ends, so a
    // drain waits for the give-back of whatever it still gets.
    background_work::job cleanup;
    clock::time_point started = clock::now();

    void poke() {
        woken = true;
        wake.cancel();
    }

    void complete(error_code ec, guard g) {
        if (!handler) return;
        auto slot = boost::asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        detail::complete_now(std::move(handler), direct, backend->get_executor(), ec,
                             std::move(g));
        handler = {};
    }

    void abandon(error_code ec) {
        abandoned = true;
        if (!done && !cleanup.counted()) cleanup = backend->work().begin();
        complete(ec, {});
        wake.cancel();
    }

    // run() is over: nothing more will be given back.
    void end_run() noexcept {
        done = true;
        backend->work().end(cleanup);
    }

    // Waits for a poke or until `until`. False when abandoned or stopped.
    boost::asio::awaitable<bool> wait_until(clock::time_point until) {
        if (!woken) {
            wake.expires_at(until);
            co_await wake.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        }
        woken = false;
        co_return !abandoned && !backend->stopped();
    }

    // A grant, counted in the backend's metrics.
    void record_grant(bool contended) noexcept {
        auto& m = backend->recorder();
        metrics_recorder::add(m.acquisitions);
        if (contended) metrics_recorder::add(m.contended_acquisitions);
        m.wait.record(clock::now() - started);
    }

    std::optional<clock::time_point> wait_deadline() const {
        if (!opts.wait) return std::nullopt;
        return started + *opts.wait;
    }
};

// Starts `op`: a cancellation through `slot` abandons it on the strand, and
// its run() is spawned there (or it completes with client_stopped when the
// backend has stopped).
template <class Op>
void start_coroutine_acquire(std::shared_ptr<Op> op,
                             boost::asio::cancellation_slot slot) {
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<Op>(op)](boost::asio::cancellation_type) {
            auto o = weak.lock();
            if (!o) return;
            boost::asio::post(o->backend->strand(),
                              [o] { o->abandon(boost::asio::error::operation_aborted); });
        });
    }
    auto strand = op->backend->strand();
    boost::asio::post(strand, [op] {
        if (op->backend->stopped()) {
            op->end_run();
            return op->complete(error::client_stopped, {});
        }
        boost::asio::co_spawn(op->backend->strand(), [op]() { return op->run(); },
                              boost::asio::detached);
    });
}

}  // namespace corolock::detail
