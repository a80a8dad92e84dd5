#include "redlock/redlock_backend.hpp"

#include "redlock/node_watch.hpp"

#include "core/guard_access.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <random>

namespace corolock::detail {

namespace asio = boost::asio;

namespace {

std::vector<mutex> members_for(const std::vector<corolock::backend>& nodes, const std::string& name) {
    std::vector<mutex> out;
    out.reserve(nodes.size());
    for (const auto& n : nodes) out.emplace_back(n, name);
    return out;
}

// Releases every guard at once; `done` hears, after the last answer, how many
// succeeded and why the others did not: a node that found the key gone or
// another owner's (the lease_gone condition) before one that did not answer.
using release_done = asio::any_completion_handler<void(std::size_t, error_code)>;
void release_everywhere(std::vector<guard> guards, release_done done) {
    // Built by constructors only: Boost 1.81's any_completion_handler
    // move-assignment from an empty handler reads through a null pointer.
    // Every node's guard answers on its own strand: the tally is locked.
    struct tally {
        tally(std::vector<guard> g, release_done d) : guards(std::move(g)), done(std::move(d)) {}
        std::vector<guard> guards;
        std::mutex m;
        std::size_t left = 0, ok = 0;
        error_code why;
        release_done done;
    };
    if (!done) {
        // Nobody waits for the answers (a give-back): dropped, each node's
        // guard is released in the background, which that node's drain()
        // waits for; an explicit release would not be.
        guards.clear();
        return;
    }
    auto r = std::make_shared<tally>(std::move(guards), std::move(done));
    for (const auto& g : r->guards)
        if (g.owns_lock()) ++r->left;
    if (r->left == 0) {
        if (r->done) std::move(r->done)(std::size_t{0}, error_code{});
        return;
    }
    for (auto& g : r->guards) {
        if (!g.owns_lock()) continue;
        g.async_release([r](error_code ec) {
            {
                std::lock_guard lk(r->m);
                if (!ec)
                    ++r->ok;
                else if (!r->why || (ec == condition::lease_gone && r->why != condition::lease_gone))
                    r->why = ec;
                if (--r->left != 0) return;
            }
            if (r->done) std::move(r->done)(r->ok, r->why);
        });
    }
}

}  // namespace

redlock_lock_state::redlock_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                                       const std::vector<corolock::backend>& nodes)
    : lock_state(std::move(b), lock_name, random_owner_id()),
      members(members_for(nodes, lock_name)),
      node_guards(nodes.size()),
      node_waits(nodes.size()),
      quorum(nodes.size()) {}

redlock_backend::redlock_backend(asio::any_io_executor ex, std::vector<backend> nodes,
                                 redlock_options opts, std::shared_ptr<observer> events)
    : executor_(ex),
      strand_(asio::make_strand(inner_executor(ex))),
      nodes_(std::move(nodes)),
      opts_(opts),
      observer_(std::move(events)) {
    if (nodes_.empty())
        throw boost::system::system_error(error::invalid_argument, "redlock needs at least one node");
}

std::shared_ptr<lock_state> redlock_backend::make_state(std::string name, const lock_spec& spec) {
    if (spec.kind != lock_spec::kind_t::mutex)
        throw boost::system::system_error(error::invalid_argument,
                                          "redlock offers the mutex only");
    return std::make_shared<redlock_lock_state>(shared_from_this(), std::move(name), nodes_);
}

bool redlock_backend::offers_lock_delay(const lock_spec& spec) const noexcept {
    return std::all_of(nodes_.begin(), nodes_.end(),
                       [&](const backend& n) { return n.impl()->offers_lock_delay(spec); });
}

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
            st->levels.push_back(level);
            st->held.fetch_add(1, std::memory_order_acq_rel);
            return finish(error_code{}, make_guard(st, level, st->quorum.max_token(), st->current));
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

void redlock_backend::stop() noexcept {
    if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
    for (auto& n : nodes_) n.stop();
    // A waiter between rounds would otherwise wait out its timer.
    try {
        asio::post(strand_, [self = shared_from_this()] {
            auto ops = std::exchange(self->ops_, {});
            for (auto& [id, w] : ops)
                if (auto op = w.lock()) op->abandon(error::client_stopped);
        });
    } catch (...) {
        // Allocation failed: each waiter sees the stop at its next round.
    }
}

metrics_snapshot redlock_backend::metrics() const noexcept {
    auto m = metrics_.snapshot();
    for (const auto& n : nodes_) {
        const auto s = n.metrics();
        m.renewals_sent += s.renewals_sent;
        m.renewals_failed += s.renewals_failed;
        m.reconnects += s.reconnects;
        m.commands_in_flight += s.commands_in_flight;
    }
    m.redlock_rounds = rounds_.load(std::memory_order_relaxed);
    m.redlock_rounds_failed = rounds_failed_.load(std::memory_order_relaxed);
    return m;
}

guard redlock_backend::on_granted(const std::shared_ptr<redlock_lock_state>& st,
                                  const lease_terms& terms, std::vector<guard> node_guards) {
    // A rival tenure of the same name in this backend is checked before this
    // grant is handed out. Its node guards already know what a node lost (a
    // node client checks its held locks on reconnect, ahead of this round's
    // try on that connection), but their lost signals reach check() through
    // the executor, which may run this grant's completion first: two holders
    // (docs/redlock.md, "Restarts without persistence").
    std::vector<std::shared_ptr<redlock_lock_state>> rivals;
    for (const auto& [id, w] : holding_)
        if (auto other = w.lock(); other && other != st && other->name == st->name)
            rivals.push_back(std::move(other));
    for (const auto& other : rivals)
        if (const auto* ot = other->live(); ot && !ot->lost()) check(other, ot->epoch);
    std::shared_ptr<tenure> t =
        st->current && st->current.use_count() == 1 ? st->current : std::make_shared<tenure>();
    t->reset(++st->tenures, terms);
    st->current = t;
    st->node_guards = std::move(node_guards);
    const auto level = st->next_level++;
    st->levels.push_back(level);
    st->held.fetch_add(1, std::memory_order_acq_rel);
    holding_[st->watch_id] = st;
    // A node's own lost signal (its renewal refused, its deadline passed)
    // checks the quorum at once, not at the next periodic check. A release
    // does not end these waits: end_tenure() cancels them (check() ignores
    // an old epoch).
    for (std::size_t i = 0; i < st->node_guards.size(); ++i) {
        const guard& g = st->node_guards[i];
        if (!g.owns_lock()) continue;
        auto& sig = st->node_waits[i] = std::make_shared<asio::cancellation_signal>();
        g.async_until_lost(asio::bind_cancellation_slot(
            sig->slot(), [self = shared_from_this(), st, epoch = t->epoch](error_code) {
                asio::post(self->strand_, [self, st, epoch] { self->check(st, epoch); });
            }));
    }
    check(st, t->epoch);  // publishes the deadline and arms the checks
    return make_guard(st, level, st->quorum.max_token(), t);
}

void redlock_backend::check(const std::shared_ptr<redlock_lock_state>& st, std::uint64_t epoch) {
    auto* t = st->live();
    if (!t || t->epoch != epoch || t->lost()) return;
    for (std::size_t i = 0; i < st->node_guards.size(); ++i) {
        const guard& g = st->node_guards[i];
        if (!g.owns_lock()) continue;
        if (g.lost())
            st->quorum.on_renew_refused(i);
        else
            st->quorum.on_confirmed_until(i, g.lease_deadline());
    }
    const auto now = clock::now();
    const auto d = st->quorum.deadline();
    if (now >= d) return lose_tenure(st, "a majority of the nodes can no longer be confirmed");
    t->publish_deadline(d);
    const auto period = t->terms.renew_every.count() > 0 ? t->terms.renew_every / 2
                                                         : t->terms.lease / 4;
    if (!st->check_timer) st->check_timer = std::make_unique<asio::steady_timer>(strand_);
    st->check_timer->expires_at(std::min(d, now + period));
    // A wait this call's expires_at() cancelled is no check of its own: the
    // new wait replaces it (otherwise each cancelled handler would check and
    // re-arm, cancelling the next, for as long as the lock is held).
    st->check_timer->async_wait([self = shared_from_this(), st, epoch](error_code ec) {
        if (ec == asio::error::operation_aborted) return;
        self->check(st, epoch);
    });
}

void redlock_backend::lose_tenure(const std::shared_ptr<redlock_lock_state>& st, const char* why) {
    auto* t = st->live();
    if (!t || t->lost()) return;
    log().warn("redlock {}: lost: {}", st->name, why);
    metrics_.lost(event_observer(), log(), st->name, why);
    t->mark_lost(clock::now());
    st->lost_epoch = t->epoch;
    st->signal_lost();
    end_tenure(st, {}, false);
}

void redlock_backend::end_tenure(const std::shared_ptr<redlock_lock_state>& st,
                                 release_handler done, bool direct) {
    const bool lost = st->current && st->current->lost();
    // A lost tenure with a lock-delay: each node gives its own tenure up as
    // lost before the releases below, which then find nothing to delete, so
    // the nodes' records keep the delay (core/lock_delay.hpp).
    if (lost && st->current->terms.lock_delay.count() > 0)
        for (const guard& g : st->node_guards)
            if (const auto& node = guard_access::state(g); node && g.owns_lock())
                node->backend->abandon_tenure(node, guard_access::held(g),
                                              "the RedLock quorum was lost");
    st->levels.clear();
    st->held.store(0, std::memory_order_release);
    if (st->check_timer) st->check_timer->cancel();
    holding_.erase(st->watch_id);
    auto guards = std::exchange(st->node_guards, std::vector<guard>(st->members.size()));
    // On the node's strand, where the wait registers and completes (the
    // same race as a try's, "Threads" in docs/redlock.md).
    for (std::size_t i = 0; i < st->node_waits.size(); ++i)
        if (auto sig = std::exchange(st->node_waits[i], nullptr))
            asio::post(node_strand(i), [sig] { sig->emit(asio::cancellation_type::terminal); });
    if (!done) {
        release_everywhere(std::move(guards), {});
        return;
    }
    // Released when a majority of the nodes confirmed it (docs/redlock.md,
    // "Releasing"); else the keys left behind expire at their TTL.
    release_everywhere(std::move(guards), [self = shared_from_this(), h = std::move(done), direct,
                                           lost, m = st->quorum.majority(), name = st->name](
                                              std::size_t ok, error_code why) mutable {
        error_code ec;
        if (lost)
            ec = error::lock_lost;
        else if (ok < m)
            ec = why ? why : error_code(error::lock_lost);
        if (!lost && ec == condition::lease_gone)
            self->metrics_.release_found_gone(self->event_observer(), self->log(), name, ec);
        complete_now(std::move(h), direct, self->executor_, ec);
    });
}

void redlock_backend::release(const std::shared_ptr<lock_state>& base, std::uint64_t level,
                              std::shared_ptr<const tenure> t, release_handler handler,
                              bool direct) {
    auto st = std::static_pointer_cast<redlock_lock_state>(base);
    auto it = std::find(st->levels.begin(), st->levels.end(), level);
    auto* live = st->live();
    if (!live || live != t.get() || t->lost() || it == st->levels.end()) {
        asio::post(strand_, [h = std::move(handler), direct, ex = executor_]() mutable {
            complete_now(std::move(h), direct, ex, error_code(error::lock_lost));
        });
        return;
    }
    st->levels.erase(it);
    st->held.fetch_sub(1, std::memory_order_acq_rel);
    if (!st->levels.empty()) {
        asio::post(strand_, [h = std::move(handler), direct, ex = executor_]() mutable {
            complete_now(std::move(h), direct, ex, error_code{});
        });
        return;
    }
    end_tenure(st, std::move(handler), direct);
}

void redlock_backend::release_in_background(const std::shared_ptr<lock_state>& base,
                                            std::uint64_t level) {
    auto st = std::static_pointer_cast<redlock_lock_state>(base);
    auto it = std::find(st->levels.begin(), st->levels.end(), level);
    if (it == st->levels.end() || !st->live()) return;
    st->levels.erase(it);
    st->held.fetch_sub(1, std::memory_order_acq_rel);
    if (st->levels.empty()) end_tenure(st, {}, false);
}

void redlock_backend::on_try_settled() {
    if (--tries_out_ != 0) return;
    auto waiters = std::exchange(settled_waiters_, {});
    for (auto& w : waiters) w();
}

void redlock_backend::drain(clock::duration bound, release_handler handler, bool direct) {
    // First until no node try is out, at most `bound`; then the nodes'.
    struct wait {
        wait(const strand_type& s, release_handler h) : timer(s), handler(std::move(h)) {}
        asio::steady_timer timer;
        release_handler handler;
        bool fired = false;
    };
    const auto start = clock::now();
    auto w = std::make_shared<wait>(strand_, std::move(handler));
    auto go = [self = shared_from_this(), w, bound, start, direct] {
        if (std::exchange(w->fired, true)) return;
        w->timer.cancel();
        const auto left = bound - (clock::now() - start);
        self->drain_nodes(std::max(left, clock::duration::zero()), std::move(w->handler), direct);
    };
    asio::dispatch(strand_, [self = shared_from_this(), w, bound, go] {
        if (self->tries_out_ == 0) return go();
        self->settled_waiters_.push_back(go);
        w->timer.expires_after(bound);
        w->timer.async_wait([go](error_code) { go(); });
    });
}

void redlock_backend::drain_nodes(clock::duration bound, release_handler handler, bool direct) {
    struct join {
        join(std::size_t n, release_handler handler) : left(n), h(std::move(handler)) {}
        std::atomic<std::size_t> left;
        error_code first;
        std::mutex m;
        release_handler h;
    };
    auto j = std::make_shared<join>(nodes_.size(), std::move(handler));
    for (auto& n : nodes_) {
        n.async_drain(bound, [j, direct, ex = executor_](error_code ec) {
            {
                std::lock_guard lk(j->m);
                if (ec && !j->first) j->first = ec;
            }
            if (j->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
            complete_now(std::move(j->h), direct, ex, j->first);
        });
    }
}

namespace {
// What a RedLock's user hears of its nodes: a node's renewal that failed and
// a node's reconnection. The lock events (acquired, lost, release found
// gone) are the RedLock's own, told by the RedLock backend once, not by
// each node.
class node_events final : public observer {
public:
    explicit node_events(std::shared_ptr<observer> to) : to_(std::move(to)) {}
    void on_renewal_failed(std::string_view lock, error_code ec) override {
        to_->on_renewal_failed(lock, ec);
    }
    void on_reconnected() override { to_->on_reconnected(); }

private:
    std::shared_ptr<observer> to_;
};
}  // namespace

std::shared_ptr<lock_backend> connect_redlock(asio::any_io_executor ex,
                                              const std::vector<std::string>& urls,
                                              const backend_config& settings,
                                              redlock_options opts) {
    std::vector<backend> nodes;
    nodes.reserve(urls.size());
    backend_config per_node = settings;
    if (settings.observer) per_node.observer = std::make_shared<node_events>(settings.observer);
    for (const auto& u : urls) nodes.emplace_back(ex, u, per_node);
    return std::make_shared<redlock_backend>(std::move(ex), std::move(nodes), opts,
                                             settings.observer);
}

}  // namespace corolock::detail
