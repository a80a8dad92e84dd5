// The Redis backend's acquire: the operation's attempts, its grant and its
// end (acquire_op.hpp; its waits are in acquire_wait.cpp), and the
// initiating function.
#include "redis/lock/acquire_op.hpp"

#include "redis/lock/acquire_fsm.hpp"
#include "core/logging.hpp"
#include "redis/connection/client_impl.hpp"
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/lock_service.hpp"
#include "redis/topology/replica_acks.hpp"
#include "redis/lock/shared_scripts.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <utility>

namespace corolock::detail {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

redis_acquire_op::fsm::settings redis_acquire_op::settings_for(const detail::client_impl& c,
                                                               const lock_options& o, bool once) {
    fsm::settings s;
    s.try_once = once;
    if (o.wait) s.wait_deadline = clock::now() + *o.wait;
    s.lease = o.lease;
    s.retry_min = c.cfg().reconnect_min;
    s.retry_max = c.cfg().reconnect_max;
    return s;
}

void redis_acquire_op::fail_safely() noexcept {
    machine.cancel();
    if (replica) replica->confirming.reset();
    // Kept until the end: the list's reference may be the last one.
    std::shared_ptr<detail::lock_service::wait_target> keep;
    if (waiting) {
        waiting = false;
        keep = svc->remove_wait(wait_pos);
    }
    try {
        if (svc) {
            if (waiter.registered) svc->remove_waiter(waiter, false);
            svc->remove_fair_waiter(st->owner, waiter);
            svc->unregister_stop_hook(*this);
            // An attempt may have been granted: give it back (owner- and
            // level-checked, so harmless if it was not).
            if (!handed_over && level != 0)
                svc->release_in_background(st, level, /*give_back=*/true, cleanup);
            svc->work().end(cleanup);
        }
    } catch (...) {
    }
    waiter.wake = nullptr;
    try {
        complete(error::client_stopped, {});
    } catch (...) {
    }
}

void redis_acquire_op::start() {
    svc = lock_service::of(st->client());
    level = st->next_level++;
    waiter.wake = &redis_acquire_op::on_wake;
    waiter.context = this;
    waiter.need = req.permits;
    waiter.yields = detail::reader_yields(st->spec, req);
    waiter.defer = &redis_acquire_op::on_defer;
    svc->register_stop_hook(*this);
    auto f = observe();
    started = f.now;
    // The fair mutex's order is the server's queue: no yielding to other
    // processes, no local queue in front of it.
    if (!machine.try_once() && !f.holds_lock && !fair())
        f.yield_until = svc->yield_until(st->keys.channel());
    perform(machine.start(f));
}

redis_acquire_op::fsm::facts redis_acquire_op::observe() const {
    fsm::facts f;
    f.now = clock::now();
    f.holds_lock = !st->levels.empty();
    f.service_stopped = svc->stopped();
    f.connect_unfixable = st->client().connect_unfixable();
    f.fails_over = st->client().cfg().mode != topology::single;
    // The semaphore is not fair (docs/safety.md): a request that fits
    // is tried at once, never queued behind a local waiter that needs
    // more permits than are free.
    if (machine.deciding_queue() && !fair() && !semaphore()) {
        f.expiry_hint = svc->expiry_hint(st->keys.channel());
        f.local_waiters = svc->waiters().waiter_count(st->keys.channel());
    }
    return f;
}

// The attempt's script: this operation is the call, so an attempt
// allocates nothing but its bytes.
void redis_acquire_op::arguments(detail::script_args& out) const {
    st->kind().acquire_arguments(*st, req, level, {granted, {}, granted_delay}, out);
}

void redis_acquire_op::on_script_reply(error_code ec, reply r) {
    detail::acquire_reply parsed;
    if (!ec) ec = st->kind().parse_acquire_reply(r, parsed);
    step([&] { on_attempt_reply(ec, parsed); });
}

void redis_acquire_op::on_attempt_reply(error_code ec, const detail::acquire_reply& r) {
    token = r.token;
    const bool crossed = !ec && r.acquired && crossed_loss(r);
    const auto f = observe();
    const auto a = machine.on_attempt(
        f, {ec, r.acquired, r.pttl, crossed, r.expires_in_us, r.expires_at_ms, sent});
    // With replica acknowledgement the grant counts once it is confirmed
    // (on_confirmed): a level given back for want of replicas is none.
    if (a.granted && !replica) note_grant(f.now);
    if (crossed)
        st->client().log().info(
            "acquire {}: the grant crossed a lost tenure or came after its deadline; giving "
            "it back",
            escaped{st->name});
    if (!ec && r.acquired && a.give_back && !crossed)
        st->client().log().debug("acquire {}: granted after cancellation; releasing",
                                escaped{st->name});
    if (ec && a.fresh_level)
        st->client().log().info("acquire {}: {}; retrying", escaped{st->name}, ec.message());
    else if (ec && a.what == fsm::step::done)
        st->client().log().debug("acquire {} failed: {}", escaped{st->name}, ec.message());
    perform(a);
}

// Metrics and the observer hear of a grant before its caller resumes.
// A handoff is a grant whose attempt was sent after a wake-up. `now`:
// the grant's reply, or the replicas' confirmation.
void redis_acquire_op::note_grant(clock::time_point now) {
    auto& c = st->client();
    auto& m = c.metrics();
    const auto waited = now - started;
    if (woken_at != clock::time_point{} && woken_at <= sent) m.handoff.record(now - woken_at);
    m.granted(c.event_observer(), c.log(), st->name, waited, machine.contended());
}

// A grant that cannot start or continue a tenure safely. Either the
// attempt re-entered a tenure that was lost while it was in flight (the
// loss's clean-up, queued behind it, removes what it granted), or the
// script created the key while the handle holds a live tenure: the key
// was removed behind the holder (broken, evicted, lost in a failover),
// so that tenure is lost now and its clean-up removes this grant too.
// The machine gives the level back and tries again, fresh.
// A re-entry confirmed only after its tenure's deadline ends that tenure.
// A grant that begins a tenure but comes back after its own deadline
// (sent + lease - drift: the server may have run it at once and expired
// it since) would hand out a guard that is lost at birth; it is treated
// the same way.
bool redis_acquire_op::crossed_loss(const detail::acquire_reply& r) {
    if (sent_epoch != 0 && st->lost_epoch >= sent_epoch) return true;
    if (st->live() && st->live()->deadline() <= clock::now()) {
        // The live tenure's deadline passed before this re-entry's grant
        // came back (its timer and this reply were ready together): the
        // tenure is lost, whatever the grant says.
        svc->lose_tenure(st, "the lease deadline passed before a re-entry was confirmed");
        return true;
    }
    if (r.created && st->live()) {
        svc->lose_tenure(st, "its key was removed behind the holder (found by a re-entry)");
        return true;
    }
    if (!st->live() && detail::watchdog_schedule::deadline_for(sent, granted) <= clock::now())
        return true;
    return false;
}

// The side effects in the order the machine lists them, then the step.
void redis_acquire_op::perform(const fsm::action& a) {
    if (a.give_back) svc->release_in_background(st, level, /*give_back=*/true, cleanup);
    if (a.fresh_level) level = st->next_level++;
    if (a.join_queue) {
        svc->add_waiter(waiter, st->keys.channel());
        if (fair()) svc->add_fair_waiter(st->owner, waiter);
    }
    if (a.rearm) svc->rearm_waiter(waiter);
    if (a.note_expiry) svc->note_expiry_hint(st->keys.channel(), a.expiry);
    switch (a.what) {
    case fsm::step::attempt:
        granted = machine.lease();
        granted_delay = lock_delay;
        sent_epoch = 0;
        if (auto* t = st->live()) {
            // A re-entry never asks for less than its tenure holds, so
            // the grant's deadline and the renewals agree with the TTL.
            granted = std::max(granted, t->terms.lease);
            granted_delay = std::max(granted_delay, t->terms.lock_delay);
            sent_epoch = t->epoch;
        }
        sent = clock::now();
        attempted = true;
        svc->run_script(st->kind().acquire_script(), shared_from_this(), /*idempotent=*/false);
        return;
    case fsm::step::wait:
        wait_until(a.until);
        return;
    case fsm::step::done:
        finish(a);
        return;
    }
}

// Registrations go first, the caller's completion last: a handler that
// runs inline then finds this operation already out of every list.
void redis_acquire_op::finish(const fsm::action& a) {
    std::shared_ptr<detail::tenure> t;
    if (a.granted) t = svc->on_acquired(st, level, sent, granted, asked());
    if (a.leave_queue) svc->remove_waiter(waiter, a.granted);
    if (leaves_queue()) leave_server_queue(a);
    if (a.granted && replica) {
        confirm(std::move(t));
        return;
    }
    end_registrations();
    if (a.granted) {
        hand_over(std::move(t));
    } else {
        // Neither granted nor failed: only a cancelled operation ends so,
        // and its caller has had its answer already.
        assert(a.ec || machine.abandoned());
        complete(a.ec ? a.ec : error_code(error::client_stopped), {});
    }
}

// A fair mutex's operation, or a shared mutex's marked writer, that ends
// without the lock gives up its place on the server at once (the release
// script removes the entry or marker, and hands the lock on if the entry
// was granted meanwhile): cancelled, timed out, or a try that queued.
void redis_acquire_op::leave_server_queue(const fsm::action& a) {
    svc->remove_fair_waiter(st->owner, waiter);
    if (!a.granted && !a.give_back && attempted && !svc->stopped())
        svc->release_in_background(st, level, /*give_back=*/true, cleanup);
}

void redis_acquire_op::end_registrations() {
    svc->unregister_stop_hook(*this);
    svc->work().end(cleanup);
    waiter.wake = nullptr;  // the only reference to this op that is not owning
}

void redis_acquire_op::hand_over(std::shared_ptr<detail::tenure> t) {
    auto g = detail::make_guard(st, level, token, std::move(t));
    handed_over = true;
    complete({}, std::move(g));
}

// The level is held (the watchdog renews it) but not handed out until
// enough replicas acknowledged it, on a side connection, so that this
// client's other commands do not wait behind the WAIT.
void redis_acquire_op::confirm(std::shared_ptr<detail::tenure> t) {
    replica->confirming = std::move(t);
    svc->acks().confirm(st->keys.lock(), st->owner, level, replica->replicas,
                        replica->timeout,
                        [self = shared_from_this()](error_code ec, const std::string& why) {
                            self->step([&] { self->on_confirmed(ec, why); });
                        });
}

void redis_acquire_op::on_confirmed(error_code ec, const std::string& why) {
    auto t = std::move(replica->confirming);
    if (!t) return;  // abandoned meanwhile: the level was given back then
    if (!ec && (t->lost() || t->deadline() <= clock::now())) ec = error::lock_lost;
    if (!ec) {
        note_grant(clock::now());
        end_registrations();
        hand_over(std::move(t));
        return;
    }
    st->client().log().info("acquire {}: {}; giving the level back", escaped{st->name},
                            why.empty() ? ec.message() : why);
    if (svc->stopped()) {
        end_registrations();
        complete(ec, {});
        return;
    }
    // The failure is reported once the level is gone from the server: a
    // release's NOSCRIPT fallback would otherwise go out behind whatever
    // the caller sends next (another owner's try_acquire, say).
    if (!cleanup.counted()) cleanup = svc->work().begin();
    svc->release_level(st, level, nullptr,
                       asio::bind_executor(st->client().strand(),
                                           [self = shared_from_this(), ec](error_code) {
                                               self->step([&] {
                                                   self->end_registrations();
                                                   self->complete(ec, {});
                                               });
                                           }),
                       /*direct=*/true, /*granted=*/false);
}

void redis_acquire_op::complete(error_code ec, guard g) {
    if (!handler) return;
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) slot.clear();
    detail::complete(std::move(handler), initiating, direct, st->client().get_executor(), ec,
                     std::move(g));
    handler = {};
}

void redis_acquire_op::on_client_stopped() {
    step([&] { abandon(error::client_stopped); });
}

// Normally unlinked already (finish, fail_safely); an operation dropped
// unfinished unlinks here, while `svc` still keeps the list's sentinel
// alive, so that it leaves no dangling link behind.
redis_acquire_op::~redis_acquire_op() {
    if (!svc) return;
    // Still a waiter only if it was dropped unfinished (a completion list
    // cut short): a registered waiter left behind would be woken later.
    if (waiter.registered) {
        try {
            svc->remove_waiter(waiter, false);
        } catch (...) {
            // Allocation failed, perhaps before the waiter was out.
            svc->forget_waiter(waiter);
        }
    }
    svc->remove_fair_waiter(st->owner, waiter);
    svc->unregister_stop_hook(*this);
    // Its script's answer will never come: nothing is left to wait for.
    // (Not once nothing runs any more: a drain's handler is dropped then.)
    if (!svc->stopped()) svc->work().end(cleanup);
}

// The caller gets its answer now; the machine ends at its next step.
void redis_acquire_op::abandon(error_code ec) {
    machine.cancel();
    if (replica && replica->confirming) {
        // Granted, its replicas still awaited: give the level back now
        // (on the main connection, not behind the WAIT).
        replica->confirming.reset();
        if (!svc->stopped())  // else nothing can be sent: the TTL frees it
            svc->release_in_background(st, level, /*give_back=*/true, cleanup);
        end_registrations();
    } else if (svc && !machine.finished() && !cleanup.counted()) {
        cleanup = svc->work().begin();
    }
    complete(ec, {});
    if (waiting) end_wait_early();
}


void redis_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                            const acquire_request& req, bool try_once, acquire_handler handler,
                            bool direct) {
    auto state = std::static_pointer_cast<redis_lock_state>(base);
    auto& client = state->client();
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<redis_acquire_op>(std::move(state), opts, req, try_once,
                                           std::move(handler));
    op->direct = direct;
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<redis_acquire_op>(op)](asio::cancellation_type) {
            auto o = weak.lock();
            if (!o) return;
            // Posted: completing clears this slot, which must not happen
            // from inside the slot's own handler.
            asio::post(o->st->client().strand(), [o] {
                o->step([&] { o->abandon(asio::error::operation_aborted); });
            });
        });
    }
    auto start = [op] {
        auto& c = op->st->client();
        if (c.stopped()) {
            op->complete(error::client_stopped, {});
            return;
        }
        if (op->replica && !op->st->kind().confirms_replicas()) {
            c.note_error(error::invalid_argument,
                         "lock_options::replicas is offered by corolock::mutex only");
            op->complete(error::invalid_argument, {});
            return;
        }
        if (op->replica && c.cfg().mode == topology::cluster) {
            // The confirmation's WAIT has no key to route it by: it would
            // reach some node, not the lock's primary (docs/topologies.md).
            c.note_error(error::invalid_argument,
                         "lock_options::replicas is not supported on a Redis Cluster yet");
            op->complete(error::invalid_argument, {});
            return;
        }
        op->step([&] { op->start(); });
    };
    if (client.strand().running_in_this_thread()) {
        // A caller resumed by the client's own completion (the usual case)
        // starts at once, saving a post and the scheduler's poll it costs;
        // an answer reached inside this call is posted, never run here.
        op->initiating = true;
        start();
        op->initiating = false;
    } else {
        asio::post(client.strand(), std::move(start));
    }
}


}  // namespace corolock::detail
