// The PostgreSQL backend's protocol, without I/O: the URL, a lock's
// advisory key, the SQL it sends and what each answer means
// (docs/postgresql.md says why it is shaped this way).
//
// A lock NAME is a session-level advisory lock on key(NAME), a 64-bit hash
// of the name, held by one session (connection) per tenure, plus a row
// (NAME, fence, holder) in the table corolock_locks:
//
//  - acquire: one statement takes the advisory lock (pg_try_advisory_lock,
//    or pg_advisory_lock to wait in the server's lock queue, bounded by
//    lock_timeout) and, only if it got it, bumps the row's fence in the same
//    autocommitted statement; it also sets the session's server-side lease
//    (below). The fence commits before the grant is handed out
//    (synchronous_commit on), so no holder's death can roll it back: the
//    next holder's fence is larger, across restarts too.
//  - lease: the server ends the session, which frees its advisory locks,
//    in every state a frozen or partitioned client can leave it in: idle
//    for idle_session_timeout, idle inside a transaction (after BEGIN, or
//    between the caller's statements) for
//    idle_in_transaction_session_timeout, and a statement that runs longer
//    than statement_timeout is cancelled, after which the transaction is
//    idle. All three are the lease, set at the grant: the session is freed
//    one lease after its last statement ended, or at most two leases after
//    the last one was sent when the client froze mid-statement (the
//    statement's own time, at most one lease, then the idle lease).
//    Renewals are statements on the session (each resets the idle timers);
//    the local deadline is the send time of the last answered statement
//    plus the lease, minus the drift allowance, so the server never frees
//    the lock before it.
//  - release: pg_advisory_unlock, and the session goes back to the pool with
//    the three timeouts 0.
#pragma once

#include <corolock/error.hpp>

#include <chrono>
#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail::pg {

// ---- URL ----

struct url_parts {
    std::string conninfo;  // what libpq is given: the URL, postgres:// spelled postgresql://
    // Every credential the URL holds, as written (maybe %-escaped) and
    // decoded: the user-info password, and the values of the query's
    // credential keys (detail::is_credential_query_key: password=,
    // sslpassword=). Empty ones left out.
    std::vector<std::string> secrets;
    // TLS as corolock asks it of libpq (decide_tls below): "verify-full"
    // where the URL or the environment asks for TLS without verifying the
    // server, passed after the URL's own keywords; "" leaves libpq's
    // setting as it is.
    std::string sslmode;
    // Non-empty when the connection may cross a network unencrypted or
    // unverified: logged at warn, and printed by the corolock tool.
    std::string tls_warning;
};

// ---- TLS ----
//
// libpq's default, sslmode=prefer, tries TLS without checking the
// certificate and falls back to plain text: whoever is on the path can
// downgrade it or answer in the server's name. corolock's rules, decided
// once per URL:
//  - TLS asked for without verification (sslmode=require, requiressl=1,
//    or an sslrootcert with no sslmode) is made verify-full: the
//    certificate must chain to sslrootcert (libpq's default
//    ~/.postgresql/root.crt) and name the host. verify-ca, when asked for
//    explicitly, is kept.
//  - disable, allow and prefer (libpq's default) are kept, with a warning
//    when a host is not this machine (a unix socket, localhost, 127.0.0.0/8
//    or ::1): the connection may cross a network unencrypted.
// The environment fills what the URL leaves out, as libpq reads it
// (PGSSLMODE, PGREQUIRESSL, PGSSLROOTCERT, PGHOST, PGHOSTADDR).

// The URL's own values of the keywords that decide it ("" when absent).
struct tls_settings {
    std::string sslmode{}, requiressl{}, sslrootcert{}, host{}, hostaddr{};
};
struct tls_decision {
    std::string sslmode;  // url_parts::sslmode
    std::string warning;  // url_parts::tls_warning
};
// `getenv`: the environment's lookup (::getenv, or a table in tests).
tls_decision decide_tls(const tls_settings& url, const std::function<const char*(const char*)>& getenv);
// Whether a libpq host (or hostaddr) entry is this machine: empty (the
// default unix socket), a socket directory, localhost, 127.0.0.0/8, ::1.
bool is_local_host(std::string_view host);

// Checks the scheme (postgresql:// or postgres://) and finds the
// credentials, so that messages can be scrubbed of them. libpq parses the
// rest (its own URI syntax, including ?sslmode=... and other connection
// parameters).
error_code split_url(std::string_view url, url_parts& out, std::string& why);

// `text` with every occurrence of each of the URL's secrets replaced by
// "***".
std::string scrub(std::string text, const url_parts& url);

// ---- the lock's key ----

// The advisory key of a lock name: FNV-1a 64 of "corolock:" + name. Two
// names with one key exclude each other (never the reverse): slower, not
// unsafe; each keeps its own fence row.
std::int64_t advisory_key(std::string_view name) noexcept;
// pg_locks shows a bigint advisory key as classid (high 32 bits), objid
// (low 32 bits), objsubid 1.
std::uint32_t key_classid(std::int64_t key) noexcept;
std::uint32_t key_objid(std::int64_t key) noexcept;

// The application_name of a session while it acts for an owner; the
// fixture's owners() and people read it in pg_stat_activity.
std::string application_name(std::string_view owner_id);
inline constexpr std::string_view application_prefix = "corolock:";

// ---- statements ----

struct statement {
    std::string_view sql;
    std::vector<std::optional<std::string>> params;  // nullopt: NULL
    bool describe = false;  // the answer keeps column names and the command tag
};

// Once per new session: READ COMMITTED, synchronous commit, no statement or
// lock timeout, no idle timeout yet, and a check for a closed client
// connection every 250 ms while a statement runs (so a waiter whose
// connection was closed leaves the server's lock queue).
statement session_setup();
// Once per backend, on its first session: the table, unless the
// search_path finds one already (in any of its schemas). Its errors
// "already exists" (a race with another process) count as success: see
// ddl_ok().
statement create_table();
bool ddl_ok(std::string_view sqlstate) noexcept;
// Whether the table is there (in the search_path), for a role that may
// not create it: without CREATE on the schema even create_table()'s IF NOT
// EXISTS is refused (42501), so a table made beforehand by its owner is
// looked for instead (decide_table_exists).
statement table_exists();

// Milliseconds for a PostgreSQL timeout setting: rounded up, at least 1.
std::string timeout_ms(std::chrono::steady_clock::duration d);

// Refuses at once when another session holds the lock.
statement try_acquire(std::string_view name, std::chrono::steady_clock::duration lease,
                      std::string_view holder, std::string_view owner_id);
// Before wait_acquire, on the same session: its lock_timeout (zero: none).
statement wait_setup(std::optional<std::chrono::steady_clock::duration> wait,
                     std::string_view owner_id);
// Waits in the server's lock queue for the lock.
statement wait_acquire(std::string_view name, std::chrono::steady_clock::duration lease,
                       std::string_view holder);
// A re-entry on the holding session: a new fence (and a renewal).
statement reenter(std::string_view name);
// A renewal: any statement resets the session's idle timer.
statement renew();
statement release(std::string_view name);
// The application_name of every session holding (granted) or waiting for
// the lock's advisory key.
statement sessions_of(std::string_view name, bool granted_only);
// Cancels the statement running on another session of the same user.
statement cancel_backend(int pid);

// A caller's transaction in the lock's session (corolock/locked_sql.hpp):
// BEGIN, locked_check, the caller's statements, locked_check again, COMMIT
// (or ROLLBACK). The check locks the name's fence row FOR UPDATE, so no
// later holder's grant (which bumps that row) can come before this
// transaction ends, and bounds the session's idle time inside it by the lease.
statement begin_transaction();
statement locked_check(std::string_view name, std::uint64_t fence,
                       std::chrono::steady_clock::duration lease);
statement commit_transaction();
statement rollback_transaction();
// Why a caller's statement is refused before it is sent (transaction
// control, COPY, a NUL byte), or "" when it may run. Reads the first
// keyword past blanks and comments; the transaction's state after each
// statement is checked as well.
std::string refuse_statement(std::string_view sql, const std::vector<std::optional<std::string>>& params);

// corolock status: the sessions holding (granted) or waiting for the
// lock's advisory key, the holder first ...
statement lock_sessions(std::string_view name);
// ... and the name's row with the server's clock now, in microseconds (an
// error 42P01 when the table was never made: no lock was ever taken).
statement lock_row(std::string_view name);
// Up to `limit` names with a row after `after` (empty: from the first), in
// byte order (42P01 when the table was never made), and the advisory keys
// granted now, as (classid, objid) rows: list reads the keys once, then
// the names page by page, and looks at those whose key is granted.
statement lock_names(std::string_view after, std::size_t limit);
statement granted_keys();
// Ends the session `pid` (pg_terminate_backend) only if it still holds the
// name's advisory key and the name's fence is still `fence`: the tenure
// status read, and no later one. One row "t" when it has ended (the
// statement waits up to 3 s for that: the lock is free when it answers),
// none when that tenure is over.
statement terminate_holder(std::string_view name, int pid, std::uint64_t fence);

// ---- answers ----

// A statement's answer as the shell hands it over: rows of nullable text,
// or the server's SQLSTATE, or a transport failure.
struct answer {
    error_code transport;  // connection_lost, timeout, client_stopped, ...
    std::string sqlstate;  // the server's error; empty: success
    std::string message;
    std::vector<std::vector<std::optional<std::string>>> rows;
    // With statement::describe only:
    std::vector<std::string> columns;
    std::string command_tag;
    std::uint64_t affected = 0;

    bool ok() const noexcept { return !transport && sqlstate.empty(); }
};

struct acquire_outcome {
    enum class kind {
        granted,    // fence is the token
        refused,    // held by another session (try)
        timed_out,  // lock_timeout: the wait ran out on the server
        cancelled,  // our own pg_cancel_backend ended the wait
        failed,     // error: the session must be closed (it may hold the lock)
    } what = kind::failed;
    std::uint64_t fence = 0;
    error_code error;
};
acquire_outcome decide_acquire(const answer& a);

// A re-entry's answer: the new fence, or nullopt (the tenure is lost).
std::optional<std::uint64_t> decide_reenter(const answer& a);

// A release's answer on a live tenure: success, or how it failed.
// Anything but an answered "true" means the session's lock is in doubt:
// the shell closes the session, which frees whatever it held.
error_code decide_release(const answer& a, bool past_deadline);

// A release of a tenure already lost: who holds the lock now decides it.
// `holders` is sessions_of(name, true)'s answer.
error_code decide_lost_release(const answer& holders);

// What status reads from lock_sessions' and lock_row's answers.
struct lock_report {
    bool held = false;
    std::string owner;        // the holder's owner id (its session's application_name)
    int pid = 0;              // the holding session's server process
    std::size_t waiting = 0;  // sessions queued for the key
    std::uint64_t fence = 0;  // the name's last fence (0: never taken)
    std::string holder;       // the row's holder record, as stored
    std::int64_t server_now_us = 0;
};
// Fails with the statements' error (a missing table is no error).
error_code decide_status(const answer& sessions, const answer& row, lock_report& out);

// The error a caller sees for a failed statement.
error_code error_of(const answer& a);

// Whether table_exists()'s answer says the table is there.
bool decide_table_exists(const answer& a);

// Whether terminate_holder's answer says the session was ended.
bool decide_terminated(const answer& a);

// Whether locked_check's answer says the session holds the lock with `fence`.
bool decide_locked_check(const answer& a);

}  // namespace corolock::detail::pg
