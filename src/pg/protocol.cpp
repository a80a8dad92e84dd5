#include "pg/protocol.hpp"

#include "core/credentials.hpp"

#include <boost/asio/ip/address_v4.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace corolock::detail::pg {

namespace {

void replace_all(std::string& text, const std::string& what) {
    if (what.empty()) return;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 3))
        text.replace(at, what.size(), "***");
}

// The server's time in microseconds: the floor of every fence, as of the
// Redis tokens (max(last + 1, server time in µs), docs/safety.md): a lock
// row lost (deleted, or a failover to a standby behind) does not make the
// next fence repeat one handed out before, given a server clock that does
// not step back.
#define COROLOCK_PG_NOW_US "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"

// The upsert that mints a fence, fed by the CTE "l" (got: the lock was
// taken by this statement; us: the server's time read after taking it, in
// l's own target list, so never at the start of a wait). $1 name, $3
// holder argument. Its row's holder record starts with that time, as the
// Redis hash's does.
#define COROLOCK_PG_FENCE                                                                   \
    "f AS (INSERT INTO corolock_locks AS t (name, fence, holder) "                          \
    "SELECT $1, l.us, l.us || ' ' || $3 FROM l WHERE l.got "                                \
    "ON CONFLICT (name) DO UPDATE SET fence = GREATEST(t.fence + 1, EXCLUDED.fence), "      \
    "holder = EXCLUDED.holder "                                                             \
    "RETURNING t.fence) "

}  // namespace

error_code split_url(std::string_view url, url_parts& out, std::string& why) {
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
            why = "the URL contains whitespace or a control character";
            return error::invalid_url;
        }
    const auto scheme_end = url.find("://");
    const auto scheme = url.substr(0, scheme_end == std::string_view::npos ? 0 : scheme_end);
    if (!iequals(scheme, "postgresql") && !iequals(scheme, "postgres")) {
        why = "not a PostgreSQL URL: expected postgresql://user:password@host:port/database";
        return error::invalid_url;
    }
    url_parts p;
    p.conninfo = "postgresql" + std::string(url.substr(scheme_end));
    auto secret = [&p](std::string_view raw) {
        auto add = [&p](std::string s) {
            if (!s.empty() && std::find(p.secrets.begin(), p.secrets.end(), s) == p.secrets.end())
                p.secrets.push_back(std::move(s));
        };
        add(std::string(raw));
        add(percent_decode(raw));
    };
    const auto rest = url.substr(scheme_end + 3);
    auto password_of = [&](std::string_view userinfo) {
        if (const auto colon = userinfo.find(':'); colon != std::string_view::npos)
            secret(userinfo.substr(colon + 1));
    };
    // libpq's reading: the user part runs to the first '@' before any '/'
    // ('?' and '#' included: "u:p?w@h" is password "p?w"), and the query
    // starts after it.
    std::size_t hosts_at = 0;
    if (const auto end = rest.find_first_of("@/"); end != std::string_view::npos && rest[end] == '@') {
        password_of(rest.substr(0, end));
        hosts_at = end + 1;
    }
    // RFC 3986's (the last '@' before the path or query), which a user who
    // left an '@' unescaped in the password meant.
    const auto authority = rest.substr(0, rest.find_first_of("/?"));
    if (const auto at = authority.rfind('@'); at != std::string_view::npos)
        password_of(authority.substr(0, at));
    // The query's credentials, as libpq reads its keys (%-decoded).
    if (const auto q = rest.find('?', hosts_at); q != std::string_view::npos) {
        std::string_view query = rest.substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const auto item = query.substr(0, amp);
            if (const auto eq = item.find('='); eq != std::string_view::npos &&
                                                is_credential_query_key(percent_decode(item.substr(0, eq))))
                secret(item.substr(eq + 1));
            if (amp == std::string_view::npos) break;
            query.remove_prefix(amp + 1);
        }
    }
    out = std::move(p);
    why.clear();
    return {};
}

bool is_local_host(std::string_view host) {
    if (host.empty() || host.front() == '/' || host.front() == '@') return true;  // unix sockets
    if (iequals(host, "localhost") || host == "::1" || host == "[::1]") return true;
    boost::system::error_code ec;
    const auto v4 = boost::asio::ip::make_address_v4(std::string(host), ec);
    return !ec && (v4.to_uint() >> 24) == 127;
}

tls_decision decide_tls(const tls_settings& url,
                        const std::function<const char*(const char*)>& getenv) {
    const auto env = [&](const char* name) {
        const char* v = getenv(name);
        return std::string(v != nullptr ? v : "");
    };
    std::string mode = url.sslmode;
    if (mode.empty() && url.requiressl == "1") mode = "require";
    if (mode.empty()) mode = env("PGSSLMODE");
    if (mode.empty() && env("PGREQUIRESSL") == "1") mode = "require";
    const bool root_given = !url.sslrootcert.empty() || !env("PGSSLROOTCERT").empty();
    tls_decision d;
    if (mode == "require" || (mode.empty() && root_given)) {
        d.sslmode = "verify-full";
        return d;
    }
    if (mode.empty()) mode = "prefer";  // libpq's default
    if (mode != "disable" && mode != "allow" && mode != "prefer") return d;  // verify-*, or libpq's error
    // hostaddr, when given, is where libpq connects; host names it.
    std::string hosts = !url.hostaddr.empty() ? url.hostaddr : url.host;
    if (hosts.empty()) hosts = env("PGHOSTADDR");
    if (hosts.empty()) hosts = env("PGHOST");
    std::string_view rest = hosts;
    for (;;) {
        const auto comma = rest.find(',');
        const auto one = rest.substr(0, comma);
        if (!is_local_host(one)) {
            d.warning = "the PostgreSQL connection to " + std::string(one) +
                        (mode == "disable" ? " is not encrypted"
                                           : " may be unencrypted and is not verified") +
                        " (sslmode=" + mode +
                        "): add ?sslmode=verify-full&sslrootcert=FILE to encrypt it and check "
                        "the server (docs/security.md)";
            break;
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    return d;
}

std::string scrub(std::string text, const url_parts& url) {
    // Longest first: a secret inside another ("pa" in "pa@ss") would leave
    // the rest of the longer one.
    std::vector<const std::string*> order;
    for (const auto& s : url.secrets) order.push_back(&s);
    std::stable_sort(order.begin(), order.end(),
                     [](const std::string* a, const std::string* b) { return a->size() > b->size(); });
    for (const auto* s : order) replace_all(text, *s);
    return text;
}

std::int64_t advisory_key(std::string_view name) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    const auto mix = [&h](std::string_view s) {
        for (unsigned char c : s) {
            h ^= c;
            h *= 0x100000001b3ULL;
        }
    };
    mix("corolock:");
    mix(name);
    return static_cast<std::int64_t>(h);
}

std::uint32_t key_classid(std::int64_t key) noexcept {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(key) >> 32);
}
std::uint32_t key_objid(std::int64_t key) noexcept {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(key) & 0xffffffffULL);
}

std::string application_name(std::string_view owner_id) {
    return std::string(application_prefix) + std::string(owner_id);
}

statement session_setup() {
    return {"SELECT set_config('default_transaction_isolation', 'read committed', false), "
            "set_config('synchronous_commit', 'on', false), "
            "set_config('statement_timeout', '0', false), "
            "set_config('lock_timeout', '0', false), "
            "set_config('idle_in_transaction_session_timeout', '0', false), "
            "set_config('idle_session_timeout', '0', false), "
            "set_config('client_connection_check_interval', '250', false)",
            {}};
}

statement create_table() {
    // Made only when no schema of the search_path has it: IF NOT EXISTS
    // looks in the first schema only, and with a role named corolock
    // ("$user" first) the schema corolock of the fence and election tables
    // would get a second, empty corolock_locks that shadows the first.
    return {"DO $$BEGIN IF to_regclass('corolock_locks') IS NULL THEN "
            "CREATE TABLE corolock_locks (name text PRIMARY KEY, "
            "fence bigint NOT NULL, holder text NOT NULL DEFAULT ''); END IF; END$$",
            {}};
}

// 42P07 duplicate_table, 42710 duplicate_object (its row type), 23505
// unique_violation (pg_type's index): another session created the table at
// the same moment.
bool ddl_ok(std::string_view sqlstate) noexcept {
    return sqlstate.empty() || sqlstate == "42P07" || sqlstate == "42710" || sqlstate == "23505";
}

statement table_exists() { return {"SELECT to_regclass('corolock_locks') IS NOT NULL", {}}; }

bool decide_table_exists(const answer& a) {
    return a.ok() && a.rows.size() == 1 && !a.rows[0].empty() && a.rows[0][0] == "t";
}

std::string timeout_ms(std::chrono::steady_clock::duration d) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
    return std::to_string(std::max<long long>(ms, 1));
}

statement try_acquire(std::string_view name, std::chrono::steady_clock::duration lease,
                      std::string_view holder, std::string_view owner_id) {
    // $1 name, $2 key, $3 holder, $4 lease ms, $5 application_name. A
    // refused try leaves the idle timeout at 0: the session goes back to
    // the pool.
    return {"WITH l AS (SELECT pg_try_advisory_lock($2::bigint) AS got, " COROLOCK_PG_NOW_US
            " AS us), " COROLOCK_PG_FENCE
            "SELECT l.got, (SELECT fence FROM f), "
            "set_config('idle_session_timeout', CASE WHEN l.got THEN $4 ELSE '0' END, false), "
            "set_config('idle_in_transaction_session_timeout', CASE WHEN l.got THEN $4 ELSE '0' END, false), "
            "set_config('statement_timeout', CASE WHEN l.got THEN $4 ELSE '0' END, false), "
            "set_config('application_name', $5, false), "
            "set_config('lock_timeout', '0', false) FROM l",
            {std::string(name), std::to_string(advisory_key(name)), std::string(holder),
             timeout_ms(lease), application_name(owner_id)}};
}

statement wait_setup(std::optional<std::chrono::steady_clock::duration> wait,
                     std::string_view owner_id) {
    return {"SELECT set_config('lock_timeout', $1, false), set_config('application_name', $2, false)",
            {wait ? timeout_ms(*wait) : std::string("0"), application_name(owner_id)}};
}

statement wait_acquire(std::string_view name, std::chrono::steady_clock::duration lease,
                       std::string_view holder) {
    // lock_timeout (wait_setup's) bounded the wait only: once held it is
    // 0 again, or the caller's locked statements would time out their own
    // lock waits after the acquire's wait.
    return {"WITH l AS (SELECT true AS got, " COROLOCK_PG_NOW_US " AS us "
            "FROM pg_advisory_lock($2::bigint)), " COROLOCK_PG_FENCE
            "SELECT l.got, (SELECT fence FROM f), "
            "set_config('idle_session_timeout', $4, false), "
            "set_config('idle_in_transaction_session_timeout', $4, false), "
            "set_config('statement_timeout', $4, false), "
            "set_config('lock_timeout', '0', false) FROM l",
            {std::string(name), std::to_string(advisory_key(name)), std::string(holder),
             timeout_ms(lease)}};
}

statement reenter(std::string_view name) {
    return {"UPDATE corolock_locks SET fence = GREATEST(fence + 1, " COROLOCK_PG_NOW_US ") "
            "WHERE name = $1 RETURNING fence",
            {std::string(name)}};
}

statement renew() { return {"SELECT 1", {}}; }

statement release(std::string_view name) {
    return {"SELECT pg_advisory_unlock($1::bigint), set_config('idle_session_timeout', '0', false), "
            "set_config('idle_in_transaction_session_timeout', '0', false), "
            "set_config('statement_timeout', '0', false)",
            {std::to_string(advisory_key(name))}};
}

statement sessions_of(std::string_view name, bool granted_only) {
    const auto key = advisory_key(name);
    return {"SELECT a.application_name FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid "
            "WHERE k.locktype = 'advisory' AND k.classid = $1::oid AND k.objid = $2::oid "
            "AND k.objsubid = 1 AND (k.granted OR NOT $3::boolean)",
            {std::to_string(key_classid(key)), std::to_string(key_objid(key)),
             granted_only ? "true" : "false"}};
}

statement cancel_backend(int pid) {
    return {"SELECT pg_cancel_backend($1::int)", {std::to_string(pid)}};
}

statement lock_sessions(std::string_view name) {
    const auto key = advisory_key(name);
    return {"SELECT k.granted, a.application_name, k.pid FROM pg_locks k "
            "LEFT JOIN pg_stat_activity a ON a.pid = k.pid "
            "WHERE k.locktype = 'advisory' AND k.classid = $1::oid AND k.objid = $2::oid "
            "AND k.objsubid = 1 ORDER BY k.granted DESC",
            {std::to_string(key_classid(key)), std::to_string(key_objid(key))}};
}

statement lock_row(std::string_view name) {
    return {"SELECT fence, holder, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint "
            "FROM corolock_locks WHERE name = $1",
            {std::string(name)}};
}

statement lock_names(std::string_view after, std::size_t limit) {
    return {"SELECT name FROM corolock_locks WHERE name COLLATE \"C\" > $1 "
            "ORDER BY name COLLATE \"C\" LIMIT $2::bigint",
            {std::string(after), std::to_string(limit)}};
}

statement granted_keys() {
    return {"SELECT classid, objid FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted",
            {}};
}

statement terminate_holder(std::string_view name, int pid, std::uint64_t fence) {
    // $1 name, $2 $3 the key's halves, $4 the fence read, $5 the pid.
    const auto key = advisory_key(name);
    // The timeout (PostgreSQL 14+) waits for the session to end, so the
    // lock is free when the break answers (false: not ended within 3 s).
    return {"SELECT pg_terminate_backend(k.pid, 3000) FROM pg_locks k "
            "JOIN corolock_locks f ON f.name = $1 AND f.fence = $4::bigint "
            "WHERE k.locktype = 'advisory' AND k.classid = $2::oid AND k.objid = $3::oid "
            "AND k.objsubid = 1 AND k.granted AND k.pid = $5::int",
            {std::string(name), std::to_string(key_classid(key)), std::to_string(key_objid(key)),
             std::to_string(fence), std::to_string(pid)}};
}

bool decide_terminated(const answer& a) {
    return a.ok() && a.rows.size() == 1 && !a.rows[0].empty() && a.rows[0][0] == "t";
}

statement begin_transaction() { return {"BEGIN", {}}; }

statement locked_check(std::string_view name, std::uint64_t fence,
                       std::chrono::steady_clock::duration lease) {
    // $1 name, $2 $3 the key's halves, $4 the tenure's fence, $5 lease ms.
    // The server-side lease again (protocol.hpp, "lease"): a
    // caller's SET of one of them commits with the transaction.
    const auto key = advisory_key(name);
    return {"SELECT f.fence = $4::bigint AND EXISTS (SELECT 1 FROM pg_locks k "
            "WHERE k.locktype = 'advisory' AND k.classid = $2::oid AND k.objid = $3::oid "
            "AND k.objsubid = 1 AND k.granted AND k.pid = pg_backend_pid()), "
            "set_config('idle_in_transaction_session_timeout', $5, false), "
            "set_config('statement_timeout', $5, false), "
            "set_config('idle_session_timeout', $5, false) "
            "FROM corolock_locks f WHERE f.name = $1 FOR UPDATE",
            {std::string(name), std::to_string(key_classid(key)), std::to_string(key_objid(key)),
             std::to_string(fence), timeout_ms(lease)}};
}

statement commit_transaction() { return {"COMMIT", {}, true}; }
statement rollback_transaction() { return {"ROLLBACK", {}}; }

bool decide_locked_check(const answer& a) {
    return a.ok() && a.rows.size() == 1 && !a.rows[0].empty() && a.rows[0][0] == "t";
}

std::string refuse_statement(std::string_view sql,
                             const std::vector<std::optional<std::string>>& params) {
    const auto has_nul = [](std::string_view v) { return v.find('\0') != std::string_view::npos; };
    if (has_nul(sql)) return "the statement's text contains a NUL byte";
    for (const auto& p : params)
        if (p && has_nul(*p)) return "a parameter contains a NUL byte (text values cannot)";
    std::size_t i = 0;
    for (int skipped = 0; skipped < 10'000 && i < sql.size(); ++skipped) {
        if (std::isspace(static_cast<unsigned char>(sql[i])) != 0) {
            ++i;
        } else if (sql.substr(i, 2) == "--") {
            i = std::min(sql.size(), sql.find('\n', i));
        } else if (sql.substr(i, 2) == "/*") {
            // PostgreSQL's block comments nest.
            int depth = 0;
            do {
                if (sql.substr(i, 2) == "/*") ++depth, i += 2;
                else if (sql.substr(i, 2) == "*/") --depth, i += 2;
                else ++i;
            } while (depth > 0 && i < sql.size());
        } else {
            break;
        }
    }
    std::string word;
    for (; i < sql.size() && std::isalpha(static_cast<unsigned char>(sql[i])) != 0; ++i)
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(sql[i])));
    static constexpr std::string_view refused[] = {"begin",   "start", "commit",  "end",
                                                   "rollback", "abort", "prepare", "copy"};
    for (auto r : refused)
        if (word == r)
            return "a statement may not be " + std::string(r == "copy" ? "COPY" : "transaction control") +
                   ": corolock runs the transaction";
    return {};
}

error_code decide_status(const answer& sessions, const answer& row, lock_report& out) {
    out = {};
    if (!sessions.ok()) return error_of(sessions);
    // 42P01 undefined_table: no corolock ever took a lock in this database.
    if (!row.ok() && row.sqlstate != "42P01") return error_of(row);
    for (const auto& r : sessions.rows) {
        if (r.size() < 3) return error::unexpected_reply;
        if (r[0] == "t" && !out.held) {
            out.held = true;
            // A session of something else than corolock: no owner id.
            const std::string app = r[1].value_or("");
            if (std::string_view(app).starts_with(application_prefix))
                out.owner = app.substr(application_prefix.size());
            out.pid = std::atoi(r[2].value_or("0").c_str());
        } else if (r[0] != "t") {
            ++out.waiting;
        }
    }
    if (row.ok() && !row.rows.empty()) {
        const auto& r = row.rows.front();
        if (r.size() < 3) return error::unexpected_reply;
        out.fence = std::strtoull(r[0].value_or("0").c_str(), nullptr, 10);
        out.holder = r[1].value_or("");
        out.server_now_us = std::strtoll(r[2].value_or("0").c_str(), nullptr, 10);
    }
    return {};
}

error_code error_of(const answer& a) {
    if (a.transport) return a.transport;
    if (a.sqlstate.empty()) return {};
    // Class 28: invalid authorization; 57P01..03: the server is shutting
    // down or the session was terminated; 08: connection exceptions.
    if (a.sqlstate.rfind("28", 0) == 0) return error::auth_failed;
    if (a.sqlstate.rfind("57P", 0) == 0 || a.sqlstate.rfind("08", 0) == 0)
        return error::connection_lost;
    // 42501 insufficient_privilege: the role lacks a grant (the server's
    // message, which names it, is the caller's diagnostic).
    if (a.sqlstate == "42501") return error::no_permission;
    return error::server_error;
}

acquire_outcome decide_acquire(const answer& a) {
    acquire_outcome o;
    if (a.sqlstate == "55P03") {
        o.what = acquire_outcome::kind::timed_out;
        return o;
    }
    if (a.sqlstate == "57014") {  // query_canceled
        o.what = acquire_outcome::kind::cancelled;
        return o;
    }
    if (!a.ok()) {
        o.error = error_of(a);
        return o;
    }
    if (a.rows.size() != 1 || a.rows[0].size() < 2 || !a.rows[0][0]) {
        o.error = error::unexpected_reply;
        return o;
    }
    const auto& row = a.rows[0];
    if (*row[0] != "t") {
        o.what = acquire_outcome::kind::refused;
        return o;
    }
    std::uint64_t fence = 0;
    if (!row[1] || std::from_chars(row[1]->data(), row[1]->data() + row[1]->size(), fence).ec !=
                       std::errc() ||
        fence == 0) {
        o.error = error::unexpected_reply;
        return o;
    }
    o.what = acquire_outcome::kind::granted;
    o.fence = fence;
    return o;
}

std::optional<std::uint64_t> decide_reenter(const answer& a) {
    if (!a.ok() || a.rows.size() != 1 || a.rows[0].empty() || !a.rows[0][0]) return std::nullopt;
    std::uint64_t fence = 0;
    const auto& v = *a.rows[0][0];
    if (std::from_chars(v.data(), v.data() + v.size(), fence).ec != std::errc() || fence == 0)
        return std::nullopt;
    return fence;
}

error_code decide_release(const answer& a, bool past_deadline) {
    const bool unlocked = a.ok() && a.rows.size() == 1 && !a.rows[0].empty() && a.rows[0][0] &&
                          *a.rows[0][0] == "t";
    if (past_deadline) return error::expired;
    if (unlocked) return {};
    if (a.ok()) return error::expired;  // answered "not held": the session lost it
    return error_of(a);
}

error_code decide_lost_release(const answer& holders) {
    if (!holders.ok()) return error_of(holders);
    return holders.rows.empty() ? error_code(error::expired) : error_code(error::not_owner);
}

}  // namespace corolock::detail::pg
