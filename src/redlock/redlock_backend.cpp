#include "redlock/redlock_backend.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
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

// Releases every guard at once; `done` hears the count that succeeded,
// after the last answer.
void release_everywhere(std::vector<guard> guards,
                        asio::any_completion_handler<void(std::size_t)> done) {
    // Built by constructors only: Boost 1.81's any_completion_handler
    // move-assignment from an empty handler reads through a null pointer.
    struct round {
        round(std::vector<guard> g, asio::any_completion_handler<void(std::size_t)> d)
            : guards(std::move(g)), done(std::move(d)) {}
        std::vector<guard> guards;
        std::size_t left = 0;
        asio::any_completion_handler<void(std::size_t)> done;
    };
    auto r = std::make_shared<round>(std::move(guards), std::move(done));
    for (const auto& g : r->guards)
        if (g.owns_lock()) ++r->left;
    if (r->left == 0) {
        if (r->done) std::move(r->done)(std::size_t{0});
        return;
    }
    // Counted on the guards' executors: every node's guard answers on its
    // own; the shared count is only touched under the last answer's
    // ordering, so it is atomic.
    auto left = std::make_shared<std::atomic<std::size_t>>(r->left);
    auto ok = std::make_shared<std::atomic<std::size_t>>(0);
    for (auto& g : r->guards) {
        if (!g.owns_lock()) continue;
        g.async_release([r, left, ok](error_code ec) {
            if (!ec) ok->fetch_add(1, std::memory_order_relaxed);
            if (left->fetch_sub(1, std::memory_order_acq_rel) != 1) return;
            if (r->done) std::move(r->done)(ok->load(std::memory_order_relaxed));
        });
    }
}

}  // namespace

redlock_lock_state::redlock_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                                       const std::vector<corolock::backend>& nodes)
    : lock_state(std::move(b), lock_name, random_owner_id()),
      members(members_for(nodes, lock_name)),
      node_guards(nodes.size()),
      quorum(nodes.size()) {}

redlock_backend::redlock_backend(asio::any_io_executor ex, std::vector<backend> nodes,
                                 redlock_options opts)
    : executor_(ex),
      strand_(asio::make_strand(inner_executor(ex))),
      nodes_(std::move(nodes)),
      opts_(opts) {
    if (nodes_.empty())
        throw boost::system::system_error(error::invalid_argument, "redlock needs at least one node");
}

void redlock_backend::stop() noexcept {
    if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
    for (auto& n : nodes_) n.stop();
}

std::shared_ptr<lock_state> redlock_backend::make_state(std::string name, const lock_spec& spec) {
    if (spec.kind != lock_spec::kind_t::mutex)
        throw boost::system::system_error(error::invalid_argument,
                                          "redlock offers the mutex only");
    return std::make_shared<redlock_lock_state>(shared_from_this(), std::move(name), nodes_);
}

// One acquire: rounds until granted, refused for good (a try), timed out
// or cancelled. Strand only.
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
          signals(st->members.size()),
          guards(st->members.size()),
          timer(be->strand_),
          rng(std::random_device{}()) {
        if (opts.wait) wait_deadline = clock::now() + *opts.wait;
    }

    void start() {
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) {
            slot.assign([w = weak_from_this(), strand = be->strand_](asio::cancellation_type) {
                asio::post(strand, [w] {
                    if (auto op = w.lock()) op->cancel();
                });
            });
        }
        begin_round();
    }

private:
    using clock = std::chrono::steady_clock;

    void begin_round() {
        if (be->stopped()) return finish(error::client_stopped);
        ++round_;
        answered_ = 0;
        for (auto& g : guards) g = guard{};
        st->quorum.begin_round(clock::now(), opts.lease);
        lock_options node = opts;
        node.wait.reset();
        const auto n = st->members.size();
        for (std::size_t i = 0; i < n; ++i) {
            signals[i] = std::make_unique<asio::cancellation_signal>();
            st->members[i].async_try_acquire(
                node, asio::bind_cancellation_slot(
                          signals[i]->slot(),
                          [op = shared_from_this(), i, r = round_](error_code ec, guard g) mutable {
                              asio::post(op->be->strand_, [op, i, r, ec, g = std::move(g)]() mutable {
                                  op->on_answer(r, i, ec, std::move(g));
                              });
                          }));
        }
        timer.expires_after(be->opts_.node_timeout);
        timer.async_wait([op = shared_from_this(), r = round_](error_code ec) {
            if (!ec && r == op->round_) op->time_out_nodes();
        });
    }

    // The per-node timeout: every node still pending is failed, and its try
    // cancelled (a grant that arrives anyway is given back by the core).
    void time_out_nodes() {
        for (std::size_t i = 0; i < signals.size(); ++i)
            if (st->quorum.state(i) == redlock_quorum::node_state::pending) {
                st->quorum.on_failed(i);
                signals[i]->emit(asio::cancellation_type::terminal);
            }
        decide();
    }

    void on_answer(std::uint64_t r, std::size_t i, error_code ec, guard g) {
        if (r != round_) return;  // a guard of an old round is released as it drops
        ++answered_;
        if (!ec && st->quorum.state(i) == redlock_quorum::node_state::pending) {
            st->quorum.on_granted(i, g.token());
            guards[i] = std::move(g);
        } else if (ec == error::lock_held) {
            st->quorum.on_refused(i);
        } else {
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
            lease_terms terms{opts.lease, opts.watchdog ? opts.renew_interval : clock::duration{}};
            auto g = be->on_granted(st, terms, std::move(guards));
            return finish(error_code{}, std::move(g));
        }
        if (o != redlock_quorum::outcome::failed) return;
        // Out of reach: give back what this round took, everywhere at once.
        decided_round_ = round_;
        timer.cancel();
        for (std::size_t i = 0; i < signals.size(); ++i)
            if (st->quorum.state(i) == redlock_quorum::node_state::pending)
                signals[i]->emit(asio::cancellation_type::terminal);
        release_everywhere(std::exchange(guards, std::vector<guard>(signals.size())), {});
        maybe_next_round();
    }

    // After a failed round, once every node answered (so that no try of
    // the handle is still on its way): the next round after a random delay,
    // or the answer.
    void maybe_next_round() {
        if (answered_ < signals.size() || done_) return;
        if (once) return finish(error::lock_held);
        const auto now = clock::now();
        std::uniform_int_distribution<clock::rep> pick(be->opts_.retry_min.count(),
                                                       be->opts_.retry_max.count());
        auto at = now + clock::duration(pick(rng));
        if (wait_deadline) {
            if (now >= *wait_deadline) return finish(error::wait_timeout);
            at = std::min(at, *wait_deadline);
        }
        timer.expires_at(at);
        timer.async_wait([op = shared_from_this(), r = round_](error_code ec) {
            if (!ec && r == op->round_ && !op->done_) op->begin_round();
        });
    }

    void cancel() {
        if (done_) return;
        timer.cancel();
        for (std::size_t i = 0; i < signals.size(); ++i)
            if (st->quorum.state(i) == redlock_quorum::node_state::pending)
                signals[i]->emit(asio::cancellation_type::terminal);
        release_everywhere(std::exchange(guards, std::vector<guard>(signals.size())), {});
        ++round_;  // answers still to come are of no round
        finish(asio::error::operation_aborted);
    }

    void finish(error_code ec, guard g = {}) {
        if (done_) return;
        done_ = true;
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        complete_now(std::move(handler), direct_, be->executor_, ec, std::move(g));
    }

    std::shared_ptr<redlock_backend> be;
    std::shared_ptr<redlock_lock_state> st;
    lock_options opts;
    bool once;
    acquire_handler handler;
    bool direct_;
    // One per node, made afresh each round (a signal cannot be reset).
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
    std::vector<guard> guards;
    asio::steady_timer timer;
    std::mt19937_64 rng;
    std::optional<clock::time_point> wait_deadline;
    std::uint64_t round_ = 0, decided_round_ = 0;
    std::size_t answered_ = 0;
    bool done_ = false;
};

void redlock_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                              const acquire_request&, bool try_once, acquire_handler handler,
                              bool direct) {
    auto st = std::static_pointer_cast<redlock_lock_state>(base);
    asio::post(strand_, [self = shared_from_this(), st, opts, try_once,
                         h = std::move(handler), direct]() mutable {
        if (auto* t = st->live(); t && !t->lost()) {
            // A re-entry joins the live tenure: no round (first slice).
            const auto level = st->next_level++;
            st->levels.push_back(level);
            st->held.fetch_add(1, std::memory_order_acq_rel);
            complete_now(std::move(h), direct, self->executor_, error_code{},
                         make_guard(st, level, st->quorum.max_token(), st->current));
            return;
        }
        std::make_shared<round_op>(self, st, opts, try_once, std::move(h), direct)->start();
    });
}

guard redlock_backend::on_granted(const std::shared_ptr<redlock_lock_state>& st,
                                  const lease_terms& terms, std::vector<guard> node_guards) {
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
    // ends these waits (with `released`), and check() ignores an old epoch.
    for (const guard& g : st->node_guards) {
        if (!g.owns_lock()) continue;
        g.async_until_lost([self = shared_from_this(), st, epoch = t->epoch](error_code) {
            asio::post(self->strand_, [self, st, epoch] { self->check(st, epoch); });
        });
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
    st->check_timer->async_wait([self = shared_from_this(), st, epoch](error_code) {
        self->check(st, epoch);
    });
}

void redlock_backend::lose_tenure(const std::shared_ptr<redlock_lock_state>& st, const char* why) {
    auto* t = st->live();
    if (!t || t->lost()) return;
    log().warn("redlock {}: lost: {}", st->name, why);
    t->mark_lost(clock::now());
    st->lost_epoch = t->epoch;
    st->signal_lost();
    end_tenure(st, {}, false);
}

void redlock_backend::end_tenure(const std::shared_ptr<redlock_lock_state>& st,
                                 release_handler done, bool direct) {
    const bool lost = st->current && st->current->lost();
    st->levels.clear();
    st->held.store(0, std::memory_order_release);
    if (st->check_timer) st->check_timer->cancel();
    holding_.erase(st->watch_id);
    auto guards = std::exchange(st->node_guards, std::vector<guard>(st->members.size()));
    if (!done) {
        release_everywhere(std::move(guards), {});
        return;
    }
    release_everywhere(std::move(guards), [self = shared_from_this(), h = std::move(done), direct,
                                           lost](std::size_t) mutable {
        complete_now(std::move(h), direct, self->executor_,
                     lost ? error_code(error::lock_lost) : error_code{});
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

void redlock_backend::drain(clock::duration bound, release_handler handler, bool direct) {
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

std::shared_ptr<lock_backend> connect_redlock(asio::any_io_executor ex,
                                              const std::vector<std::string>& urls,
                                              std::string_view holder_label,
                                              redlock_options opts) {
    std::vector<backend> nodes;
    nodes.reserve(urls.size());
    backend_config cfg;
    cfg.holder_label = std::string(holder_label);
    for (const auto& u : urls) nodes.emplace_back(ex, u, cfg);
    return std::make_shared<redlock_backend>(std::move(ex), std::move(nodes), opts);
}

}  // namespace corolock::detail
