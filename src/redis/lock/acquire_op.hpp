// One acquire of the Redis backend in progress: the Asio shell around the
// core's acquire_fsm. acquire.cpp: its attempts, grant and end;
// acquire_wait.cpp: its waits, wake-ups and fair handoffs.
#pragma once

#include "redis/lock/acquire_fsm.hpp"
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/lock_service.hpp"
#include "redis/lock/redis_backend.hpp"
#include "redis/lock/shared_scripts.hpp"

#include <boost/asio/any_completion_handler.hpp>

#include <chrono>
#include <memory>

namespace corolock::detail {

// One acquire in progress: the Asio shell around detail::acquire_fsm, which
// makes every decision. The shell runs the acquire script, waits in the lock
// service's list of timed waits (one timer for every waiter of the client)
// until an unlock message takes it out early, and keeps the queue
// registration; it lives (owned by its pending attempt, its wait in that
// list, or a posted resume) until the machine is done, which may be
// after the caller's handler was completed, so that a lock granted after the
// caller gave up is released at once. The handler is completed at most once:
// by the result, by cancellation or by the client stopping.
struct redis_acquire_op : std::enable_shared_from_this<redis_acquire_op>,
                    detail::lock_service::wait_target,
                    detail::script_call {
    using handler_type = boost::asio::any_completion_handler<void(error_code, guard)>;
    using fsm = detail::acquire_fsm;
    using clock = std::chrono::steady_clock;

    redis_acquire_op(std::shared_ptr<redis_lock_state> s, lock_options o,
                     const acquire_request& r, bool once, handler_type h)
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
                                      bool once);

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

    void fail_safely() noexcept;

    void start();

    fsm::facts observe() const;

    void arguments(detail::script_args& out) const override;

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

    void on_script_reply(error_code ec, reply r) override;

    void on_attempt_reply(error_code ec, const detail::acquire_reply& r);

    void note_grant(clock::time_point now);

    bool crossed_loss(const detail::acquire_reply& r);

    void perform(const fsm::action& a);

    static void on_wake(void* context) noexcept;

    static void on_defer(void* context, std::uint64_t ms) noexcept;

    static void on_handoff(redis_acquire_op* op, const detail::fair_grant& g) noexcept;

    void on_handed_off();

    void wait_until(clock::time_point until);

    void wait_over() override;

    void end_wait_early();

    void resume_soon();

    void on_wait();

    void finish(const fsm::action& a);

    void leave_server_queue(const fsm::action& a);

    void end_registrations();

    void hand_over(std::shared_ptr<detail::tenure> t);

    void confirm(std::shared_ptr<detail::tenure> t);

    void on_confirmed(error_code ec, const std::string& why);

    bool completed() const noexcept { return !handler; }

    void complete(error_code ec, guard g);

    void on_client_stopped() override;

    ~redis_acquire_op();

    void abandon(error_code ec);
};

}  // namespace corolock::detail
