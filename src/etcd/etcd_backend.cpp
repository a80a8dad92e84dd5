#include "etcd/etcd_backend.hpp"

#include "core/backoff.hpp"
#include "core/coroutine_backend.hpp"
#include "core/holder_record.hpp"
#include "core/logging.hpp"
#include "core/watchdog_schedule.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/system/system_error.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace corolock::detail::etcd {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// Runs one transport operation from a coroutine: (error_code, Result).
template <class Result, class F>
asio::awaitable<std::tuple<error_code, Result>> call(F f) {
    return asio::async_initiate<decltype(nothrow), void(error_code, Result)>(
        [f = std::move(f)](auto h) mutable { f(handler<Result>(std::move(h))); }, nothrow);
}

// A txn that deletes `key` only while its create revision is
// `create_revision`: a tenure's key and no later one.
txn_request guarded_delete(const std::string& key, std::int64_t create_revision) {
    txn_request t;
    t.compares.push_back({key, compare::target::create_revision, compare::op::equal,
                          create_revision});
    t.success.push_back(delete_request{key, {}});
    return t;
}

}  // namespace

// ---- state ----

etcd_lock_state::etcd_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                                 const std::string& key_prefix)
    : lock_state(std::move(b), std::move(lock_name), random_owner_id()),
      prefix(lock_prefix(key_prefix, name)),
      key(prefix + owner) {
    holder.st = this;
}

void etcd_lock_state::holder_watch::on_deleted(const std::string& deleted, std::int64_t revision) {
    // A delete of an earlier tenure's key (the same name) is older than the
    // live key's creation.
    if (deleted != st->key || revision <= st->create_revision || !st->live()) return;
    auto self = std::static_pointer_cast<etcd_lock_state>(st->shared_from_this());
    static_cast<etcd_backend&>(*st->backend).lose_tenure(self, "its key was deleted behind the holder");
}

void etcd_lock_state::holder_watch::on_watch_reset() {
    if (!st->live()) return;
    auto self = std::static_pointer_cast<etcd_lock_state>(st->shared_from_this());
    static_cast<etcd_backend&>(*st->backend).check_key(self);
}

// ---- the shared watch of a lock's prefix ----

struct etcd_backend::prefix_watch {
    std::shared_ptr<watch_stream> stream;
    std::vector<watcher*> watchers;
    bool ready = false;
    std::int64_t revision = 0;  // the last revision seen
    int generation = 0;         // restarts
    // Between restarts of a broken watch; reset once one is created.
    backoff restart{std::chrono::milliseconds(200), std::chrono::seconds(5)};
};

void etcd_backend::watch_prefix(const std::string& prefix, watcher* w) {
    auto& pw = watches_[prefix];
    if (!pw) pw = std::make_shared<prefix_watch>();
    pw->watchers.push_back(w);
    if (!pw->stream) start_watch(prefix);
}

void etcd_backend::unwatch_prefix(const std::string& prefix, watcher* w) noexcept {
    auto it = watches_.find(prefix);
    if (it == watches_.end()) return;
    auto& v = it->second->watchers;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());
    if (v.empty()) {
        if (it->second->stream) it->second->stream->cancel();
        watches_.erase(it);
    }
}

bool etcd_backend::watch_ready(const std::string& prefix) const {
    auto it = watches_.find(prefix);
    return it != watches_.end() && it->second->ready;
}

std::int64_t etcd_backend::watch_seen(const std::string& prefix) const {
    auto it = watches_.find(prefix);
    return it == watches_.end() ? 0 : it->second->revision;
}

void etcd_backend::start_watch(const std::string& prefix) {
    auto pw = watches_[prefix];
    const int gen = ++pw->generation;
    watch_request req;
    req.key = prefix;
    req.range_end = prefix_end(prefix);
    req.start_revision = pw->revision == 0 ? 0 : pw->revision + 1;
    std::weak_ptr<etcd_backend> weak = shared_from_this();
    std::weak_ptr<prefix_watch> weak_pw = pw;
    pw->stream = gateway_->watch(std::move(req), [weak, weak_pw, prefix, gen](error_code ec,
                                                                              watch_update u) {
        auto self = weak.lock();
        if (!self) return;
        asio::dispatch(self->strand_, [self, weak_pw, prefix, gen, ec, u = std::move(u)] {
            auto pw = weak_pw.lock();
            if (!pw || pw->generation != gen || self->stopped()) return;
            if (ec) {
                // Broken (or cancelled by its last watcher leaving): tell the
                // watchers to look again, and start over while anyone watches.
                pw->ready = false;
                pw->stream.reset();
                auto watchers = pw->watchers;
                for (auto* w : watchers) w->on_watch_reset();
                if (!pw->watchers.empty() && self->watches_.count(prefix) &&
                    ec != asio::error::operation_aborted) {
                    pw->revision = 0;  // from now: the watchers look again anyway
                    auto timer = std::make_shared<asio::steady_timer>(self->strand_);
                    timer->expires_after(pw->restart.next());
                    timer->async_wait([self, prefix, timer](error_code) {
                        if (!self->stopped() && self->watches_.count(prefix) &&
                            !self->watches_[prefix]->stream)
                            self->start_watch(prefix);
                    });
                }
                return;
            }
            pw->revision = std::max(pw->revision, u.header.revision);
            if (u.created) {
                pw->ready = true;
                pw->restart.reset();
                auto watchers = pw->watchers;
                for (auto* w : watchers) w->on_watch_reset();
            }
            for (const auto& e : u.events) {
                if (e.type != watch_event::kind::del) continue;
                auto watchers = pw->watchers;  // a watcher may leave while told
                for (auto* w : watchers)
                    if (std::find(pw->watchers.begin(), pw->watchers.end(), w) !=
                        pw->watchers.end())
                        w->on_deleted(e.kv.key, e.kv.mod_revision);
            }
        });
    });
}

// ---- the backend ----

etcd_backend::etcd_backend(asio::any_io_executor ex, backend_options opts, bool tls,
                           const backend_config& settings)
    : executor_(ex),
      strand_(asio::make_strand(inner_executor(ex))),
      opts_(std::move(opts)),
      tls_(tls),
      holder_argument_(holder_argument(opts_.holder_label)),
      logger_(logger_or_default(settings.logger)),
      observer_(settings.observer),
      work_(std::make_shared<background_work>(strand_, ex)) {}

etcd_backend::~etcd_backend() {
    try {
        if (gateway_) gateway_->stop();
    } catch (...) {
    }
}

void etcd_backend::start() {
    gateway_ = gateway::create(asio::any_io_executor(strand_), opts_.gateway);
}

void etcd_backend::stop() noexcept {
    if (stopped_.exchange(true)) return;
    try {
        if (gateway_) gateway_->stop();
        asio::post(strand_, [self = shared_from_this()] {
            // Waiters look again and find the backend stopped.
            auto watches = self->watches_;
            for (auto& [prefix, pw] : watches) {
                if (pw->stream) pw->stream->cancel();
                auto watchers = pw->watchers;
                for (auto* w : watchers) w->on_watch_reset();
            }
            // Holders' until_lost() waits end (with client_stopped), and
            // their renewals stop; their leases expire on the server.
            auto holding = std::move(self->holding_);
            for (auto& [id, weak] : holding) {
                if (auto st = weak.lock()) {
                    if (st->deadline_timer) st->deadline_timer->cancel();
                    st->signal_lost();
                }
            }
            // The leases' keep-alives stop; they expire on the server.
            for (auto& [id, timer] : self->lease_timers_) timer->cancel();
            auto waiters = std::move(self->lease_waiters_);
            for (auto& [d, hs] : waiters)
                for (auto& h : hs) std::move(h)(error_code(error::client_stopped), 0);
            self->work_->stop();
        });
    } catch (...) {
    }
}

metrics_snapshot etcd_backend::metrics() const noexcept { return metrics_.snapshot(); }

std::shared_ptr<lock_state> etcd_backend::make_state(std::string name, const lock_spec& spec) {
    if (spec.kind != lock_spec::kind_t::mutex)
        throw boost::system::system_error(
            error::invalid_argument,
            "the etcd backend offers corolock::mutex only (docs/backends.md)");
    return std::make_shared<etcd_lock_state>(shared_from_this(), std::move(name), opts_.prefix);
}

std::string etcd_backend::holder_value() const {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return holder_record(std::chrono::duration_cast<std::chrono::microseconds>(now).count(),
                         holder_argument_);
}

void etcd_backend::delete_in_background(const std::string& key, std::int64_t create_revision,
                                        const background_work::job& parent) {
    if (create_revision == 0 || stopped()) return;
    auto job = work_->begin_with(parent);
    gateway_->txn(guarded_delete(key, create_revision),
                  [self = shared_from_this(), job](error_code, txn_result) {
                      asio::dispatch(self->strand_, [self, job]() mutable { self->work_->end(job); });
                  });
}

void etcd_backend::revoke_in_background(std::int64_t lease_id) {
    if (lease_id == 0 || stopped()) return;
    auto job = work_->begin();
    gateway_->lease_revoke(lease_id, [self = shared_from_this(), job](error_code,
                                                                      lease_revoke_result) {
        asio::dispatch(self->strand_, [self, job]() mutable { self->work_->end(job); });
    });
}

// ---- the lease pool's I/O ----

void etcd_backend::obtain_lease(clock::duration duration, handler<std::int64_t> h) {
    for (int tries = 0; tries < 2; ++tries) {
        std::int64_t id = 0;
        switch (leases_.reserve(duration, clock::now(), id)) {
        case lease_pool::reserved::stale:
            lose_lease(id, "the lease deadline passed without a confirmed keep-alive");
            continue;  // the next try grants a fresh one
        case lease_pool::reserved::ready:
            asio::post(strand_, [h = std::move(h), id]() mutable { std::move(h)(error_code(), id); });
            return;
        case lease_pool::reserved::wait:
            lease_waiters_[duration].push_back(std::move(h));
            return;
        case lease_pool::reserved::grant:
            lease_waiters_[duration].push_back(std::move(h));
            grant_lease(duration);
            return;
        }
    }
    asio::post(strand_, [h = std::move(h)]() mutable {
        std::move(h)(error_code(error::server_error), 0);
    });
}

void etcd_backend::grant_lease(clock::duration duration) {
    const auto sent = clock::now();
    gateway_->lease_grant(lease_pool::ttl_seconds(duration), [this, duration, sent,
                                                              self = shared_from_this()](
                                                                 error_code ec,
                                                                 lease_grant_result g) {
        asio::dispatch(strand_, [this, duration, sent, ec, g, self] {
            auto waiters = std::move(lease_waiters_[duration]);
            lease_waiters_.erase(duration);
            if (ec || stopped()) {
                leases_.on_grant_failed(duration);
                const error_code why = ec ? ec : error_code(error::client_stopped);
                for (auto& h : waiters) std::move(h)(why, 0);
                return;
            }
            leases_.on_granted(duration, g.id, g.ttl, sent);
            arm_lease(g.id);
            for (auto& h : waiters) std::move(h)(error_code(), g.id);
        });
    });
}

// Bookkeeping only (an acquire's destructor calls it): the lease's timer
// wakes at its next keep-alive anyway, and from then on counts the idle
// grace too.
void etcd_backend::put_back_lease(std::int64_t lease_id) noexcept {
    if (lease_id != 0) leases_.release(lease_id, clock::now());
}

clock::time_point etcd_backend::lease_deadline(std::int64_t lease_id) const noexcept {
    const auto* l = leases_.find(lease_id);
    return l ? l->deadline : clock::time_point::min();
}

void etcd_backend::arm_lease(std::int64_t lease_id) {
    auto& timer = lease_timers_[lease_id];
    if (!timer) timer = std::make_unique<asio::steady_timer>(strand_);
    timer->expires_at(leases_.next_wake(lease_id));
    timer->async_wait([this, lease_id, self = shared_from_this()](error_code ec) {
        if (ec != asio::error::operation_aborted) on_lease_due(lease_id);
    });
}

void etcd_backend::on_lease_due(std::int64_t lease_id) {
    if (stopped() || !leases_.find(lease_id)) return;
    switch (leases_.due(lease_id, clock::now())) {
    case lease_pool::action::lose:
        lose_lease(lease_id, "the lease deadline passed without a confirmed keep-alive");
        return;
    case lease_pool::action::revoke:
        // Idle for its grace: nobody's key is on it.
        leases_.remove(lease_id);
        lease_timers_.erase(lease_id);
        revoke_in_background(lease_id);
        return;
    case lease_pool::action::renew:
        send_keepalive(lease_id);
        break;
    case lease_pool::action::none:
        break;
    }
    arm_lease(lease_id);
}

void etcd_backend::send_keepalive(std::int64_t lease_id) {
    const auto sent = clock::now();
    metrics_recorder::add(metrics_.renewals_sent);
    gateway_->lease_keepalive(lease_id, [this, lease_id, sent, self = shared_from_this()](
                                            error_code ec, lease_keepalive_result r) {
        asio::dispatch(strand_, [this, lease_id, sent, ec, r, self] {
            const auto* l = leases_.find(lease_id);
            if (stopped() || !l) return;
            const auto failed = [&](error_code why) {
                for (auto h : l->holders)
                    if (auto it = holding_.find(h); it != holding_.end())
                        if (auto st = it->second.lock())
                            metrics_.renewal_failed(event_observer(), log(), st->name, why);
            };
            if (ec) {
                failed(ec);
                log().info("etcd lease {:x}: keep-alive failed: {}", lease_id, ec.message());
                leases_.on_keepalive_failed(lease_id, clock::now());
                arm_lease(lease_id);
                return;
            }
            if (!leases_.on_keepalive(lease_id, sent, r.ttl, clock::now())) {
                failed(error::expired);
                lose_lease(lease_id, r.ttl <= 0 ? "etcd reports the lease gone"
                                                : "the keep-alive came back after the deadline");
                return;
            }
            publish_lease(lease_id);
            arm_lease(lease_id);
        });
    });
}

void etcd_backend::publish_lease(std::int64_t lease_id) {
    const auto* l = leases_.find(lease_id);
    if (!l) return;
    for (auto h : l->holders) {
        auto it = holding_.find(h);
        auto st = it == holding_.end() ? nullptr : it->second.lock();
        auto* t = st ? st->live() : nullptr;
        if (t && !t->lost() && t->terms.renew_every.count() > 0)
            t->publish_deadline(std::max(t->deadline(), l->deadline));
    }
}

void etcd_backend::lose_lease(std::int64_t lease_id, const char* why) {
    auto l = leases_.remove(lease_id);
    lease_timers_.erase(lease_id);
    if (!l) return;
    for (auto h : l->holders) {
        auto it = holding_.find(h);
        if (it == holding_.end()) continue;
        if (auto st = it->second.lock()) lose_tenure(st, why, false);
    }
    revoke_in_background(lease_id);
}

void etcd_backend::drain(clock::duration bound, release_handler handler, bool direct) {
    drain_background_work(shared_from_this(), bound, std::move(handler), direct);
}

std::shared_ptr<tenure> etcd_backend::on_granted(const std::shared_ptr<etcd_lock_state>& st,
                                                 std::uint64_t level, const lease_terms& terms,
                                                 clock::time_point deadline) {
    auto [t, began, start_renewals] =
        begin_or_join(*st, level, terms, reentry_terms::renewal_only, deadline);
    if (began) {
        holding_[st->watch_id] = st;
        leases_.add_holder(st->lease_id, st->watch_id);
        watch_prefix(st->prefix, &st->holder);  // a deleted key is a lost tenure
        // With the watchdog the deadline is the lease's, watched by the
        // lease's timer; without, the one it was granted with.
        if (!start_renewals) arm_deadline(st, t->epoch);
    }
    // The lease's keep-alives move the deadline of a tenure with the
    // watchdog, from a re-entry that asked for it on too.
    if (start_renewals) t->publish_deadline(std::max(t->deadline(), lease_deadline(st->lease_id)));
    return t;
}

void etcd_backend::end_tenure(const std::shared_ptr<etcd_lock_state>& st) noexcept {
    st->levels.clear();
    st->held.store(0, std::memory_order_release);
    if (st->deadline_timer) st->deadline_timer->cancel();
    unwatch_prefix(st->prefix, &st->holder);
    holding_.erase(st->watch_id);
    const auto lease = std::exchange(st->lease_id, 0);
    leases_.remove_holder(lease, st->watch_id);
    put_back_lease(lease);
}

void etcd_backend::check_key(const std::shared_ptr<etcd_lock_state>& st) {
    const auto epoch = st->live()->epoch;
    range_request req;
    req.key = st->key;
    gateway_->range(std::move(req), [this, st, epoch, self = shared_from_this()](
                                        error_code ec, range_result r) {
        asio::dispatch(strand_, [this, st, epoch, ec, r = std::move(r), self] {
            auto* t = st->live();
            if (ec || !t || t->epoch != epoch) return;  // a failure: the keep-alive decides
            if (r.kvs.empty() || r.kvs.front().create_revision != st->create_revision)
                lose_tenure(st, "its key was gone when the watch was made again");
        });
    });
}

void etcd_backend::lose_tenure(const std::shared_ptr<etcd_lock_state>& st, const char* why,
                               bool delete_key) {
    if (!lose_live(*st, metrics_, log(), why)) return;
    end_tenure(st);
    st->signal_lost();
    if (delete_key) delete_in_background(st->key, st->create_revision);
}

void etcd_backend::arm_deadline(std::shared_ptr<etcd_lock_state> st, std::uint64_t epoch) {
    arm_tenure_deadline(std::move(st), epoch, strand_, [self = shared_from_this()](const auto& s) {
        self->lose_tenure(s, "the lease deadline passed without a confirmed keep-alive");
    });
}

// ---- acquire ----

namespace {

// Abandoned while running, its cleanup job lasts until run() ends, so a
// drain waits for the give-back of whatever it still gets (a lease, a key).
struct acquire_op : waking_acquire<etcd_backend>,
                    std::enable_shared_from_this<acquire_op>,
                    etcd_backend::watcher {
    acquire_op(std::shared_ptr<etcd_backend> b, std::shared_ptr<etcd_lock_state> s,
               lock_options o, bool once, lock_backend::acquire_handler h, bool d)
        : waking_acquire(std::move(b), o, once, std::move(h), d), st(std::move(s)) {}

    std::shared_ptr<etcd_lock_state> st;
    bool watching = false;
    std::string predecessor;
    bool looking = false;  // the look for the predecessor is on its way

    // The pool's lease this acquire uses, and its key on it (0: none) while
    // it waits or until its grant.
    std::int64_t lease_id = 0;
    std::int64_t my_revision = 0;
    std::string value;  // the key's value as last written

    ~acquire_op() {
        // Normally out already; an operation dropped unfinished (its
        // execution context destroyed) must not stay registered.
        if (watching) backend->unwatch_prefix(st->prefix, this);
        backend->put_back_lease(lease_id);
    }

    void on_deleted(const std::string& key, std::int64_t) override {
        // While the look for the predecessor is on its way, its answer
        // (which may still name the key deleted now: the watch's event can
        // overtake the range's reply) is not known: any deletion looks
        // again.
        if (key == predecessor || looking || (waiting_for_own_key && key == st->key)) poke();
    }
    void on_watch_reset() override { poke(); }
    void stop_watching() {
        if (watching) backend->unwatch_prefix(st->prefix, this);
        watching = false;
    }

    // Deletes this acquire's key (if it made one) and ends its use of the
    // lease.
    void give_back() {
        stop_watching();
        backend->delete_in_background(st->key, std::exchange(my_revision, 0), cleanup);
        backend->put_back_lease(std::exchange(lease_id, 0));
    }

    // The same, waiting for etcd's answer (bounded by the request timeout),
    // so that a caller told lock_held or wait_timeout can exit at once
    // without leaving its key queued until its lease ends.
    asio::awaitable<void> give_back_now() {
        stop_watching();
        backend->put_back_lease(std::exchange(lease_id, 0));
        const auto rev = std::exchange(my_revision, 0);
        if (rev == 0 || backend->stopped()) co_return;
        auto& wire = backend->wire();
        co_await call<txn_result>(
            [&](auto h) { wire.txn(guarded_delete(st->key, rev), std::move(h)); });
    }

    // After a txn etcd refused: true when the lease it used is gone (etcd
    // says so to a keep-alive), which loses it in the pool; a fresh round
    // then gets another.
    asio::awaitable<bool> lease_gone() {
        const auto id = lease_id;
        auto& wire = backend->wire();
        auto [ec, k] = co_await call<lease_keepalive_result>(
            [&](auto h) { wire.lease_keepalive(id, std::move(h)); });
        if (ec || k.ttl > 0) co_return false;
        backend->lose_lease(id, "etcd reports the lease gone");
        co_return true;
    }

    asio::awaitable<void> run() {
        try {
            co_await run_inner();
        } catch (...) {
            give_back();
            complete(error::client_stopped, {});
        }
        end_run();
    }

    // A re-entry: a put on the handle's key, if it is still its own, mints
    // the level's token. True when it answered the caller (granted, or an
    // error); false when the tenure was lost (told now) and a fresh acquire
    // must follow.
    asio::awaitable<bool> reenter(std::uint64_t level, const lease_terms& terms) {
        auto& wire = backend->wire();
        {
            txn_request req;
            req.compares.push_back({st->key, compare::target::create_revision,
                                    compare::op::equal, st->create_revision});
            req.success.push_back(put_request{st->key, st->value, st->lease_id});
            const auto epoch = st->live()->epoch;
            auto [ec, r] = co_await call<txn_result>(
                [&](auto h) { wire.txn(std::move(req), std::move(h)); });
            auto* t = st->live();
            if (ec) {
                complete(ec, {});
                co_return true;
            }
            if (!t || t->epoch != epoch || t->lost() || !r.succeeded ||
                clock::now() >= t->deadline()) {
                if (t && t->epoch == epoch)
                    backend->lose_tenure(st, "its key was gone when a re-entry checked it");
                co_return false;  // a fresh acquire follows
            }
            if (abandoned) co_return true;  // the level was never handed out
            this->count_grant(st->name, false);
            auto tt = backend->on_granted(st, level, terms, t->deadline());
            complete({}, make_guard(st, level, static_cast<std::uint64_t>(r.header.revision),
                                    std::move(tt)));
            co_return true;
        }
    }

    // Set while this acquire waits for the handle's own key to go (below).
    bool waiting_for_own_key = false;

    asio::awaitable<void> run_inner() {
        auto& wire = backend->wire();
        const auto level = st->next_level++;
        const lease_terms terms{opts.lease,
                                opts.watchdog ? opts.renew_interval : clock::duration::zero()};

        if (st->live() && co_await reenter(level, terms)) co_return;

        bool contended = false;
        for (int round = 0; round < 1000; ++round) {
            if (abandoned || backend->stopped()) break;
            // The pool's lease for this duration, and a key under the lock on it.
            {
                auto [ec, id] = co_await call<std::int64_t>(
                    [&](auto h) { backend->obtain_lease(opts.lease, std::move(h)); });
                if (ec) co_return complete(ec, {});
                lease_id = id;
            }
            if (abandoned) break;
            txn_request req;
            req.compares.push_back(
                {st->key, compare::target::create_revision, compare::op::equal, 0});
            value = backend->holder_value();
            req.success.push_back(put_request{st->key, value, lease_id});
            range_request first;
            first.key = st->prefix;
            first.range_end = prefix_end(st->prefix);
            first.sort_by_create_revision = true;
            first.limit = 1;
            req.success.push_back(first);
            {
                range_request mine_req;
                mine_req.key = st->key;
                req.failure.push_back(std::move(mine_req));
            }
            req.failure.push_back(first);
            auto [ec, r] =
                co_await call<txn_result>([&](auto h) { wire.txn(std::move(req), std::move(h)); });
            // etcd refuses a put on a lease it does not know as NOT_FOUND
            // (the gateway's expired): the lease was revoked from outside.
            if ((ec == error::expired || ec == error::server_error) && !abandoned &&
                co_await lease_gone()) {
                give_back();
                continue;
            }
            if (ec) {
                give_back();
                co_return complete(ec, {});
            }
            if (!r.succeeded) {
                // The handle's key exists: another acquire of this handle
                // has it (waiting, or granted since), or a lost tenure's key
                // whose lease is not revoked yet. A try answers now; a wait
                // is woken by the key's deletion (the prefix watch), looks
                // again at least every third of a lease (a grant to the
                // handle meanwhile is joined as a re-entry), and ends at
                // its deadline.
                give_back();
                if (try_once || (opts.wait && opts.wait->count() == 0))
                    co_return complete(error::lock_held, {});
                contended = true;
                watching = waiting_for_own_key = true;
                backend->watch_prefix(st->prefix, this);
                // The key's deletion may have been told before this waiter
                // was registered: look again at once when the watch has
                // told anything after the txn's revision (a watch not ready
                // yet pokes as it is created).
                if (backend->watch_ready(st->prefix) &&
                    backend->watch_seen(st->prefix) > r.header.revision)
                    poke();
                auto until = clock::now() + std::max<clock::duration>(
                                                opts.lease / 3, std::chrono::milliseconds(10));
                if (auto d = wait_deadline()) until = std::min(until, *d);
                const bool go_on = co_await wait_until(until);
                stop_watching();
                waiting_for_own_key = false;
                if (!go_on) break;
                if (auto d = wait_deadline(); d && clock::now() >= *d)
                    co_return complete(error::wait_timeout, {});
                if (st->live() && co_await reenter(level, terms)) co_return;
                continue;
            }
            my_revision = r.header.revision;
            const auto* owner = r.responses.size() >= 2
                                    ? std::get_if<range_result>(&r.responses[1])
                                    : nullptr;
            const bool mine = owner && !owner->kvs.empty() &&
                              owner->kvs.front().create_revision == my_revision;
            if (mine) {
                co_return grant(level, terms, static_cast<std::uint64_t>(my_revision), contended);
            }
            if (try_once || (opts.wait && opts.wait->count() == 0)) {
                co_await give_back_now();
                co_return complete(error::lock_held, {});
            }
            contended = true;
            // Wait behind the predecessor, the last key created before ours.
            watching = true;
            backend->watch_prefix(st->prefix, this);
            const auto outcome = co_await wait_for_turn();
            if (outcome == turn::granted) {
                // The confirming put: the key survived the wait, and the
                // put's revision is the token. Its value's since becomes
                // the grant's time: the tenure begins here, not when the
                // key began waiting.
                txn_request confirm;
                confirm.compares.push_back({st->key, compare::target::create_revision,
                                            compare::op::equal, my_revision});
                value = backend->holder_value();
                confirm.success.push_back(put_request{st->key, value, lease_id});
                auto [cec, cr] = co_await call<txn_result>(
                    [&](auto h) { wire.txn(std::move(confirm), std::move(h)); });
                stop_watching();
                if (cec) {
                    give_back();
                    co_return complete(cec, {});
                }
                if (cr.succeeded) {
                    co_return grant(level, terms, static_cast<std::uint64_t>(cr.header.revision),
                                    contended);
                }
                // The key expired while waiting: start again.
                give_back();
                continue;
            }
            if (outcome == turn::timed_out) {
                co_await give_back_now();
                co_return complete(error::wait_timeout, {});
            }
            stop_watching();
            give_back();
            if (outcome == turn::restart) continue;
            if (outcome == turn::failed) co_return complete(last_error, {});
            break;  // abandoned or stopped
        }
        give_back();
        if (backend->stopped()) complete(error::client_stopped, {});
        // An abandoned acquire's caller has had its answer; one out of
        // rounds gets one too.
        else if (!abandoned) complete(error::server_error, {});
    }

    enum class turn { granted, restart, timed_out, failed, abandoned };
    error_code last_error;

    asio::awaitable<turn> wait_for_turn() {
        auto& wire = backend->wire();
        const auto slice = std::max<clock::duration>(opts.lease / 3, std::chrono::milliseconds(10));
        for (int round = 0; round < 1'000'000; ++round) {
            // The watch must be in place before looking, so that a deletion
            // after the look is seen.
            while (!backend->watch_ready(st->prefix)) {
                auto until = clock::now() + slice;
                if (auto d = wait_deadline()) until = std::min(until, *d);
                if (!(co_await wait_until(until))) co_return turn::abandoned;
                if (auto d = wait_deadline(); d && clock::now() >= *d) co_return turn::timed_out;
            }
            range_request before;
            before.key = st->prefix;
            before.range_end = prefix_end(st->prefix);
            before.sort_by_create_revision = true;
            before.max_create_revision = my_revision - 1;
            before.keys_only = true;
            looking = true;
            auto [ec, r] = co_await call<range_result>(
                [&](auto h) { wire.range(std::move(before), std::move(h)); });
            looking = false;
            if (abandoned || backend->stopped()) co_return turn::abandoned;
            if (ec) {
                last_error = ec;
                co_return turn::failed;
            }
            if (r.kvs.empty()) co_return turn::granted;
            predecessor = r.kvs.back().key;
            const auto slice_end = clock::now() + slice;
            auto until = slice_end;
            if (auto d = wait_deadline()) until = std::min(until, *d);
            if (!(co_await wait_until(until))) co_return turn::abandoned;
            if (auto d = wait_deadline(); d && clock::now() >= *d && !woken)
                co_return turn::timed_out;
            // A slice passed: the pool keeps the lease alive; one lost took
            // this waiter's key with it.
            if (clock::now() >= slice_end && !backend->lease_alive(lease_id))
                co_return turn::restart;
        }
        co_return turn::restart;
    }

    void grant(std::uint64_t level, const lease_terms& terms, std::uint64_t token,
               bool contended) {
        stop_watching();
        // The lease's deadline: the confirming write found the key, so the
        // lease was alive then, and it was last confirmed alive until here.
        const auto deadline = backend->lease_deadline(lease_id);
        if (abandoned || clock::now() >= deadline) {
            give_back();
            if (!abandoned) complete(error::lock_lost, {});
            return;
        }
        st->lease_id = std::exchange(lease_id, 0);
        st->create_revision = std::exchange(my_revision, 0);
        st->value = std::move(value);
        count_grant(st->name, contended);
        auto t = backend->on_granted(st, level, terms, deadline);
        complete({}, make_guard(st, level, token, std::move(t)));
    }
};

}  // namespace

// lock_options::replicas is ignored: etcd answers a write only once a Raft
// majority committed it, and only such a member can become leader
// (docs/backends.md).
void etcd_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                           const acquire_request&, bool try_once, acquire_handler handler,
                           bool direct) {
    start_acquire<acquire_op>(shared_from_this(), base, opts, try_once, std::move(handler), direct);
}

// ---- release ----

void etcd_backend::release(const std::shared_ptr<lock_state>& base, std::uint64_t level,
                           std::shared_ptr<const tenure> t, release_handler handler,
                           bool direct) {
    auto st = std::static_pointer_cast<etcd_lock_state>(base);
    const bool expired = clock::now() >= t->deadline();
    auto finish = [&](error_code ec) {
        answer_release(strand_, executor_, metrics_, *st, std::move(handler), direct, ec);
    };
    const auto step = take_level(*st, level, *t);
    if (step == release_step::later_tenure) return finish(error::lock_lost);
    if (step == release_step::gone) {
        // The tenure ended without this release: the server says how. Its
        // lock held by another owner is not_owner; held by nobody, expired.
        range_request first;
        first.key = st->prefix;
        first.range_end = prefix_end(st->prefix);
        first.sort_by_create_revision = true;
        first.limit = 1;
        first.keys_only = true;
        gateway_->range(std::move(first), [this, st, h = std::move(handler), direct,
                                           self = shared_from_this()](error_code ec,
                                                                      range_result r) mutable {
            error_code result = error::expired;
            if (ec)
                result = ec;
            else if (!r.kvs.empty() && r.kvs.front().key != st->key)
                result = error::not_owner;
            else if (!r.kvs.empty())
                result = error::lock_lost;  // the handle's key again: a later tenure
            metrics_.release_found_gone(event_observer(), log(), st->name, result);
            asio::dispatch(strand_, [h = std::move(h), result, direct, ex = executor_]() mutable {
                detail::complete_now(std::move(h), direct, ex, result);
            });
        });
        return;
    }
    if (step == release_step::more_levels)
        return finish(expired ? error_code(error::expired) : error_code{});
    // The last level: one delete of the tenure's key, and of no later one.
    end_tenure(st);
    gateway_->txn(guarded_delete(st->key, st->create_revision),
                  [this, st, expired, h = std::move(handler), direct,
                   self = shared_from_this()](error_code ec, txn_result r) mutable {
        error_code result;
        if (expired)
            result = error::expired;
        else if (ec)
            result = ec;
        else if (!r.succeeded)
            result = error::expired;  // the key was gone: its lease ended
        if (result) metrics_.release_found_gone(event_observer(), log(), st->name, result);
        asio::dispatch(strand_, [h = std::move(h), result, direct, ex = executor_]() mutable {
            detail::complete_now(std::move(h), direct, ex, result);
        });
    });
}

void etcd_backend::release_in_background(const std::shared_ptr<lock_state>& base,
                                         std::uint64_t level) {
    auto st = std::static_pointer_cast<etcd_lock_state>(base);
    if (!st->current || take_level(*st, level, *st->current) != release_step::last_level) return;
    end_tenure(st);
    delete_in_background(st->key, st->create_revision);
}

std::shared_ptr<lock_backend> connect(asio::any_io_executor ex, std::string_view url,
                                      const backend_config& settings) {
    backend_options o;
    std::string why;
    if (auto ec = parse_url(url, o, why); ec) throw boost::system::system_error(ec, why);
    o.holder_label = settings.holder_label;
    const bool tls = o.gateway.tls;
    auto b = std::make_shared<etcd_backend>(std::move(ex), std::move(o), tls, settings);
    b->start();
    return b;
}

}  // namespace corolock::detail::etcd
