// The Redis backend's acquire (acquire_op.hpp), its waits: the timed wait
// in the lock service's list, the wake-ups of the unlock channel, and a fair
// mutex's handoff granted while it waited.
#include "redis/lock/acquire_op.hpp"

#include "core/logging.hpp"
#include "redis/connection/client_impl.hpp"

#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace corolock::detail {

namespace asio = boost::asio;

// An unlock message woke this waiter (`context` is the operation).
// (A fair mutex's release that named this owner: see on_handoff.)
void redis_acquire_op::on_wake(void* context) noexcept {
    auto* op = static_cast<redis_acquire_op*>(context);
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
void redis_acquire_op::on_defer(void* context, std::uint64_t ms) noexcept {
    auto* op = static_cast<redis_acquire_op*>(context);
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

// A fair mutex's release handed the lock to this owner. Only this
// operation's current level, granted after this operation began and not in
// the future, is its grant: anything else is an earlier operation's of the
// same handle, whose give-back frees it.
void redis_acquire_op::on_handoff(redis_acquire_op* op, const detail::fair_grant& g) noexcept {
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
void redis_acquire_op::on_handed_off() {
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
void redis_acquire_op::wait_until(clock::time_point until) {
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
void redis_acquire_op::wait_over() {
    waiting = false;
    woken_at = {};  // ended by its time: the next attempt is no handoff
    step([&] { resume_soon(); });
}

// A wake-up or cancellation while the wait is pending. Posted first: if
// that fails, the wait is still in place.
void redis_acquire_op::end_wait_early() {
    resume_soon();
    waiting = false;
    auto keep = svc->remove_wait(wait_pos);
}

void redis_acquire_op::resume_soon() {
    asio::post(st->client().strand(), [self = shared_from_this()] { self->on_wait(); });
}

void redis_acquire_op::on_wait() {
    step([&] {
        if (std::exchange(handoff, false))
            on_handed_off();
        else
            perform(machine.on_wait(observe()));
    });
}

}  // namespace corolock::detail
