#include "pg/pg_backend.hpp"

#include "core/backoff.hpp"
#include "core/coroutine_backend.hpp"
#include "core/holder_record.hpp"
#include "core/logging.hpp"
#include "core/watchdog_schedule.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

namespace corolock::detail::pg {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

clock::time_point deadline_of(clock::time_point sent, clock::duration lease) {
    return watchdog_schedule::deadline_for(sent, lease);
}

}  // namespace

// ---- URL ----

error_code parse_url(std::string_view url, backend_options& out, std::string& why) {
    auto parts = std::make_shared<url_parts>();
    if (auto ec = split_url(url, *parts, why); ec) return ec;
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(parts->conninfo.c_str(), &err);
    if (opts == nullptr) {
        why = "malformed PostgreSQL URL: " +
              scrub(err != nullptr ? err : "libpq could not parse it", *parts);
        while (!why.empty() && why.back() == '\n') why.pop_back();
        if (err != nullptr) PQfreemem(err);
        return error::invalid_url;
    }
    tls_settings tls;
    for (const auto* o = opts; o->keyword != nullptr; ++o) {
        const std::string_view key = o->keyword;
        std::string* field = key == "sslmode"       ? &tls.sslmode
                             : key == "requiressl"  ? &tls.requiressl
                             : key == "sslrootcert" ? &tls.sslrootcert
                             : key == "host"        ? &tls.host
                             : key == "hostaddr"    ? &tls.hostaddr
                                                    : nullptr;
        if (field != nullptr && o->val != nullptr) *field = o->val;
    }
    PQconninfoFree(opts);
    auto tls_rule = decide_tls(tls, [](const char* name) { return std::getenv(name); });
    parts->sslmode = std::move(tls_rule.sslmode);
    parts->tls_warning = std::move(tls_rule.warning);
    out.url = std::move(parts);
    why.clear();
    return {};
}

// ---- state ----

pg_lock_state::pg_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name)
    : lock_state(std::move(b), std::move(lock_name), random_owner_id()) {}

// ---- the backend ----

pg_backend::pg_backend(asio::any_io_executor ex, backend_options opts,
                       const backend_config& settings)
    : executor_(ex),
      strand_(asio::make_strand(inner_executor(ex))),
      opts_(std::move(opts)),
      holder_argument_(detail::holder_argument(opts_.holder_label)),
      logger_(logger_or_default(settings.logger)),
      observer_(settings.observer),
      work_(std::make_shared<background_work>(strand_, ex)) {
    if (opts_.url && !opts_.url->tls_warning.empty())
        logger_->warn("postgresql: {}", opts_.url->tls_warning);
}

pg_backend::~pg_backend() {
    for (auto& w : sessions_)
        if (auto c = w.lock()) c->close(error::client_stopped);
}

void pg_backend::stop() noexcept {
    if (stopped_.exchange(true)) return;
    try {
        asio::post(strand_, [self = shared_from_this()] {
            auto holding = std::move(self->holding_);
            for (auto& [id, weak] : holding) {
                if (auto st = weak.lock()) {
                    if (st->renew_timer) st->renew_timer->cancel();
                    if (st->deadline_timer) st->deadline_timer->cancel();
                    st->signal_lost();
                }
            }
            // Closing a session frees on the server whatever it held, and
            // ends the statements waiting on it (with client_stopped).
            auto sessions = std::move(self->sessions_);
            self->idle_.clear();
            for (auto& w : sessions)
                if (auto c = w.lock()) c->close(error::client_stopped);
            self->work_->stop();
        });
    } catch (...) {
    }
}

std::string pg_backend::exclusion_key(std::string_view name) const {
    return "advisory key " + std::to_string(advisory_key(name));
}

std::shared_ptr<lock_state> pg_backend::make_state(std::string name, const lock_spec& spec) {
    if (spec.kind != lock_spec::kind_t::mutex)
        throw boost::system::system_error(
            error::invalid_argument,
            "the PostgreSQL backend offers corolock::mutex only (docs/postgresql.md)");
    return std::make_shared<pg_lock_state>(shared_from_this(), std::move(name));
}

asio::awaitable<std::shared_ptr<connection>> pg_backend::take_session(error_code& ec,
                                                                      std::string& why) {
    while (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        if (c->usable() && !c->busy()) co_return c;
        c->close();
    }
    if (stopped()) {
        ec = error::client_stopped;
        co_return nullptr;
    }
    auto c = std::make_shared<connection>(strand_, opts_.url);
    std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
    sessions_.push_back(c);
    ec = co_await c->connect(opts_.connect_timeout, why);
    if (!ec) {
        auto a = co_await c->exec(session_setup(), clock::now() + opts_.request_timeout);
        if (!a.ok()) {
            ec = error_of(a);
            why = a.message;
        }
    }
    if (!ec && !table_ready_) {
        const auto deadline = clock::now() + opts_.request_timeout;
        auto a = co_await c->exec(create_table(), deadline);
        if (!a.transport && a.sqlstate == "42501") {
            // No CREATE on the schema: the table made beforehand will do.
            const auto found = co_await c->exec(table_exists(), deadline);
            if (decide_table_exists(found)) a = found;
        }
        if (!a.transport && ddl_ok(a.sqlstate)) {
            table_ready_ = true;
        } else {
            ec = error_of(a);
            why = a.message;
        }
    }
    if (!ec && stopped()) ec = error::client_stopped;
    if (ec) {
        log().info("postgresql: no session: {}: {}", ec.message(), escaped{why});
        c->close();
        co_return nullptr;
    }
    co_return c;
}

void pg_backend::give_session(std::shared_ptr<connection> c) {
    c->on_lost(nullptr);
    if (!stopped() && c->usable() && !c->busy() && idle_.size() < opts_.max_idle_sessions)
        idle_.push_back(std::move(c));
    else
        c->close();
}

void pg_backend::give_back(std::shared_ptr<connection> c, std::string name,
                           const background_work::job& parent) {
    auto job = work_->begin_with(parent);
    asio::co_spawn(strand_, [self = shared_from_this(), c, name, job]() mutable -> asio::awaitable<void> {
        // A cancel may still be on its way to this session: never reuse it.
        co_await c->exec(pg::release(name), clock::now() + self->opts_.request_timeout);
        c->close();
        self->work_->end(job);
    }, asio::detached);
}

void pg_backend::cancel_in_background(int pid, const background_work::job& parent) {
    if (pid == 0 || stopped()) return;
    auto job = work_->begin_with(parent);
    asio::co_spawn(strand_, [self = shared_from_this(), pid, job]() mutable -> asio::awaitable<void> {
        error_code ec;
        std::string why;
        if (auto c = co_await self->take_session(ec, why)) {
            co_await c->exec(cancel_backend(pid), clock::now() + self->opts_.request_timeout);
            self->give_session(std::move(c));
        }
        self->work_->end(job);
    }, asio::detached);
}

void pg_backend::drain(clock::duration bound, release_handler handler, bool direct) {
    drain_background_work(shared_from_this(), bound, std::move(handler), direct);
}

// ---- tenures ----

std::shared_ptr<tenure> pg_backend::on_granted(const std::shared_ptr<pg_lock_state>& st,
                                               std::shared_ptr<connection> session,
                                               std::uint64_t level, std::uint64_t fence,
                                               const lease_terms& terms,
                                               clock::time_point deadline) {
    auto [t, began, start_renewals] =
        begin_or_join(*st, level, terms, reentry_terms::renewal_only, deadline);
    st->fence = fence;
    if (began) {
        st->session = std::move(session);
        const auto epoch = t->epoch;
        st->session->on_lost([weak = std::weak_ptr<pg_lock_state>(st), epoch,
                              self = std::weak_ptr<pg_backend>(shared_from_this())] {
            auto s = weak.lock();
            auto b = self.lock();
            if (!s || !b) return;
            if (auto* t = s->live(); t && t->epoch == epoch)
                b->lose_tenure(s, "the server ended its session");
        });
        holding_[st->watch_id] = st;
        arm_deadline(st, epoch);
    }
    if (start_renewals) run_renewals(st, t->epoch);
    return t;
}

void pg_backend::end_tenure(const std::shared_ptr<pg_lock_state>& st) noexcept {
    st->levels.clear();
    st->held.store(0, std::memory_order_release);
    if (st->renew_timer) st->renew_timer->cancel();
    if (st->deadline_timer) st->deadline_timer->cancel();
    if (st->session) st->session->on_lost(nullptr);
    st->session.reset();
    holding_.erase(st->watch_id);
}

void pg_backend::lose_tenure(const std::shared_ptr<pg_lock_state>& st, const char* why) {
    if (!lose_live(*st, metrics_, log(), why)) return;
    auto c = st->session;
    end_tenure(st);
    st->signal_lost();
    // Whatever the session still holds on the server is freed with it.
    if (c) c->close();
}

void pg_backend::arm_deadline(std::shared_ptr<pg_lock_state> st, std::uint64_t epoch) {
    arm_tenure_deadline(std::move(st), epoch, strand_, [self = shared_from_this()](const auto& s) {
        self->lose_tenure(s, "the lease deadline passed without an answered renewal");
    });
}

void pg_backend::run_renewals(std::shared_ptr<pg_lock_state> st, std::uint64_t epoch) {
    if (!st->renew_timer) st->renew_timer = std::make_unique<asio::steady_timer>(strand_);
    asio::co_spawn(strand_, [this, st, epoch, self = shared_from_this()]() -> asio::awaitable<void> {
        for (int round = 0; round < 100'000'000; ++round) {
            auto* t = st->live();
            if (!t || t->epoch != epoch || t->lost() || stopped()) co_return;
            st->renew_timer->expires_at(watchdog_schedule::renewal_due(
                t->deadline(), st->session_lease, t->terms.renew_every, clock::now()));
            co_await st->renew_timer->async_wait(nothrow);
            t = st->live();
            if (!t || t->epoch != epoch || t->lost() || stopped()) co_return;
            // Behind a caller's transaction (execute_locked), whose answers
            // renew as well: the deadline is read once it is this one's turn.
            auto c = st->session;
            const auto turn = co_await c->take_turn();
            t = st->live();
            if (!t || t->epoch != epoch || t->lost()) co_return;
            const auto sent = clock::now();
            const auto lease = st->session_lease;
            metrics_recorder::add(metrics_.renewals_sent);
            const auto a = co_await c->exec(turn, renew(), t->deadline());
            t = st->live();
            if (!t || t->epoch != epoch || t->lost()) co_return;
            if (a.ok() && clock::now() < t->deadline()) {
                t->publish_deadline(std::max(t->deadline(), deadline_of(sent, lease)));
            } else {
                metrics_.renewal_failed(event_observer(), log(), st->name,
                                        a.ok()             ? error_code(error::lock_lost)
                                        : a.transport ? a.transport
                                                      : error_code(error::server_error));
                lose_tenure(st, a.ok() ? "the renewal came back after the deadline"
                                       : "a renewal failed");
                co_return;
            }
        }
    }, asio::detached);
}

// ---- acquire ----

namespace {

struct acquire_op : coroutine_acquire<pg_backend>, std::enable_shared_from_this<acquire_op> {
    acquire_op(std::shared_ptr<pg_backend> b, std::shared_ptr<pg_lock_state> s, lock_options o,
               bool once, lock_backend::acquire_handler h, bool d)
        : coroutine_acquire(std::move(b), o, once, std::move(h), d), st(std::move(s)) {}

    std::shared_ptr<pg_lock_state> st;
    bool cancel_sent = false;
    int waiting_pid = 0;  // the session's backend while it waits in the lock queue

    void abandon(error_code ec) {
        give_up(ec);
        if (waiting_pid != 0 && !cancel_sent) {
            cancel_sent = true;
            asio::co_spawn(backend->strand(), cancel_until_answered(shared_from_this()),
                           asio::detached);
        }
    }

    // The first pg_cancel_backend can reach the server before the waiting
    // statement does (and be ignored): cancel again until it ends.
    static asio::awaitable<void> cancel_until_answered(std::shared_ptr<acquire_op> self) {
        asio::steady_timer pause(self->backend->strand());
        // From 50 ms, doubling to 500 ms, with jitter (core/backoff.hpp): 40
        // tries span about 15 s.
        detail::backoff pauses(std::chrono::milliseconds(50), std::chrono::milliseconds(500));
        for (int i = 0; i < 40 && self->waiting_pid != 0 && !self->backend->stopped(); ++i) {
            self->backend->cancel_in_background(self->waiting_pid, self->cleanup);
            pause.expires_after(pauses.next());
            co_await pause.async_wait(nothrow);
        }
    }

    asio::awaitable<void> run() {
        try {
            co_await run_inner();
        } catch (...) {
            complete(error::client_stopped, {});
        }
        end_run();
    }

    clock::time_point request_deadline() const {
        return clock::now() + backend->options().request_timeout;
    }

    // A re-entry: a fence bump on the tenure's own session. True when it
    // answered the caller.
    asio::awaitable<bool> reenter(std::uint64_t level, const lease_terms& terms) {
        auto session = st->session;
        const auto epoch = st->live()->epoch;
        const auto sent = clock::now();
        const auto a = co_await session->exec(pg::reenter(st->name), backend->options().request_timeout);
        auto* t = st->live();
        const auto fence = decide_reenter(a);
        if (fence && t && t->epoch == epoch && !t->lost() && clock::now() < t->deadline()) {
            if (abandoned) co_return true;  // the level was never handed out
            this->count_grant(st->name, false);
            auto tt = backend->on_granted(st, session, level, *fence, terms,
                                          deadline_of(sent, st->session_lease));
            complete({}, make_guard(st, level, *fence, std::move(tt)));
            co_return true;
        }
        if (t && t->epoch == epoch) backend->lose_tenure(st, "a re-entry found its session gone");
        co_return false;
    }

    asio::awaitable<void> run_inner() {
        const auto level = st->next_level++;
        const lease_terms terms{opts.lease,
                                opts.watchdog ? opts.renew_interval : clock::duration::zero()};
        if (st->live() && co_await reenter(level, terms)) co_return;
        if (abandoned) co_return;

        const bool try_only = try_once || (opts.wait && opts.wait->count() == 0);
        // A session reused from the pool may have been ended by the server
        // since (a restart): a statement that fails for that is tried once
        // more on a new session. Nothing was held: the session is gone.
        for (int attempt = 0; attempt < 2; ++attempt) {
            error_code ec;
            std::string why;
            auto s = co_await backend->take_session(ec, why);
            if (!s) co_return complete(backend->stopped() ? error::client_stopped : ec, {});
            if (abandoned) co_return backend->give_session(std::move(s));
            // A try first, waiting or not: a free lock is taken in this one
            // statement. A try never takes a lock from a session queued for
            // it (the server grants a released advisory lock to its queue
            // at the release), so trying first costs a waiter no place.
            auto sent = clock::now();
            answer a = co_await s->exec(
                try_acquire(st->name, opts.lease, backend->holder_argument(), st->owner),
                request_deadline());
            if (!try_only && decide_acquire(a).what == acquire_outcome::kind::refused) {
                if (abandoned) co_return backend->give_session(std::move(s));
                std::optional<clock::duration> left;
                if (opts.wait) left = std::max<clock::duration>(started + *opts.wait - clock::now(),
                                                               std::chrono::milliseconds(1));
                const auto pre = co_await s->exec(wait_setup(left, st->owner), request_deadline());
                if (!pre.ok()) {
                    s->close();
                    if (pre.transport == error::connection_lost && attempt == 0) continue;
                    co_return complete(backend->stopped() ? error::client_stopped : error_of(pre),
                                       {});
                }
                if (abandoned) co_return backend->give_session(std::move(s));
                // The server's lock_timeout ends the wait; this bound only
                // covers a server that does not answer.
                const auto limit = opts.wait ? started + *opts.wait + std::chrono::seconds(2)
                                             : clock::time_point::max();
                sent = clock::now();
                waiting_pid = s->backend_pid();
                a = co_await s->exec(wait_acquire(st->name, opts.lease, backend->holder_argument()),
                                     limit);
                waiting_pid = 0;
                if (a.transport == error::timeout) co_return complete(error::wait_timeout, {});
            }
            const auto o = decide_acquire(a);
            using kind = acquire_outcome::kind;
            if (o.what == kind::failed) {
                backend->log().info("lock {}: acquire failed: {} {}", escaped{st->name},
                                    escaped{a.sqlstate}, escaped{a.message});
                s->close();
                if (backend->stopped()) co_return complete(error::client_stopped, {});
                if (a.transport == error::connection_lost && attempt == 0 && !abandoned) continue;
                co_return complete(o.error, {});
            }
            if (o.what != kind::granted) {
                // Only a refused try surely left the lock alone. A wait that
                // was cancelled or timed out may have taken the advisory
                // lock (session-level: no rollback undoes it) before the
                // fence's insert failed, and a cancel of ours may still be
                // on its way: such a session is closed, which frees it.
                if (o.what == kind::refused && !cancel_sent)
                    backend->give_session(std::move(s));
                else
                    s->close();
                if (o.what == kind::refused) co_return complete(error::lock_held, {});
                if (o.what == kind::timed_out) co_return complete(error::wait_timeout, {});
                co_return complete(error::server_error, {});  // someone else cancelled it
            }
            co_return co_await granted(std::move(s), level, terms, sent, o.fence);
        }
    }

    asio::awaitable<void> granted(std::shared_ptr<connection> s, std::uint64_t level,
                                  const lease_terms& terms, clock::time_point sent,
                                  std::uint64_t fence) {
        if (abandoned || backend->stopped()) {
            backend->give_back(std::move(s), st->name, cleanup);
            co_return complete(error::client_stopped, {});
        }
        // A grant after a long wait: the server's idle timer started when
        // it answered, but all we know is when we sent. Confirm with a
        // renewal so the deadline starts from a recent send time.
        if (clock::now() - sent > opts.lease / 4) {
            const auto again = clock::now();
            const auto r = co_await s->exec(renew(), request_deadline());
            if (!r.ok()) {
                s->close();
                co_return complete(backend->stopped() ? error::client_stopped
                                                      : error_code(error::lock_lost),
                                   {});
            }
            if (abandoned) {
                backend->give_back(std::move(s), st->name, cleanup);
                co_return;
            }
            sent = again;
        }
        const auto deadline = deadline_of(sent, opts.lease);
        if (clock::now() >= deadline) {
            backend->give_back(std::move(s), st->name, cleanup);
            co_return complete(error::lock_lost, {});
        }
        st->session_lease = opts.lease;
        count_grant(st->name, false);
        auto t = backend->on_granted(st, std::move(s), level, fence, terms, deadline);
        complete({}, make_guard(st, level, fence, std::move(t)));
    }
};

}  // namespace

void pg_backend::acquire(const std::shared_ptr<lock_state>& base, const lock_options& opts,
                         const acquire_request&, bool try_once, acquire_handler handler,
                         bool direct) {
    start_acquire<acquire_op>(shared_from_this(), base, opts, try_once, std::move(handler), direct);
}

// ---- release ----

asio::awaitable<void> pg_backend::release_live(std::shared_ptr<pg_lock_state> st,
                                               std::shared_ptr<connection> c, bool expired,
                                               release_handler h, bool direct,
                                               background_work::job job) {
    const auto a = co_await c->exec(pg::release(st->name), opts_.request_timeout);
    const auto ec = decide_release(a, expired);
    if (a.ok() && a.rows.size() == 1 && !a.rows[0].empty() && a.rows[0][0] == "t")
        give_session(std::move(c));
    else
        c->close();  // in doubt: closing frees whatever it holds
    if (ec) metrics_.release_found_gone(event_observer(), log(), st->name, ec);
    work_->end(job);
    if (h) detail::complete_now(std::move(h), direct, executor_, ec);
}

asio::awaitable<void> pg_backend::release_lost(std::shared_ptr<pg_lock_state> st,
                                               release_handler h, bool direct) {
    metrics_.release_found_gone(event_observer(), log(), st->name, error::lock_lost);
    error_code ec;
    std::string why;
    auto c = co_await take_session(ec, why);
    if (c) {
        const auto a = co_await c->exec(sessions_of(st->name, true), clock::now() + opts_.request_timeout);
        ec = decide_lost_release(a);
        give_session(std::move(c));
    }
    detail::complete_now(std::move(h), direct, executor_, ec);
}

void pg_backend::release(const std::shared_ptr<lock_state>& base, std::uint64_t level,
                         std::shared_ptr<const tenure> t, release_handler handler, bool direct) {
    auto st = std::static_pointer_cast<pg_lock_state>(base);
    auto finish = [&](error_code ec) {
        answer_release(strand_, executor_, metrics_, *st, std::move(handler), direct, ec);
    };
    const bool expired = clock::now() >= t->deadline();
    switch (take_level(*st, level, *t)) {
    case release_step::later_tenure:
        return finish(error::lock_lost);
    case release_step::gone:
        asio::co_spawn(strand_, release_lost(st, std::move(handler), direct), asio::detached);
        return;
    case release_step::more_levels:
        return finish(expired ? error_code(error::expired) : error_code{});
    case release_step::last_level:
        break;
    }
    auto c = st->session;
    end_tenure(st);
    asio::co_spawn(strand_, release_live(st, std::move(c), expired, std::move(handler), direct, {}),
                   asio::detached);
}

void pg_backend::release_in_background(const std::shared_ptr<lock_state>& base,
                                       std::uint64_t level) {
    auto st = std::static_pointer_cast<pg_lock_state>(base);
    if (!st->current || take_level(*st, level, *st->current) != release_step::last_level) return;
    auto c = st->session;
    end_tenure(st);
    if (!c) return;
    asio::co_spawn(strand_, release_live(st, std::move(c), false, {}, false, work_->begin()),
                   asio::detached);
}

// ---- the caller's statements in the lock's transaction ----

struct pg_backend::sql_run {
    // The handler is moved in by construction: Asio 1.81's
    // any_completion_handler move assignment wraps it in another, endlessly.
    sql_run(std::shared_ptr<pg_lock_state> s, std::shared_ptr<tenure> held,
            std::vector<sql_statement> v, sql_handler h, bool d)
        : st(std::move(s)), t(std::move(held)), statements(std::move(v)), handler(std::move(h)),
          direct(d) {}

    std::shared_ptr<pg_lock_state> st;
    std::shared_ptr<tenure> t;
    std::vector<sql_statement> statements;
    sql_handler handler;
    bool direct = false;
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    sql_outcome out;
};

void pg_backend::execute_locked(const std::shared_ptr<lock_state>& base, std::shared_ptr<tenure> t,
                                std::vector<sql_statement> statements, sql_handler handler,
                                bool direct) {
    sql_outcome refused;
    for (std::size_t i = 0; i < statements.size() && refused.message.empty(); ++i) {
        refused.message = refuse_statement(statements[i].text, statements[i].params);
        if (!refused.message.empty()) refused.failed_statement = i;
    }
    if (!refused.message.empty()) {
        detail::complete_posted(std::move(handler), executor_, error_code(error::invalid_argument),
                                std::move(refused));
        return;
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto run = std::make_shared<sql_run>(std::static_pointer_cast<pg_lock_state>(base),
                                         std::move(t), std::move(statements), std::move(handler),
                                         direct);
    // Honoured between statements: a flag the transaction reads.
    if (slot.is_connected())
        slot.assign([c = run->cancelled](asio::cancellation_type) { c->store(true); });
    asio::co_spawn(strand_, run_locked(std::move(run)), asio::detached);
}

void pg_backend::execute_for_term(std::string name, std::string owner, std::uint64_t epoch,
                                  std::vector<sql_statement> statements, sql_handler handler) {
    asio::post(strand_, [self = shared_from_this(), name = std::move(name),
                             owner = std::move(owner), epoch, statements = std::move(statements),
                             h = std::move(handler)]() mutable {
        for (auto& [id, weak] : self->holding_) {
            auto st = weak.lock();
            if (!st || st->name != name || st->owner != owner || st->fence != epoch ||
                st->live() == nullptr || st->live()->lost())
                continue;
            auto t = st->current;
            auto run = std::make_shared<sql_run>(std::move(st), std::move(t), std::move(statements),
                                                 std::move(h), false);
            asio::co_spawn(self->strand_, self->run_locked(std::move(run)), asio::detached);
            return;
        }
        detail::complete_now(std::move(h), false, self->executor_,
                             error_code(error::lock_lost), sql_outcome{});
    });
}

asio::awaitable<void> pg_backend::run_locked(std::shared_ptr<sql_run> run) {
    error_code ec = error::client_stopped;
    try {
        if (!stopped()) ec = co_await transact(*run);
    } catch (...) {
        ec = error::client_stopped;
    }
    if (ec) run->out.results.clear();
    if (auto slot = asio::get_associated_cancellation_slot(run->handler); slot.is_connected())
        slot.clear();
    detail::complete_now(std::move(run->handler), run->direct, executor_, ec, std::move(run->out));
}

asio::awaitable<error_code> pg_backend::transact(sql_run& run) {
    auto& st = run.st;
    auto& t = *run.t;
    auto& out = run.out;
    const auto live = [&] { return st->live() == &t && !t.lost(); };
    if (!live()) co_return error::lock_lost;
    const auto c = st->session;
    const auto turn = co_await c->take_turn();
    if (!turn || !live()) co_return error::lock_lost;
    const auto fence = st->fence;
    const auto lease = st->session_lease;

    // One statement in the turn. An answer renews the lease, as a renewal
    // does: the session's idle timer restarted when it was sent.
    const auto step = [&](statement s) -> asio::awaitable<answer> {
        const auto sent = clock::now();
        auto a = co_await c->exec(turn, std::move(s), t.deadline());
        if (!a.transport && live() && clock::now() < t.deadline())
            t.publish_deadline(std::max(t.deadline(), deadline_of(sent, lease)));
        co_return a;
    };
    // A transport failure closed the session, which loses the tenure.
    const auto gone = [&](const answer& a) {
        out.message = a.message;
        return t.lost() ? error_code(error::lock_lost) : a.transport;
    };
    const auto roll_back = [&]() -> asio::awaitable<void> {
        const auto r = co_await step(rollback_transaction());
        if (!r.transport && c->transaction() != connection::transaction_state::idle && live())
            lose_tenure(st, "a transaction could not be rolled back");
    };
    const auto not_held = [&]() -> asio::awaitable<error_code> {
        co_await roll_back();
        out.message = "the session does not hold the lock with this guard's fence";
        if (live()) lose_tenure(st, "its session no longer holds the lock");
        co_return error::lock_lost;
    };

    if (run.cancelled->load()) co_return asio::error::operation_aborted;
    if (auto a = co_await step(begin_transaction()); !a.ok())
        co_return a.transport ? gone(a) : error_of(a);
    auto check = co_await step(locked_check(st->name, fence, lease));
    if (check.transport) co_return gone(check);
    if (!check.ok()) {
        out.sqlstate = check.sqlstate;
        out.message = check.message;
        co_await roll_back();
        co_return error_of(check);
    }
    if (!decide_locked_check(check)) co_return co_await not_held();

    for (std::size_t i = 0; i < run.statements.size(); ++i) {
        if (run.cancelled->load()) {
            co_await roll_back();
            co_return asio::error::operation_aborted;
        }
        const auto& s = run.statements[i];
        // Built apart: g++ 12 double-frees a braced temporary in a co_await.
        statement caller{s.text, s.params, true};
        auto a = co_await step(std::move(caller));
        if (a.transport) co_return gone(a);
        if (!a.ok() || c->transaction() != connection::transaction_state::open) {
            out.failed_statement = i;
            out.sqlstate = a.sqlstate;
            out.message = a.ok() ? "the statement ended corolock's transaction" : a.message;
            co_await roll_back();
            co_return a.ok() ? error::invalid_argument : error::server_error;
        }
        out.results.push_back({std::move(a.columns), std::move(a.rows), std::move(a.command_tag),
                               a.affected});
    }
    if (run.cancelled->load()) {
        co_await roll_back();
        co_return asio::error::operation_aborted;
    }
    // Again: a statement may have unlocked the advisory lock.
    check = co_await step(locked_check(st->name, fence, lease));
    if (check.transport) co_return gone(check);
    if (!decide_locked_check(check)) co_return co_await not_held();
    auto done = co_await step(commit_transaction());
    if (done.transport) {
        out.message = "the session ended with COMMIT sent: whether it committed is unknown";
        co_return error::connection_lost;
    }
    if (!done.ok() || done.command_tag != "COMMIT") {
        out.sqlstate = done.sqlstate;
        out.message = done.ok() ? "the server rolled the transaction back" : done.message;
        co_return error::server_error;
    }
    co_return error_code{};
}

std::shared_ptr<lock_backend> connect(asio::any_io_executor ex, std::string_view url,
                                      const backend_config& settings) {
    backend_options o;
    std::string why;
    if (auto ec = parse_url(url, o, why); ec) throw boost::system::system_error(ec, why);
    o.holder_label = settings.holder_label;
    return std::make_shared<pg_backend>(std::move(ex), std::move(o), settings);
}

}  // namespace corolock::detail::pg
