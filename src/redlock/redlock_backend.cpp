#include "redlock/redlock_backend.hpp"

#include "redlock/node_watch.hpp"

#include "core/guard_access.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

namespace corolock::detail {

namespace asio = boost::asio;

namespace {

std::vector<mutex> members_for(const std::vector<corolock::backend>& nodes, const std::string& name) {
    std::vector<mutex> out;
    out.reserve(nodes.size());
    for (const auto& n : nodes) out.emplace_back(n, name);
    return out;
}


}  // namespace

void release_everywhere(std::vector<guard> guards, redlock_release_done done) {
    // Built by constructors only: Boost 1.81's any_completion_handler
    // move-assignment from an empty handler reads through a null pointer.
    // Every node's guard answers on its own strand: the tally is locked.
    struct tally {
        tally(std::vector<guard> g, redlock_release_done d) : guards(std::move(g)), done(std::move(d)) {}
        std::vector<guard> guards;
        std::mutex m;
        std::size_t left = 0, ok = 0;
        error_code why;
        redlock_release_done done;
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
                       [&](const backend& n) { return backend_access::impl(n)->offers_lock_delay(spec); });
}

void redlock_backend::stop() noexcept {
    if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
    for (auto& n : nodes_) n.stop();
    // A waiter between rounds would otherwise wait out its timer.
    try {
        asio::post(strand_, [self = shared_from_this()] { self->abandon_rounds(); });
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
    const auto level = st->next_level++;
    auto joined = begin_or_join(*st, level, terms, reentry_terms::none);
    auto t = std::move(joined.t);
    if (!joined.began) {
        // A second round of the handle granted while its first one's tenure
        // lives: the level joins that tenure, whose node guards keep the
        // nodes' locks; this round's node levels are given back.
        release_everywhere(std::move(node_guards), {});
        return make_guard(st, level, st->quorum.max_token(), t);
    }
    st->node_guards = std::move(node_guards);
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
    if (!lose_live(*st, metrics_, log(), why)) return;
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
    // No server to ask: a level not held in its live tenure is lost.
    const auto step = take_level(*st, level, *t);
    if (step == release_step::last_level) return end_tenure(st, std::move(handler), direct);
    const error_code ec =
        step == release_step::more_levels ? error_code{} : error_code(error::lock_lost);
    asio::post(strand_, [h = std::move(handler), direct, ex = executor_, ec]() mutable {
        complete_now(std::move(h), direct, ex, ec);
    });
}

void redlock_backend::release_in_background(const std::shared_ptr<lock_state>& base,
                                            std::uint64_t level) {
    auto st = std::static_pointer_cast<redlock_lock_state>(base);
    if (st->current && take_level(*st, level, *st->current) == release_step::last_level)
        end_tenure(st, {}, false);
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
