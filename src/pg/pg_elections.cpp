#include "pg/pg_elections.hpp"

#include "core/backoff.hpp"
#include "core/holder_record.hpp"
#include "core/logging.hpp"
#include "core/election_task.hpp"
#include "core/strand_leader_watch.hpp"
#include "pg/pg_backend.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <memory>
#include <utility>

namespace corolock::detail::pg {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// Two sessions making the table at once wait for each other (CREATE ... IF
// NOT EXISTS races with a unique violation otherwise): a transaction-level
// advisory lock on a key of its own, as the fence install has.
constexpr std::string_view serialise_creates = "SELECT pg_advisory_xact_lock(7233049431866519298)";
constexpr std::string_view create_schema = "CREATE SCHEMA IF NOT EXISTS corolock";
// pid: the holder's session that wrote it; lease_ms: that session's
// idle_session_timeout then (its lease, for a reader's wait cap).
constexpr std::string_view create_table = R"sql(CREATE TABLE IF NOT EXISTS corolock.leaders (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    epoch      bigint NOT NULL,
    value      bytea NOT NULL,
    pid        integer NOT NULL,
    lease_ms   bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
))sql";
constexpr std::string_view table_exists = "SELECT to_regclass('corolock.leaders') IS NOT NULL";

// Runs after locked_check (the session holds the advisory lock, the fence
// is the epoch), in the same transaction. $1 name, $2 owner, $3 epoch, $4
// the value in hex, $5 the channel. An older epoch never overwrites a newer.
constexpr std::string_view proclaim_sql =
    "WITH w AS (INSERT INTO corolock.leaders AS r (name, owner, epoch, value, pid, lease_ms) "
    "VALUES ($1, $2, $3::bigint, decode($4, 'hex'), pg_backend_pid(), "
    "(SELECT setting::bigint FROM pg_settings WHERE name = 'idle_session_timeout')) "
    "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, epoch = EXCLUDED.epoch, "
    "value = EXCLUDED.value, pid = EXCLUDED.pid, lease_ms = EXCLUDED.lease_ms, "
    "updated_at = now() WHERE r.epoch <= EXCLUDED.epoch RETURNING 1) "
    "SELECT (SELECT count(*) FROM w), pg_notify($5, '')";

// $1 name, $2 owner, $3 epoch, $4 the channel: the NOTIFY only when a row went.
constexpr std::string_view withdraw_sql =
    "WITH d AS (DELETE FROM corolock.leaders WHERE name = $1 AND owner = $2 AND epoch = $3::bigint "
    "RETURNING 1) SELECT pg_notify($4, '') FROM d";

// The record only when its session holds the name's advisory key now, as
// the same owner, and the name's fence is still its epoch: a dead or
// broken leader's row is never reported. $1 name, $2 $3 the key's halves.
// Columns: epoch, owner, value (hex), the grant's holder record, the
// lease, how long the holder's session has been idle (0 when busy), the
// server's time in microseconds.
constexpr std::string_view read_sql =
    "SELECT r.epoch, r.owner, encode(r.value, 'hex'), f.holder, r.lease_ms, "
    "CASE WHEN a.state = 'idle' "
    "THEN (extract(epoch FROM clock_timestamp() - a.state_change) * 1000)::bigint ELSE 0 END, "
    "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint "
    "FROM corolock.leaders r "
    "JOIN corolock_locks f ON f.name = r.name AND f.fence = r.epoch "
    "JOIN pg_locks k ON k.locktype = 'advisory' AND k.classid = $2::oid AND k.objid = $3::oid "
    "AND k.objsubid = 1 AND k.granted AND k.pid = r.pid "
    "JOIN pg_stat_activity a ON a.pid = r.pid AND a.application_name = $4 || r.owner "
    "WHERE r.name = $1";

std::string to_hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(digits[c >> 4]);
        out.push_back(digits[c & 0xf]);
    }
    return out;
}

bool from_hex(std::string_view hex, std::string& out) {
    if (hex.size() % 2 != 0) return false;
    out.clear();
    out.reserve(hex.size() / 2);
    const auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0) return false;
        out.push_back(static_cast<char>(hi * 16 + lo));
    }
    return true;
}

template <class T>
bool number(const std::optional<std::string>& text, T& out) {
    if (!text) return false;
    const auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), out);
    return ec == std::errc() && p == text->data() + text->size();
}

bool missing_table(const answer& a) { return !a.transport && a.sqlstate == "42P01"; }

// Makes corolock.leaders (and its schema) once per backend, on a session of
// the pool. A role that may not: error::no_permission, and why in the log.
asio::awaitable<error_code> ensure_table(std::shared_ptr<pg_backend> b) {
    auto& svc = static_cast<pg_elections&>(*b->elections());
    if (svc.table_ready) co_return error_code{};
    error_code ec;
    std::string why;
    auto c = co_await b->take_session(ec, why);
    if (!c) co_return ec ? ec : error_code(error::not_connected);
    const auto deadline = clock::now() + b->options().request_timeout;
    auto run = [&](std::string_view sql) -> asio::awaitable<answer> {
        statement s{sql, {}};
        co_return co_await c->exec(std::move(s), deadline);
    };
    auto found = co_await run(table_exists);
    if (decide_table_exists(found)) {
        svc.table_ready = true;
        b->give_session(std::move(c));
        co_return error_code{};
    }
    std::string_view step = "BEGIN";
    auto a = co_await run(step);
    static constexpr std::array<std::string_view, 3> creates{serialise_creates, create_schema,
                                                             create_table};
    for (auto s : creates) {
        if (!a.ok()) break;
        step = s;
        a = co_await run(step);
    }
    if (a.ok()) a = co_await run("COMMIT");
    if (!a.ok()) {
        c->close();  // a failed transaction: not worth a ROLLBACK's round trip
        if (a.transport) co_return a.transport;
        if (a.sqlstate == "42501") {
            b->log().warn("election: this role may not create {} on PostgreSQL (it needs CREATE "
                          "on the database, or an owner to make it beforehand: docs/election.md): "
                          "{}",
                          step == create_schema ? "schema corolock" : "table corolock.leaders",
                          escaped{a.message});
            co_return error::no_permission;
        }
        b->log().warn("election: corolock.leaders could not be made: {}", escaped{a.message});
        co_return error_of(a);
    }
    svc.table_ready = true;
    b->give_session(std::move(c));
    co_return error_code{};
}

asio::awaitable<std::tuple<error_code, sql_outcome>> for_term(std::shared_ptr<pg_backend> b,
                                                              std::string name, std::string owner,
                                                              std::uint64_t epoch,
                                                              std::vector<sql_statement> v) {
    asio::as_tuple_t<asio::use_awaitable_t<>> token;
    return asio::async_initiate<asio::as_tuple_t<asio::use_awaitable_t<>>,
                                void(error_code, sql_outcome)>(
        [b, name = std::move(name), owner = std::move(owner), epoch,
         v = std::move(v)](auto h) mutable {
            b->execute_for_term(std::move(name), std::move(owner), epoch, std::move(v),
                                sql_handler(std::move(h)));
        },
        token);
}

asio::awaitable<error_code> run_proclaim(std::shared_ptr<pg_backend> b, std::string name,
                                         std::string owner, std::uint64_t epoch,
                                         std::string value) {
    if (auto ec = co_await ensure_table(b); ec) co_return ec;
    std::vector<sql_statement> v;
    v.push_back({std::string(proclaim_sql),
                 {name, owner, std::to_string(epoch), to_hex(value), leader_channel(name)}});
    auto [ec, out] = co_await for_term(b, name, owner, epoch, std::move(v));
    if (ec) {
        if (out.sqlstate == "42P01")  // dropped since: made again next time
            static_cast<pg_elections&>(*b->elections()).table_ready = false;
        if (out.sqlstate == "42501") co_return error_code(error::no_permission);
        co_return ec;
    }
    // The row is this term's unless a newer epoch's was there (which the
    // check before it rules out while the session holds the lock).
    if (out.results.size() != 1 || out.results[0].rows.size() != 1 ||
        out.results[0].rows[0].empty() || out.results[0].rows[0][0] != "1")
        co_return error_code(error::lock_lost);
    co_return error_code{};
}

asio::awaitable<error_code> run_withdraw(std::shared_ptr<pg_backend> b, std::string name,
                                         std::string owner, std::uint64_t epoch) {
    error_code ec;
    std::string why;
    auto c = co_await b->take_session(ec, why);
    if (!c) co_return ec ? ec : error_code(error::not_connected);
    // Built apart: g++ 12 mishandles a braced temporary in a co_await.
    statement s{withdraw_sql, {name, owner, std::to_string(epoch), leader_channel(name)}};
    const auto a = co_await c->exec(std::move(s), clock::now() + b->options().request_timeout);
    if (a.transport) co_return a.transport;
    b->give_session(std::move(c));
    if (!a.ok() && !missing_table(a)) co_return error_of(a);
    co_return error_code{};
}

asio::awaitable<std::tuple<error_code, leader_reading>> run_read(std::shared_ptr<pg_backend> b,
                                                                 std::string name) {
    leader_reading out;
    error_code ec;
    std::string why;
    auto c = co_await b->take_session(ec, why);
    if (!c) co_return std::tuple{ec ? ec : error_code(error::not_connected), leader_reading{}};
    const auto key = advisory_key(name);
    statement s{read_sql,
                {name, std::to_string(key_classid(key)), std::to_string(key_objid(key)),
                 std::string(application_prefix)}};
    const auto a = co_await c->exec(std::move(s), clock::now() + b->options().request_timeout);
    if (a.transport) co_return std::tuple{a.transport, leader_reading{}};
    b->give_session(std::move(c));
    if (missing_table(a)) co_return std::tuple{error_code{}, std::move(out)};
    if (!a.ok()) co_return std::tuple{error_of(a), leader_reading{}};
    if (a.rows.empty()) co_return std::tuple{error_code{}, std::move(out)};
    const auto& r = a.rows.front();
    leader_info l;
    std::int64_t lease_ms = 0, idle_ms = 0, now_us = 0;
    if (r.size() != 7 || !number(r[0], l.epoch) || !r[2] || !from_hex(*r[2], l.value) ||
        !number(r[4], lease_ms) || !number(r[5], idle_ms) || !number(r[6], now_us))
        co_return std::tuple{error_code(error::unexpected_reply), leader_reading{}};
    if (r[3]) l.holder = parse_holder_record(*r[3], now_us);
    out.leader = std::move(l);
    // The session's end frees the lock with no NOTIFY: an observer looks
    // again when the server would have ended an idle holder's session
    // (a little after, so that the look finds it gone).
    if (lease_ms > 0) {
        const auto left = std::chrono::milliseconds(std::max<std::int64_t>(lease_ms - idle_ms, 0));
        out.lease_left = left + std::chrono::milliseconds(100);
    }
    co_return std::tuple{error_code{}, std::move(out)};
}

// A subscription on the backend's strand: a session of its own that
// LISTENs to the name's channel. Every NOTIFY is an announcement; so is a
// (re)subscription, since whatever changed before it is unknown. A broken
// session is replaced after a pause (growing to 5 s).
class pg_watch final : public strand_leader_watch {
public:
    pg_watch(std::shared_ptr<pg_backend> b, std::string name)
        : strand_leader_watch(b->strand(), b->get_executor()),
          backend_(std::move(b)),
          channel_(leader_channel(name)),
          retry_timer_(strand()) {}

    void open() {
        asio::post(strand(), [self = weak_self(this).lock()] { self->start(); });
    }

private:
    bool backend_stopped() const noexcept override { return backend_->stopped(); }

    void on_close() noexcept override {
        retry_timer_.cancel();
        if (auto c = std::move(session_)) c->close(error::client_stopped);
    }

    // Strand only.
    void start() {
        if (over()) return;
        asio::co_spawn(strand(), listen(weak_self(this).lock()), asio::detached);
    }

    static asio::awaitable<void> listen(std::shared_ptr<pg_watch> self) {
        error_code ec;
        std::string why;
        auto c = co_await self->backend_->take_session(ec, why);
        if (self->over()) {
            if (c) c->close(error::client_stopped);
            co_return;
        }
        if (!c) co_return self->retry();
        // The channel is made of hex digits only: safe to quote as is.
        const std::string sql = "LISTEN \"" + self->channel_ + "\"";
        statement s{sql, {}};
        const auto a =
            co_await c->exec(std::move(s), clock::now() + self->backend_->options().request_timeout);
        if (self->over()) {
            c->close(error::client_stopped);
            co_return;
        }
        if (!a.ok()) {
            c->close();
            co_return self->retry();
        }
        // Never back to the pool: it listens until closed.
        std::weak_ptr<pg_watch> weak = self;
        c->on_notify([weak] {
            if (auto w = weak.lock(); w && !w->over()) w->announce();
        });
        c->on_lost([weak] {
            auto w = weak.lock();
            if (!w) return;
            w->session_.reset();
            if (!w->over()) w->retry();
        });
        self->session_ = std::move(c);
        self->pauses_.reset();
        self->announce();
    }

    void retry() {
        announce();
        retry_timer_.expires_after(pauses_.next());
        retry_timer_.async_wait([weak = weak_self(this)](error_code ec) {
            if (ec) return;
            if (auto w = weak.lock()) w->start();
        });
    }

    std::shared_ptr<pg_backend> backend_;
    const std::string channel_;
    asio::steady_timer retry_timer_;
    backoff pauses_{std::chrono::milliseconds(200), std::chrono::seconds(5)};
    std::shared_ptr<connection> session_;
};

}  // namespace

std::string leader_channel(std::string_view name) {
    char digits[17];
    std::snprintf(digits, sizeof digits, "%016llx",
                  static_cast<unsigned long long>(static_cast<std::uint64_t>(advisory_key(name))));
    return std::string("corolock_leader_") + digits;
}

void pg_elections::proclaim(std::string name, std::string owner, std::uint64_t epoch,
                            std::string value, done_handler h) {
    auto b = backend_.shared_from_this();
    run_election_task(
        b, run_proclaim(b, std::move(name), std::move(owner), epoch, std::move(value)),
        std::move(h));
}

void pg_elections::withdraw(std::string name, std::string owner, std::uint64_t epoch,
                            done_handler h) {
    auto b = backend_.shared_from_this();
    run_election_task(b, run_withdraw(b, std::move(name), std::move(owner), epoch),
                      std::move(h));
}

void pg_elections::read(std::string name, read_handler h) {
    auto b = backend_.shared_from_this();
    run_election_task(b, run_read(b, std::move(name)), std::move(h));
}

std::shared_ptr<leader_watch> pg_elections::watch(std::string name) {
    auto w = std::make_shared<pg_watch>(backend_.shared_from_this(), std::move(name));
    w->open();
    return w;
}

}  // namespace corolock::detail::pg
