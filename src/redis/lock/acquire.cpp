// The Redis backend's acquire: the Asio shell around the core's
// acquire_fsm, running the acquire script and waiting on the unlock channel.
#include "redis/lock/redis_backend.hpp"

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

namespace {

// One acquire in progress: the Asio shell around detail::acquire_fsm, which
// makes every decision. The shell runs the acquire script, waits in the lock
// service's list of timed waits (one timer for every waiter of the client)
// until an unlock message takes it out early, and keeps the queue
// registration; it lives (owned by its pending attempt, its wait in that
// list, or a posted resume) until the machine is done, which may be
// after the caller's handler was completed, so that a lock granted after the
// caller gave up is released at once. The handler is completed at most once:
// by the result, by cancellation or by the client stopping.
struct acquire_op : std::enable_shared_from_this<acquire_op>,
                    detail::lock_service::wait_target,
                    detail::script_call {
    using handler_type = asio::any_completion_handler<void(error_code, guard)>;
    using fsm = detail::acquire_fsm;

    acquire_op(std::shared_ptr<redis_lock_state> s, lock_options o, const acquire_request& r,
               bool once, handler_type h)
        : st(std::move(s)),
          req(with_waits(r, !once)),
          renew_every(o.watchdog ? o.renew_interval : clock::duration::zero()),
          lock_delay(o.lock_delay),
          replica(o.replicas > 0 ? std::make_unique<replica_wait>(o.replicas_timeout, o.replicas)
                                 : nullptr),
          handler(std::move(h)),
          machine(settings_for(st->client(), o, once)) {}

    static acquire_request with_waits(acquire_request r, bool waits) noexcept {
        r.waits = waits;
        return r;
    }

    static fsm::settings settings_for(const detail::client_impl& c, const lock_options& o,
                                      bool once) {
        fsm::settings s;
        s.try_once = once;
        if (o.wait) s.wait_deadline = clock::now() + *o.wait;
        s.lease = o.lease;
        s.retry_min = c.cfg().reconnect_min;
        s.retry_max = c.cfg().reconnect_max;
        return s;
    }

    // Kept small: a burst of acquires has one of these each in flight. The
    // lease asked for is the machine's; of the other options only this is
    // needed.
    std::shared_ptr<redis_lock_state> st;
    std::shared_ptr<lock_service> svc;
    acquire_request req;          // what the kind's script asks for (permits, shared)
    clock::duration renew_every;  // zero: no watchdog
    clock::duration lock_delay;   // lock_options::lock_delay
    // lock_options::replicas > 0: the grant waits for replicas. Boxed, so
    // that acquires without it (nearly all) pay one pointer for it.
    struct replica_wait {
        replica_wait(clock::duration t, int n) : timeout(t), replicas(n) {}
        clock::duration timeout;
        int replicas;
        // The granted level's tenure while its replicas are being waited
        // for (confirm()); null before, after, and once abandoned.
        std::shared_ptr<detail::tenure> confirming;
    };
    std::unique_ptr<replica_wait> replica;
    handler_type handler;
    // Also a fair mutex's entry in the service's waiters by owner, while
    // it is registered on the channel.
    detail::unlock_waiters::waiter waiter;
    detail::lock_service::wait_list::iterator wait_pos;  // valid while `waiting`
    fsm machine;
    std::uint64_t level = 0;
    std::uint64_t token = 0;
    clock::time_point sent{};
    clock::time_point started{};   // the first step, for the wait-time metric
    clock::time_point woken_at{};  // the last wake-up, for the handoff metric ({}: none)
    // A deferral (on_defer) that came while no wait was pending: the next
    // wait ends no later ({}: none).
    clock::time_point deferred_until{};
    // What the current attempt asked the server for: the lease (a re-entry
    // asks for at least its tenure's), and the tenure it re-entered (0: none).
    clock::duration granted{};
    clock::duration granted_delay{};
    std::uint64_t sent_epoch = 0;
    // The handle's tenure live when a fair handoff's message was delivered
    // (its epoch; 0: none), read in message order: one started since (a
    // sibling acquire's reply handled before the posted resume) is not it.
    std::uint64_t live_at_handoff = 0;
    // Abandoned before the machine finished (a script may be in flight and
    // grant): background clean-up until it finishes, so that a drain waits
    // for the give-back too.
    detail::background_work::job cleanup;
    // The flags last, packed into one word.
    // A wait in the service's list.
    bool waiting = false;
    // A wake-up (unlock message) that arrived while no wait was pending, for
    // instance while an attempt was in flight: the next wait returns at once.
    // Without it the wake-up is lost, and the waiter, still marked woken, is
    // skipped by every later message until its TTL cap: starvation.
    bool wake_pending = false;

    // A fair mutex's handoff granted `level` while this waited: the resume
    // completes the operation granted, with `sent` from the grant's seq.
    bool handoff = false;
    // An attempt was sent: a fair mutex's queue may hold an entry for it.
    bool attempted = false;

    // Whether the caller was handed a guard for `level`: from then on the
    // level is the caller's to release, never the operation's.
    bool handed_over = false;
    // Inside the initiating call (started inline on the strand): an answer
    // reached now is posted, not dispatched.
    bool initiating = false;
    // The handler's executor is the client's io_context executor: on a
    // thread running it, the handler is called directly.
    bool direct = false;

    // Every resume goes through here, on the strand. Nothing may escape: an
    // exception would end the client's reader (attempt replies are delivered
    // from it) or io_context::run(), and leave this operation's waiter and
    // stop hook registered while it is destroyed. Only allocation failure,
    // or a plain callback handler of the caller's that throws when completed,
    // can get here; the caller is then answered client_stopped if it has no
    // answer yet, as with any other end the operation could not reach.
    template <class Step>
    void step(Step&& s) noexcept {
        try {
            s();
        } catch (...) {
            fail_safely();
        }
    }

    void fail_safely() noexcept {
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

    void start() {
        svc = lock_service::of(st->client());
        level = st->next_level++;
        waiter.wake = &acquire_op::on_wake;
        waiter.context = this;
        waiter.need = req.permits;
        waiter.yields = detail::reader_yields(st->spec, req);
        waiter.defer = &acquire_op::on_defer;
        svc->register_stop_hook(*this);
        auto f = observe();
        started = f.now;
        // The fair mutex's order is the server's queue: no yielding to other
        // processes, no local queue in front of it.
        if (!machine.try_once() && !f.holds_lock && !fair())
            f.yield_until = svc->yield_until(st->keys.channel());
        perform(machine.start(f));
    }

    fsm::facts observe() const {
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
    void arguments(detail::script_args& out) const override {
        st->kind().acquire_arguments(*st, req, level, {granted, {}, granted_delay}, out);
    }

    bool fair() const noexcept { return st->spec.kind == detail::lock_spec::kind_t::fair_mutex; }
    bool semaphore() const noexcept {
        return st->spec.kind == detail::lock_spec::kind_t::semaphore;
    }
    // A wait that leaves something on the server to take back when it ends
    // without the lock: a fair mutex's queue entry, a writer's waiting marker.
    bool leaves_queue() const noexcept {
        return fair() || detail::writer_marks(st->spec, req);
    }

    // The terms this acquire asks for, to begin or join a tenure with.
    detail::lease_terms asked() const noexcept {
        return {machine.lease(), renew_every, lock_delay};
    }

    void on_script_reply(error_code ec, reply r) override {
        detail::acquire_reply parsed;
        if (!ec) ec = st->kind().parse_acquire_reply(r, parsed);
        step([&] { on_attempt_reply(ec, parsed); });
    }

    void on_attempt_reply(error_code ec, const detail::acquire_reply& r) {
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
    void note_grant(clock::time_point now) {
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
    bool crossed_loss(const detail::acquire_reply& r) {
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
    void perform(const fsm::action& a) {
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

    // An unlock message woke this waiter (`context` is the operation).
    // (A fair mutex's release that named this owner: see on_handoff.)
    static void on_wake(void* context) noexcept {
        auto* op = static_cast<acquire_op*>(context);
        if (const auto* g = op->svc->fair_grant_in_delivery()) {
            on_handoff(op, *g);
            return;
        }
        op->woken_at = clock::now();
        if (!op->waiting) {
            op->wake_pending = true;
            return;
        }
        try {
            op->end_wait_early();
        } catch (...) {
            // Only posting the resume can fail (allocation), and then the
            // wait is still in place: its time ends it. Nothing else here,
            // since a wake-up runs while the waiter lists are being walked
            // and must not change them.
        }
    }

    // A release let writers in while this reader cannot get in for `ms`
    // more: no try before then, but none later either (a waiting writer
    // may be gone, and its marker end with no message).
    static void on_defer(void* context, std::uint64_t ms) noexcept {
        auto* op = static_cast<acquire_op*>(context);
        const auto until = clock::now() + std::chrono::milliseconds(
                                              std::min<std::uint64_t>(ms, 86'400'000));
        if (op->waiting) {
            op->wait_pos = op->svc->hasten_wait(op->wait_pos, until);
            return;
        }
        // An attempt in flight: its refusal's cap may predate the release
        // (replies and messages can come by different paths on a cluster),
        // so the next wait ends by then too.
        if (op->deferred_until == clock::time_point{} || until < op->deferred_until)
            op->deferred_until = until;
    }

    // A fair mutex's release handed the lock to this owner. Only this operation's current level, granted after this
    // operation began and not in the future, is its grant: anything else is
    // an earlier operation's of the same handle, whose give-back frees it.
    static void on_handoff(acquire_op* op, const detail::fair_grant& g) noexcept {
        const auto seq_time = clock::time_point(std::chrono::nanoseconds(g.seq));
        const auto now = clock::now();
        if (g.level != op->level || op->machine.finished() || seq_time < op->started ||
            seq_time > now)
            return;
        op->woken_at = now;
        if (!op->waiting) {
            // An attempt is in flight: it is granted as a re-entry, or, if
            // it ran before the release, the next one at once is.
            op->wake_pending = true;
            return;
        }
        op->handoff = true;
        op->live_at_handoff = op->st->live() ? op->st->live()->epoch : 0;
        op->sent = seq_time;
        op->token = g.token;
        try {
            op->end_wait_early();
        } catch (...) {
            op->handoff = false;  // the wait is still in place: its time ends it
        }
    }

    // The resume after a handoff: the grant, measured from the seq's time
    // (docs/safety.md, "The handoff deadline"). A handoff is never a
    // re-entry: the fair scripts queue only an owner that does not hold the
    // lock. So a tenure live when the message was delivered lost its key
    // behind the holder (it is lost now, its guards told), and a tenure lost
    // since the attempt was sent (sent_epoch) ended before this grant: the
    // grant joins neither. It is given back, as one past its deadline is,
    // and the wait goes on with a fresh level. A tenure begun after the
    // delivery (a sibling acquire of this handle, granted as a re-entry of
    // the handed lock on the server) is this grant's: it is joined.
    void on_handed_off() {
        bool crossed = sent_epoch != 0 && st->lost_epoch >= sent_epoch;
        if (const auto was = std::exchange(live_at_handoff, 0); was != 0) {
            if (auto* t = st->live(); t && t->epoch == was)
                svc->lose_tenure(st, "its key was removed behind the holder (found by a handoff)");
            crossed = true;
        }
        granted = machine.lease();
        sent_epoch = 0;
        const auto f = observe();
        const bool late = detail::watchdog_schedule::deadline_for(sent, granted) <= f.now;
        if (crossed || late) {
            st->client().log().info("acquire {}: a handoff {}; giving it back", escaped{st->name},
                                    late ? "came after its deadline" : "crossed a lost tenure");
            svc->release_in_background(st, level, /*give_back=*/true, cleanup);
            level = st->next_level++;
            perform(machine.on_wait(f));
            return;
        }
        const auto a = machine.on_handoff(f);
        if (a.granted && !replica) note_grant(f.now);
        perform(a);
    }

    // Waits for a wake-up, the timer's expiry, or cancellation; a wake-up
    // that came while no wait was pending counts.
    void wait_until(clock::time_point until) {
        if (deferred_until != clock::time_point{}) {
            until = std::min(until, deferred_until);
            deferred_until = {};
        }
        if (wake_pending) {
            wake_pending = false;
            resume_soon();
            return;
        }
        wait_pos = svc->add_wait(until, shared_from_this());
        waiting = true;
    }

    // The service's timer: the wait's time came (it is out of the list).
    void wait_over() override {
        waiting = false;
        woken_at = {};  // ended by its time: the next attempt is no handoff
        step([&] { resume_soon(); });
    }

    // A wake-up or cancellation while the wait is pending. Posted first: if
    // that fails, the wait is still in place.
    void end_wait_early() {
        resume_soon();
        waiting = false;
        auto keep = svc->remove_wait(wait_pos);
    }

    void resume_soon() {
        asio::post(st->client().strand(), [self = shared_from_this()] { self->on_wait(); });
    }

    void on_wait() {
        step([&] {
            if (std::exchange(handoff, false))
                on_handed_off();
            else
                perform(machine.on_wait(observe()));
        });
    }

    // Registrations go first, the caller's completion last: a handler that
    // runs inline then finds this operation already out of every list.
    void finish(const fsm::action& a) {
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
    void leave_server_queue(const fsm::action& a) {
        svc->remove_fair_waiter(st->owner, waiter);
        if (!a.granted && !a.give_back && attempted && !svc->stopped())
            svc->release_in_background(st, level, /*give_back=*/true, cleanup);
    }

    void end_registrations() {
        svc->unregister_stop_hook(*this);
        svc->work().end(cleanup);
        waiter.wake = nullptr;  // the only reference to this op that is not owning
    }

    void hand_over(std::shared_ptr<detail::tenure> t) {
        auto g = detail::make_guard(st, level, token, std::move(t));
        handed_over = true;
        complete({}, std::move(g));
    }

    // The level is held (the watchdog renews it) but not handed out until
    // enough replicas acknowledged it, on a side connection, so that this
    // client's other commands do not wait behind the WAIT.
    void confirm(std::shared_ptr<detail::tenure> t) {
        replica->confirming = std::move(t);
        svc->acks().confirm(st->keys.lock(), st->owner, level, replica->replicas,
                            replica->timeout,
                            [self = shared_from_this()](error_code ec, const std::string& why) {
                                self->step([&] { self->on_confirmed(ec, why); });
                            });
    }

    void on_confirmed(error_code ec, const std::string& why) {
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

    bool completed() const noexcept { return !handler; }

    void complete(error_code ec, guard g) {
        if (!handler) return;
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        detail::complete(std::move(handler), initiating, direct, st->client().get_executor(), ec,
                         std::move(g));
        handler = {};
    }

    void on_client_stopped() override {
        step([&] { abandon(error::client_stopped); });
    }

    // Normally unlinked already (finish, fail_safely); an operation dropped
    // unfinished unlinks here, while `svc` still keeps the list's sentinel
    // alive, so that it leaves no dangling link behind.
    ~acquire_op() {
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
    void abandon(error_code ec) {
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
};

}  // namespace

void redis_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                            const acquire_request& req, bool try_once, acquire_handler handler,
                            bool direct) {
    auto state = std::static_pointer_cast<redis_lock_state>(base);
    auto& client = state->client();
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<acquire_op>(std::move(state), opts, req, try_once,
                                           std::move(handler));
    op->direct = direct;
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<acquire_op>(op)](asio::cancellation_type) {
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
