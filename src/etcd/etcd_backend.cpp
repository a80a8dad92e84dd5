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

// etcd leases are whole seconds: at least the lease asked for.
std::int64_t ttl_seconds(clock::duration lease) {
    const auto s = std::chrono::ceil<std::chrono::seconds>(lease).count();
    return std::max<std::int64_t>(s, 1);
}

// The lease's deadline: from when its last confirmed grant or keep-alive
// was sent, for the shorter of the lease asked for and the TTL granted.
clock::time_point deadline_of(clock::time_point sent, clock::duration lease, std::int64_t ttl) {
    const auto granted = std::chrono::duration_cast<clock::duration>(std::chrono::seconds(ttl));
    return watchdog_schedule::deadline_for(sent, std::min(lease, granted));
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
                    if (st->renew_timer) st->renew_timer->cancel();
                    if (st->deadline_timer) st->deadline_timer->cancel();
                    st->signal_lost();
                }
            }
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

void etcd_backend::revoke_in_background(std::int64_t lease_id, const background_work::job& parent) {
    if (lease_id == 0 || stopped()) return;
    auto job = work_->begin_with(parent);
    gateway_->lease_revoke(lease_id, [self = shared_from_this(), job](error_code,
                                                                      lease_revoke_result) {
        asio::dispatch(self->strand_, [self, job]() mutable { self->work_->end(job); });
    });
}

void etcd_backend::drain(clock::duration bound, release_handler handler, bool direct) {
    drain_background_work(shared_from_this(), bound, std::move(handler), direct);
}

std::shared_ptr<tenure> etcd_backend::on_granted(const std::shared_ptr<etcd_lock_state>& st,
                                                 std::uint64_t level, const lease_terms& terms,
                                                 clock::time_point deadline) {
    auto [t, began, start_renewals] = add_level(*st, level, terms, deadline);
    if (began) {
        holding_[st->watch_id] = st;
        watch_prefix(st->prefix, &st->holder);  // a deleted key is a lost tenure
        arm_deadline(st, t->epoch);
    }
    if (start_renewals) run_renewals(st, t->epoch);
    return t;
}

void etcd_backend::end_tenure(const std::shared_ptr<etcd_lock_state>& st) noexcept {
    st->levels.clear();
    st->held.store(0, std::memory_order_release);
    if (st->renew_timer) st->renew_timer->cancel();
    if (st->deadline_timer) st->deadline_timer->cancel();
    unwatch_prefix(st->prefix, &st->holder);
    holding_.erase(st->watch_id);
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

void etcd_backend::lose_tenure(const std::shared_ptr<etcd_lock_state>& st, const char* why) {
    if (!mark_live_lost(*st, metrics_, log(), why)) return;
    const auto lease = std::exchange(st->lease_id, 0);
    end_tenure(st);
    st->signal_lost();
    revoke_in_background(lease);
}

void etcd_backend::arm_deadline(std::shared_ptr<etcd_lock_state> st, std::uint64_t epoch) {
    arm_tenure_deadline(std::move(st), epoch, strand_, [self = shared_from_this()](const auto& s) {
        self->lose_tenure(s, "the lease deadline passed without a confirmed keep-alive");
    });
}

void etcd_backend::run_renewals(std::shared_ptr<etcd_lock_state> st, std::uint64_t epoch) {
    if (!st->renew_timer) st->renew_timer = std::make_unique<asio::steady_timer>(strand_);
    const auto* live = st->live();
    if (!live) return;
    st->renew_timer->expires_at(watchdog_schedule::renewal_due(
        live->deadline(), live->terms.lease, live->terms.renew_every, clock::now()));
    st->renew_timer->async_wait([this, st, epoch, self = shared_from_this()](error_code) {
        auto* t = st->live();
        if (!t || t->epoch != epoch || t->lost() || stopped()) return;
        const auto sent = clock::now();
        const auto lease = t->terms.lease;
        metrics_recorder::add(metrics_.renewals_sent);
        gateway_->lease_keepalive(
            st->lease_id, [this, st, epoch, sent, lease, self](error_code ec,
                                                               lease_keepalive_result r) {
                auto* t = st->live();
                if (!t || t->epoch != epoch || t->lost()) return;
                if (!ec && r.ttl > 0 && clock::now() < t->deadline()) {
                    t->publish_deadline(std::max(t->deadline(), deadline_of(sent, lease, r.ttl)));
                } else {
                    metrics_.renewal_failed(event_observer(), log(), st->name,
                                            ec ? ec : error_code(error::expired));
                    if (!ec) {
                        lose_tenure(st, r.ttl <= 0 ? "etcd reports the lease gone"
                                                   : "the keep-alive came back after the deadline");
                        return;
                    }
                    log().info("lock {}: keep-alive failed: {}", escaped{st->name}, ec.message());
                }
                run_renewals(st, epoch);
            });
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

    // This acquire's own lease and key while it waits or until its grant.
    std::int64_t lease_id = 0;
    std::int64_t my_revision = 0;
    std::string value;  // the key's value as last written
    clock::time_point lease_sent{};
    std::int64_t lease_ttl = 0;

    ~acquire_op() {
        // Normally out already; an operation dropped unfinished (its
        // execution context destroyed) must not stay registered.
        if (watching) backend->unwatch_prefix(st->prefix, this);
    }

    void on_deleted(const std::string& key, std::int64_t) override {
        if (key == predecessor || (waiting_for_own_key && key == st->key)) poke();
    }
    void on_watch_reset() override { poke(); }
    void stop_watching() {
        if (watching) backend->unwatch_prefix(st->prefix, this);
        watching = false;
    }

    // Gives the lease (and with it the key) back.
    void give_back() {
        stop_watching();
        backend->revoke_in_background(std::exchange(lease_id, 0), cleanup);
    }

    // Gives the lease back and waits for etcd's answer (bounded by the
    // request timeout), so that a caller told lock_held or wait_timeout can
    // exit at once without leaving its key queued until its lease ends.
    asio::awaitable<void> give_back_now() {
        stop_watching();
        const auto id = std::exchange(lease_id, 0);
        if (id == 0 || backend->stopped()) co_return;
        auto& wire = backend->wire();
        co_await call<lease_revoke_result>([&](auto h) { wire.lease_revoke(id, std::move(h)); });
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
            // A lease of this acquire's own, and its key under the lock.
            lease_sent = clock::now();
            {
                auto [ec, g] = co_await call<lease_grant_result>(
                    [&](auto h) { wire.lease_grant(ttl_seconds(opts.lease), std::move(h)); });
                if (ec) co_return complete(ec, {});
                lease_id = g.id;
                lease_ttl = g.ttl;
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
            auto [ec, r] = co_await call<range_result>(
                [&](auto h) { wire.range(std::move(before), std::move(h)); });
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
            if (clock::now() >= slice_end) {
                // A slice passed: keep this acquire's own lease alive.
                const auto sent = clock::now();
                auto [kec, k] = co_await call<lease_keepalive_result>(
                    [&](auto h) { wire.lease_keepalive(lease_id, std::move(h)); });
                if (abandoned || backend->stopped()) co_return turn::abandoned;
                if (kec) {
                    last_error = kec;
                    co_return turn::failed;
                }
                if (k.ttl <= 0) co_return turn::restart;  // our key is gone
                lease_sent = sent;
                lease_ttl = k.ttl;
            }
        }
        co_return turn::restart;
    }

    void grant(std::uint64_t level, const lease_terms& terms, std::uint64_t token,
               bool contended) {
        stop_watching();
        const auto deadline = deadline_of(lease_sent, opts.lease, lease_ttl);
        if (abandoned || clock::now() >= deadline) {
            give_back();
            if (!abandoned) complete(error::lock_lost, {});
            return;
        }
        st->lease_id = std::exchange(lease_id, 0);
        st->create_revision = my_revision;
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
    // The last level: revoking the lease deletes the key, and only it.
    const auto lease = std::exchange(st->lease_id, 0);
    end_tenure(st);
    gateway_->lease_revoke(lease, [this, st, expired, h = std::move(handler), direct,
                                   self = shared_from_this()](error_code ec,
                                                              lease_revoke_result) mutable {
        error_code result;
        if (expired)
            result = error::expired;
        else if (ec == error::server_error)
            result = error::expired;  // etcd: the lease was not found, it expired
        else
            result = ec;
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
    const auto lease = std::exchange(st->lease_id, 0);
    end_tenure(st);
    revoke_in_background(lease);
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
