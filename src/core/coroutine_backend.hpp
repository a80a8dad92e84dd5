// What the backends whose acquire is a coroutine on their strand (etcd,
// ZooKeeper, PostgreSQL) share: starting the operation with its
// cancellation, its completion and abandonment, a timer used as a condition
// variable for wake-ups (waking_acquire), a release's answer, the lease
// deadline's timer, and drain(). The tenure's own rules (a level added or
// taken off, a lease lost) are core/tenure.hpp's.
//
// A backend type B used here has strand(), stopped(), get_executor(),
// work() (its background_work) and recorder() (its metrics_recorder).
// Strand only, unless said otherwise.
#pragma once

#include "core/background_work.hpp"
#include "core/backend.hpp"
#include "core/logging.hpp"
#include "core/metrics_recorder.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace corolock::detail {

// One acquire's bookkeeping: its caller, whether it was given up, and the
// background job that keeps a drain waiting while a given-up acquire may
// still be granted (and must give the grant back).
template <class Backend>
struct coroutine_acquire {
    using clock = std::chrono::steady_clock;

    coroutine_acquire(std::shared_ptr<Backend> b, lock_options o, bool once,
                      lock_backend::acquire_handler h, bool d)
        : backend(std::move(b)), opts(o), try_once(once), handler(std::move(h)), direct(d) {}

    std::shared_ptr<Backend> backend;
    lock_options opts;
    bool try_once;
    lock_backend::acquire_handler handler;
    bool direct;
    bool abandoned = false;
    bool done = false;  // run() ended (or never started)
    background_work::job cleanup;
    clock::time_point started = clock::now();

    // Answers the caller, once.
    void complete(error_code ec, guard g) {
        if (!handler) return;
        auto slot = boost::asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        detail::complete_now(std::move(handler), direct, backend->get_executor(), ec,
                             std::move(g));
        handler = {};
    }

    // The caller gave up: answered now; what run() still gets is given back
    // as background work.
    void give_up(error_code ec) {
        abandoned = true;
        if (!done && !cleanup.counted()) cleanup = backend->work().begin();
        complete(ec, {});
    }

    // Counts a grant of `lock` in the backend's metrics and tells its
    // observer.
    void count_grant(std::string_view lock, bool contended) {
        backend->recorder().granted(backend->event_observer(), backend->log(), lock,
                                    clock::now() - started, contended);
    }

    // run() is over: nothing more will be given back.
    void end_run() noexcept {
        done = true;
        backend->work().end(cleanup);
    }

    // When the caller's wait ends, if it has a bound.
    std::optional<clock::time_point> wait_deadline() const {
        if (!opts.wait) return std::nullopt;
        return started + *opts.wait;
    }
};

// An acquire that waits on its strand for a wake-up (a watch's event, a
// lost session) with a timer used as a condition variable.
template <class Backend>
struct waking_acquire : coroutine_acquire<Backend> {
    using base = coroutine_acquire<Backend>;
    using typename base::clock;

    waking_acquire(std::shared_ptr<Backend> b, lock_options o, bool once,
                   lock_backend::acquire_handler h, bool d)
        : base(std::move(b), o, once, std::move(h), d), wake(this->backend->strand()) {}

    boost::asio::steady_timer wake;  // cancelled by poke() or by abandon()
    bool woken = false;

    void poke() {
        woken = true;
        wake.cancel();
    }

    void abandon(error_code ec) {
        this->give_up(ec);
        wake.cancel();
    }

    // Waits for a poke or until `until`. False when abandoned or stopped.
    boost::asio::awaitable<bool> wait_until(clock::time_point until) {
        if (!woken) {
            wake.expires_at(until);
            co_await wake.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        }
        woken = false;
        co_return !this->abandoned && !this->backend->stopped();
    }
};

// Makes and starts the backend's acquire operation Op (a coroutine_acquire
// with abandon(ec) and run(), and `st`, its backend's lock state) on the
// backend's strand. Any thread. Its caller's cancellation (any type)
// abandons it on the strand; a stopped backend answers client_stopped.
template <class Op, class Backend>
void start_acquire(std::shared_ptr<Backend> self, const std::shared_ptr<lock_state>& base,
                   const lock_options& opts, bool try_once,
                   lock_backend::acquire_handler handler, bool direct) {
    namespace asio = boost::asio;
    using state = typename decltype(Op::st)::element_type;
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<Op>(std::move(self), std::static_pointer_cast<state>(base), opts,
                                   try_once, std::move(handler), direct);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<Op>(op)](asio::cancellation_type) {
            auto o = weak.lock();
            if (!o) return;
            asio::post(o->backend->strand(), [o] { o->abandon(asio::error::operation_aborted); });
        });
    }
    auto& strand = op->backend->strand();
    asio::post(strand, [op = std::move(op)] {
        if (op->backend->stopped()) {
            op->end_run();
            return op->complete(error::client_stopped, {});
        }
        asio::co_spawn(op->backend->strand(), [op]() { return op->run(); }, asio::detached);
    });
}

// A release's answer known on the strand, posted (a failure counted as a
// release that found its lock gone, and told to the backend's observer).
template <class Strand>
void answer_release(const Strand& strand, const boost::asio::any_io_executor& ex,
                    metrics_recorder& m, const lock_state& st, lock_backend::release_handler h,
                    bool direct, error_code ec) {
    if (ec) m.release_found_gone(st.backend->event_observer(), st.backend->log(), st.name, ec);
    boost::asio::post(strand, [h = std::move(h), ec, direct, ex]() mutable {
        detail::complete_now(std::move(h), direct, ex, ec);
    });
}

// Arms the state's deadline timer for its live tenure `epoch`: past the
// deadline it calls lose(st); earlier (a renewal moved the deadline) it
// arms itself again. State has deadline_timer (a unique_ptr to a timer).
template <class State, class Strand, class Lose>
void arm_tenure_deadline(std::shared_ptr<State> st, std::uint64_t epoch, const Strand& strand,
                         Lose lose) {
    if (!st->deadline_timer) st->deadline_timer = std::make_unique<boost::asio::steady_timer>(strand);
    st->deadline_timer->expires_at(st->current->deadline());
    st->deadline_timer->async_wait([st, epoch, strand, lose](error_code) mutable {
        auto* t = st->live();
        if (!t || t->epoch != epoch || t->lost()) return;
        if (std::chrono::steady_clock::now() >= t->deadline())
            lose(st);
        else
            arm_tenure_deadline(std::move(st), epoch, strand, std::move(lose));
    });
}

// lock_backend::drain over the backend's background work. Any thread.
template <class Backend>
void drain_background_work(std::shared_ptr<Backend> self, std::chrono::steady_clock::duration bound,
                           lock_backend::release_handler handler, bool direct) {
    auto& strand = self->strand();
    boost::asio::post(strand, [self = std::move(self), bound, h = std::move(handler),
                               direct]() mutable {
        if (self->stopped()) {
            detail::complete_now(std::move(h), direct, self->get_executor(),
                                 error_code(error::client_stopped));
            return;
        }
        self->work().drain(bound, std::move(h), direct);
    });
}

}  // namespace corolock::detail
