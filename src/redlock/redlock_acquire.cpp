// RedLock's acquire (redlock_backend.hpp): the rounds of one acquire over
// the nodes, until granted by a majority within the validity, refused for
// good (a try), timed out, cancelled or stopped.
#include "redlock/redlock_backend.hpp"

#include "redlock/node_watch.hpp"

#include "core/guard_access.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>

namespace corolock::detail {

namespace asio = boost::asio;

// One acquire: rounds until granted, refused for good (a try), timed out,
// cancelled or stopped. Strand only, but for its construction and the
// caller's cancellation slot (the initiating call's).
class redlock_backend::round_op : public std::enable_shared_from_this<round_op> {
public:
    round_op(std::shared_ptr<redlock_backend> b, std::shared_ptr<redlock_lock_state> s,
             const lock_options& o, bool try_once, acquire_handler h, bool direct)
        : be(std::move(b)),
          st(std::move(s)),
          opts(o),
          once(try_once),
          handler(std::move(h)),
          direct_(direct),
          nodes(st->members.size()),
          guards(st->members.size()),
          timer(be->strand_),
          rng(std::random_device{}()),
          started(clock::now()) {
        if (opts.wait) wait_deadline = started + *opts.wait;
    }

    // In the initiating call, as every corolock acquire assigns its slot.
    void connect_cancellation() {
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (!slot.is_connected()) return;
        slot.assign([w = weak_from_this(), strand = be->strand_](asio::cancellation_type) {
            asio::post(strand, [w] {
                if (auto op = w.lock()) op->abandon(asio::error::operation_aborted);
            });
        });
    }

    void start() {
        if (done_) return;  // abandoned before it started
        if (auto* t = st->live(); t && !t->lost()) {
            // A re-entry joins the live tenure, with no round, while its
            // deadline holds: check() first loses a tenure whose quorum
            // deadline has passed (its timer may not have run yet), and the
            // re-entry then takes a round of its own instead of a guard that
            // is lost at birth.
            be->check(st, t->epoch);
        }
        if (auto* t = st->live(); t && !t->lost()) {
            // No round, so the nodes' leases and watchdogs stay the first
            // grant's: a re-entry that asks for the watchdog the tenure
            // began without cannot have it, and is refused rather than
            // handed a guard that is lost at the lease's end.
            if (opts.watchdog && t->terms.renew_every.count() == 0)
                return finish(error::invalid_argument);
            // Nor can it lengthen the nodes' lock-delay.
            if (opts.lock_delay > t->terms.lock_delay) return finish(error::invalid_argument);
            const auto level = st->next_level++;
            auto joined = begin_or_join(*st, level, {}, reentry_terms::none).t;
            return finish(error_code{},
                          make_guard(st, level, st->quorum.max_token(), std::move(joined)));
        }
        id_ = ++be->next_op_;
        be->ops_.emplace(id_, weak_from_this());
        begin_round();
    }

    // The caller gives up (cancellation) or the backend stops: the answer now,
    // the tries still out cancelled, what this round took given back.
    void abandon(error_code ec) {
        if (done_) return;
        timer.cancel();
        cancel_pending();
        release_everywhere(std::exchange(guards, std::vector<guard>(nodes.size())), {});
        ++round_;  // answers still to come are of no round
        finish(ec);
    }

private:
    using clock = std::chrono::steady_clock;
    enum class answer : std::uint8_t { none, granted, refused, failed };

    // One node's part: its try's cancellation, its watch, its last answer.
    struct node_part {
        // This round's try's signal. Emitted on the node's strand only, where
        // the node's acquire assigns and clears the slot (cancel_try).
        std::shared_ptr<asio::cancellation_signal> signal;
        std::shared_ptr<node_watch> watch;  // null until subscribed, or not Redis
        answer last = answer::none;         // this round's answer so far
        bool early_wake = false;            // an unlock message came before it
        clock::time_point expiry = clock::time_point::min();  // the holder's, if refused
    };

    void begin_round() {
        if (be->stopped()) return finish(error::client_stopped);
        ++round_;
        answered_ = 0;
        waiting_ = false;
        wake_pending_ = false;
        round_woken_at_ = std::exchange(woken_at_, clock::time_point{});
        be->rounds_.fetch_add(1, std::memory_order_relaxed);
        for (auto& g : guards) g = guard{};
        st->quorum.begin_round(clock::now(), opts.lease);
        lock_options node = opts;
        node.wait.reset();
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            auto& n = nodes[i];
            n.last = answer::none;
            n.early_wake = false;
            // Posted ahead of the try: a release after the try wakes again.
            if (n.watch) n.watch->rearm();
            n.signal = std::make_shared<asio::cancellation_signal>();
            ++be->tries_out_;
            st->members[i].async_try_acquire(
                node, asio::bind_cancellation_slot(
                          n.signal->slot(),
                          [op = shared_from_this(), i, r = round_, w = n.watch](
                              error_code ec, guard g) mutable {
                              op->answer_from_node(r, i, std::move(w), ec, std::move(g));
                          }));
        }
        timer.expires_after(be->opts_.node_timeout);
        timer.async_wait([op = shared_from_this(), r = round_](error_code ec) {
            if (!ec && r == op->round_) op->time_out_nodes();
        });
    }

    // Any thread (where the node completes). A refusal's holder expiry, which
    // the node's service noted, is read on the node's strand.
    void answer_from_node(std::uint64_t r, std::size_t i, std::shared_ptr<node_watch> w,
                          error_code ec, guard g) {
        if (ec != error::lock_held) w.reset();
        auto deliver = [op = shared_from_this(), r, i, ec, w](guard g) mutable {
            const auto expiry = w ? w->expiry_hint() : clock::time_point::min();
            asio::post(op->be->strand_, [op, i, r, ec, expiry, g = std::move(g)]() mutable {
                op->on_answer(r, i, ec, std::move(g), expiry);
                op->be->on_try_settled();
            });
        };
        if (!w || be->node_strand(i).running_in_this_thread())
            deliver(std::move(g));
        else
            asio::post(be->node_strand(i), [deliver, g = std::move(g)]() mutable {
                deliver(std::move(g));
            });
    }

    // Cancels node i's try of this round on the node's strand. Emitting here
    // would race the node's acquire clearing the slot on its own strand when
    // it completes (an io_context run by several threads).
    void cancel_try(std::size_t i) {
        asio::post(be->node_strand(i), [s = nodes[i].signal] {
            s->emit(asio::cancellation_type::terminal);
        });
    }

    // Every try of this round not answered yet (nor timed out).
    void cancel_pending() {
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (nodes[i].signal && nodes[i].last == answer::none) cancel_try(i);
    }

    // The per-node timeout: every node still pending is failed, and its try
    // cancelled (a grant that arrives anyway is given back by the core).
    void time_out_nodes() {
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (st->quorum.state(i) == redlock_quorum::node_state::pending) {
                st->quorum.on_failed(i);
                nodes[i].last = answer::failed;
                cancel_try(i);
            }
        decide();
    }

    void on_answer(std::uint64_t r, std::size_t i, error_code ec, guard g,
                   clock::time_point expiry) {
        if (r != round_) return;  // a guard of an old round is released as it drops
        ++answered_;
        auto& n = nodes[i];
        if (ec == error::lock_held) {
            n.last = answer::refused;
            n.expiry = expiry;
            contended_ = true;
            st->quorum.on_refused(i);
            if (std::exchange(n.early_wake, false)) woken();
        } else if (!ec && decided_round_ != round_ &&
                   st->quorum.state(i) == redlock_quorum::node_state::pending) {
            n.last = answer::granted;
            st->quorum.on_granted(i, g.token());
            guards[i] = std::move(g);
        } else {
            // An error, the timeout's cancellation, or a grant too late for
            // its round (given back as `g` drops).
            if (n.last == answer::none) n.last = ec ? answer::failed : answer::granted;
            st->quorum.on_failed(i);
        }
        decide();
    }

    void decide() {
        if (decided_round_ == round_) {
            maybe_next_round();
            return;
        }
        const auto now = clock::now();
        const auto o = st->quorum.decide(now);
        const bool all_answered =
            st->quorum.count(redlock_quorum::node_state::pending) == 0;
        if (o == redlock_quorum::outcome::granted && all_answered) {
            timer.cancel();
            decided_round_ = round_;
            lease_terms terms{opts.lease, opts.watchdog ? opts.renew_interval : clock::duration{},
                              opts.lock_delay};
            auto g = be->on_granted(st, terms, std::move(guards));
            return finish(error_code{}, std::move(g));
        }
        if (o != redlock_quorum::outcome::failed) return;
        // Out of reach: give back what this round took, everywhere at once.
        // Tries still out may answer until the per-node timeout: a refusal
        // there tells whom to wait for (a late grant is given back).
        decided_round_ = round_;
        be->rounds_failed_.fetch_add(1, std::memory_order_relaxed);
        release_everywhere(std::exchange(guards, std::vector<guard>(nodes.size())), {});
        maybe_next_round();
    }

    std::size_t count(answer a) const {
        return static_cast<std::size_t>(
            std::count_if(nodes.begin(), nodes.end(), [a](const node_part& n) { return n.last == a; }));
    }

    // After a failed round, once every node answered (so that no try of the
    // handle is still on its way): the answer, or the wait for the next round.
    void maybe_next_round() {
        if (answered_ < nodes.size() || done_) return;
        if (once) return finish(error::lock_held);
        const auto now = clock::now();
        if (wait_deadline && now >= *wait_deadline) return finish(error::wait_timeout);
        const bool refused = count(answer::refused) > 0;
        // Contended: subscribe on every node, then try again at once, so that
        // a release between the refusals and the SUBSCRIBEs is not missed.
        if (refused && !subscribed_ && subscribe()) return begin_round();
        auto until = wait_deadline.value_or(clock::time_point::max());
        // A refusing node's release wakes the waiter; the holder's expiry
        // there bounds the wait, should its message be lost.
        if (refused && subscribed_) until = std::min(until, holder_expiry(now));
        // Nodes down or slow publish nothing when they come back: poll them.
        if (!refused || !subscribed_ || count(answer::failed) > 0)
            until = std::min(until, now + random_in(be->opts_.retry_min, be->opts_.retry_max));
        if (wake_pending_) until = std::min(until, now + random_in({}, be->opts_.wake_jitter));
        wait_until(until);
    }

    // When enough of the refusing nodes' keys expire for a majority to be
    // free, as their refusals saw it (a key of unknown TTL: a lease from now).
    clock::time_point holder_expiry(clock::time_point now) const {
        std::vector<clock::time_point> at;
        for (const auto& n : nodes)
            if (n.last == answer::refused)
                at.push_back(n.expiry == clock::time_point::min() ? now + opts.lease
                                                                  : std::max(n.expiry, now));
        if (at.empty()) return now + opts.lease;
        // The others may be free: that many fewer refusers need to expire.
        const auto others = nodes.size() - at.size();
        const auto m = st->quorum.majority();
        const auto k = std::clamp<std::size_t>(m > others ? m - others : 1, 1, at.size());
        std::nth_element(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(k - 1), at.end());
        return at[k - 1];
    }

    clock::duration random_in(clock::duration lo, clock::duration hi) {
        std::uniform_int_distribution<clock::rep> pick(lo.count(), std::max(lo, hi).count());
        return clock::duration(pick(rng));
    }

    void wait_until(clock::time_point until) {
        waiting_ = true;
        timer.expires_at(until);
        timer.async_wait([op = shared_from_this(), r = round_](error_code ec) {
            if (!ec && r == op->round_ && !op->done_) op->begin_round();
        });
    }

    // Joins every node's unlock channel; false when no node can wake us.
    bool subscribe() {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            nodes[i].watch = node_watch::make(
                be->nodes_[i], st->name, [w = weak_from_this(), i, strand = be->strand_] {
                    asio::post(strand, [w, i] {
                        if (auto op = w.lock()) op->on_unlock(i);
                    });
                });
            if (!nodes[i].watch) continue;
            nodes[i].watch->join();
            subscribed_ = true;
        }
        return subscribed_;
    }

    // Node i published a release. Only a node that refused this waiter has
    // news: on the others it is a give-back, as likely as not this waiter's.
    void on_unlock(std::size_t i) {
        if (done_) return;
        auto& n = nodes[i];
        if (n.last == answer::none) {
            n.early_wake = true;  // news if its answer, still on its way, is a refusal
            return;
        }
        if (n.last != answer::refused) {
            n.watch->rearm();
            return;
        }
        woken();
    }

    void woken() {
        const auto now = clock::now();
        woken_at_ = now;
        if (!waiting_) {
            wake_pending_ = true;  // a round is out: the next one follows at once
            return;
        }
        const auto at = now + random_in({}, be->opts_.wake_jitter);
        if (at < timer.expiry()) wait_until(at);
    }

    void finish(error_code ec, guard g = {}) {
        if (done_) return;
        done_ = true;
        waiting_ = false;
        timer.cancel();
        for (auto& n : nodes)
            if (n.watch) n.watch->leave(!ec);
        be->ops_.erase(id_);
        if (!ec) note_grant();
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        complete_now(std::move(handler), direct_, be->executor_, ec, std::move(g));
    }

    void note_grant() {
        auto& m = be->metrics_;
        const auto now = clock::now();
        m.granted(be->event_observer(), be->log(), st->name, now - started, contended_);
        if (round_woken_at_ != clock::time_point{}) m.handoff.record(now - round_woken_at_);
    }

    std::shared_ptr<redlock_backend> be;
    std::shared_ptr<redlock_lock_state> st;
    lock_options opts;
    bool once;
    acquire_handler handler;
    bool direct_;
    std::vector<node_part> nodes;
    std::vector<guard> guards;
    asio::steady_timer timer;
    std::mt19937_64 rng;
    clock::time_point started;
    std::optional<clock::time_point> wait_deadline;
    clock::time_point woken_at_{};        // the last useful wake-up ({}: none since a round)
    clock::time_point round_woken_at_{};  // the wake-up this round follows ({}: none)
    std::uint64_t id_ = 0, round_ = 0, decided_round_ = 0;
    std::size_t answered_ = 0;
    bool subscribed_ = false;
    bool waiting_ = false;      // between rounds, the timer set
    bool wake_pending_ = false; // woken while a round was out
    bool contended_ = false;    // a node refused in some round
    bool done_ = false;
};

void redlock_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                              const acquire_request&, bool try_once, acquire_handler handler,
                              bool direct) {
    auto op = std::make_shared<round_op>(shared_from_this(),
                                         std::static_pointer_cast<redlock_lock_state>(base), opts,
                                         try_once, std::move(handler), direct);
    op->connect_cancellation();
    asio::post(strand_, [op] { op->start(); });
}

void redlock_backend::abandon_rounds() {
    auto ops = std::exchange(ops_, {});
    for (auto& [id, w] : ops)
        if (auto op = w.lock()) op->abandon(error::client_stopped);
}

}  // namespace corolock::detail
