// corolock status and corolock break: one script run each on Redis, a
// range (and a lease look-up or revoke) on etcd, a listing of the lock's
// directory (and a delete) on ZooKeeper, pg_locks and the name's row (and
// a pg_terminate_backend) on PostgreSQL; corolock list: SCAN and a script
// per lock on Redis (every primary of a Cluster), paged ranges and a lease
// look-up per lock on etcd, the lock directories (ZooKeeper) or the names
// of corolock_locks (PostgreSQL) and a status of each.
#include "cli.hpp"

#include "etcd/etcd_admin.hpp"

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/printable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <optional>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

// status's exit status, as test(1): 0 when the lock is held, 1 when free.
int status_exit(bool held) { return held ? exit_status::ok : exit_status::not_held; }


// A duration in seconds with milliseconds ("12.345"): list's one unit.
std::string seconds(std::chrono::milliseconds d) {
    const auto ms = d.count();
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ms < 0 ? "-" : "",
                  static_cast<long long>(std::llabs(ms) / 1000),
                  static_cast<long long>(std::llabs(ms) % 1000));
    return buf;
}

// One lock's line of corolock list: a field per column of
// list_column_names() (help.cpp documents them), the same on every backend;
// '-' where a column does not apply. Fields are escaped by the caller.
struct list_row {
    std::string name, kind = "mutex", state = "held", holder = "-", since = "-", held = "-",
                      ttl = "-", delay = "-", waiters = "-", permits = "-", label = "-";
    void set_holder(const lock_holder& h) {
        holder = holder_text(h);
        since = format_time(h.since);
        held = seconds(h.held_for);
        if (!h.label.empty()) label = printable(h.label);
    }
    std::vector<std::string> fields() const {
        return {printable(name), kind, state, holder, since, held, ttl, delay, waiters, permits, label};
    }
};

// The header and the rows in aligned columns, two spaces apart; the last
// column (LABEL, which may hold spaces) unpadded.
void print_list(const std::vector<list_row>& rows) {
    const auto names = list_column_names();
    std::vector<std::vector<std::string>> table;
    table.emplace_back(names.begin(), names.end());
    for (const auto& r : rows) table.push_back(r.fields());
    std::vector<std::size_t> width(names.size(), 0);
    for (const auto& line : table)
        for (std::size_t i = 0; i < line.size() && i < width.size(); ++i)
            width[i] = std::max(width[i], line[i].size());
    for (const auto& line : table) {
        std::string out;
        for (std::size_t i = 0; i < line.size(); ++i) {
            out += line[i];
            if (i + 1 < line.size()) out.append(width[i] - line[i].size() + 2, ' ');
        }
        std::printf("%s\n", out.c_str());
    }
}

// Runs body(*service) on a single-threaded io_context, then stops the
// service (whose reconnect loop never runs out of work by itself). make()
// throwing is a bad configuration.
template <class Service, class Make>
int with_service(Make make, const std::function<asio::awaitable<int>(Service&)>& body) {
    asio::io_context ioc(1);
    std::unique_ptr<Service> svc;
    try {
        svc = make(ioc.get_executor());
    } catch (const std::exception& e) {
        report_error(std::string("bad configuration: ") + e.what());
        return exit_status::usage;
    }
    int status = exit_status::os_error;
    asio::co_spawn(ioc, body(*svc), [&](std::exception_ptr e, int result) {
        status = e ? report_internal_error(e) : result;
        svc->stop();
        ioc.stop();
    });
    ioc.run();
    return status;
}

// Runs body(client) on a fresh client and returns its exit status. Every
// wait inside is bounded by the client's command timeout, so this returns
// within a few seconds whatever Redis does.
int with_client(const common_options& o,
                const std::function<asio::awaitable<int>(client&)>& body) {
    return with_service<client>(
        [&](const asio::any_io_executor& ex) { return std::make_unique<client>(ex, tool_config(o)); },
        body);
}

// A Redis Cluster cannot be a client (one connection): status, break and
// list run on a backend from the same config instead, whose scripts go to
// the primary serving the lock's slot (list: SCAN on every primary). It has
// no connection of its own to PING first, so its first command is the
// reachability check: a NOPERM there reads as rejected credentials, and
// the last connection attempt's own text is not at hand (the error's is
// shown).
asio::awaitable<error_code> first_check(client& c) { co_return co_await check_reachable(c); }
asio::awaitable<error_code> first_check(backend&) { co_return error_code{}; }
std::string cause_of(const client& c) { return c.last_error().message; }
std::string cause_of(const backend&) { return {}; }
bool pinged(const client&) { return true; }
bool pinged(const backend&) { return false; }

// Runs body(client), or body(backend) for a Redis Cluster; as with_client.
template <class Body>
int with_redis(const common_options& o, const Body& body) {
    if (o.cfg.mode == topology::cluster)
        return with_service<backend>(
            [&](const asio::any_io_executor& ex) {
                return std::make_unique<backend>(ex, tool_config(o));
            },
            body);
    return with_client(o, body);
}

// Runs body(admin) on a fresh single-threaded etcd admin; as with_client.
int with_etcd(const common_options& o,
              const std::function<asio::awaitable<int>(detail::etcd::admin&)>& body) {
    return with_service<detail::etcd::admin>(
        [&](const asio::any_io_executor& ex) { return make_etcd_admin(ex, o); }, body);
}

// The holder record's fields as JSON members (",\"host\":...,\"since\":..."),
// null when the lock records none; with held_for_ms when asked.
std::string holder_json(const std::optional<lock_holder>& h, bool held_for) {
    if (!h)
        return std::string(",\"host\":null,\"pid\":null,\"label\":null,\"since\":null") +
               (held_for ? ",\"held_for_ms\":null" : "");
    return ",\"host\":" + json_string(h->host) + ",\"pid\":" + std::to_string(h->pid) +
           ",\"label\":" + json_string(h->label) + ",\"since\":" + json_string(format_time(h->since)) +
           (held_for ? ",\"held_for_ms\":" + std::to_string(h->held_for.count()) : "");
}

std::string etcd_key_json(const detail::etcd::lock_key& k) {
    return "{\"owner\":" + json_string(k.owner) + ",\"value\":" + json_string(k.value) +
           ",\"create_revision\":" + std::to_string(k.create_revision) +
           ",\"mod_revision\":" + std::to_string(k.mod_revision) +
           ",\"lease\":" + std::to_string(k.lease) + holder_json(k.holder, false) + "}";
}

// The JSON object of one lock on etcd, shared by status --json and list --json.
std::string etcd_status_json(std::string_view name, const detail::etcd::admin_lock_status& st) {
    // As on Redis: 0 when not held, -1 without a live lease.
    const long long ttl_s = st.ttl.count();
    const long long ttl_ms = !st.held ? 0 : ttl_s < 0 ? -1 : ttl_s * 1000;
    std::string line = "{\"name\":" + json_string(name) +
                       ",\"backend\":\"etcd\",\"kind\":\"mutex\",\"held\":" +
                       (st.held ? "true" : "false") +
                       ",\"owner\":" + json_string(st.held ? st.holder.owner : "") +
                       ",\"ttl_ms\":" + std::to_string(ttl_ms) +
                       ",\"last_token\":" + std::to_string(st.held ? st.holder.mod_revision : 0) +
                       holder_json(st.held ? st.holder.holder : std::nullopt, true) +
                       ",\"holder\":" + (st.held ? etcd_key_json(st.holder) : "null") +
                       ",\"waiters\":[";
    for (std::size_t i = 0; i < st.waiters.size(); ++i) {
        if (i > 0) line += ',';
        line += etcd_key_json(st.waiters[i]);
    }
    return line + "],\"revision\":" + std::to_string(st.revision) + "}";
}

std::string lease_hex(std::int64_t lease) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(lease));
    return buf;
}

int etcd_status(const status_options& o) {
    return with_etcd(o.common, [&o](detail::etcd::admin& a) -> asio::awaitable<int> {
        auto [ec, st] = co_await a.status(o.name);
        if (ec)
            co_return report_redis_failure(o.common, "status of lock '" + o.name + "'", ec,
                                           a.last_error().message);
        if (o.json) {
            const std::string line = etcd_status_json(o.name, st) + "\n";
            std::fputs(line.c_str(), stdout);
            co_return status_exit(st.held);
        }
        std::printf("lock:       %s\n", printable(o.name).c_str());
        std::printf("kind:       mutex\n");
        std::printf("held:       %s\n", st.held ? "yes" : "no");
        if (!st.held) {
            std::printf("key prefix: %s\n", printable(a.key_prefix(o.name)).c_str());
            co_return exit_status::not_held;
        }
        std::printf("owner:      %s\n", printable(st.holder.owner).c_str());
        if (const auto& h = st.holder.holder) {
            std::printf("holder:     %s\n", holder_text(*h).c_str());
            std::printf("label:      %s\n", printable(h->label).c_str());
            std::printf("since:      %s (held for %s, by the hosts' clocks)\n",
                        format_time(h->since).c_str(), format_held_for(h->held_for).c_str());
        } else {
            std::printf("holder:     unknown (not recorded)\n");
            std::printf("value:      %s\n", printable(st.holder.value).c_str());
        }
        std::printf("created:    revision %lld\n", static_cast<long long>(st.holder.create_revision));
        if (st.holder.lease == 0)
            std::printf("ttl:        none (the key has no lease)\n");
        else if (st.ttl.count() < 0)
            std::printf("ttl:        none (lease %s is gone)\n", lease_hex(st.holder.lease).c_str());
        else
            std::printf("ttl:        %lld s (lease %s)\n", static_cast<long long>(st.ttl.count()),
                        lease_hex(st.holder.lease).c_str());
        std::printf("last token: %lld\n", static_cast<long long>(st.holder.mod_revision));
        std::printf("waiters:    %zu\n", st.waiters.size());
        for (const auto& w : st.waiters) {
            std::string who;
            if (w.holder)
                who = "; " + holder_text(*w.holder) + " waiting since " + format_time(w.holder->since);
            std::printf("  %s (created at revision %lld%s)\n", printable(w.owner).c_str(),
                        static_cast<long long>(w.create_revision), who.c_str());
        }
        co_return exit_status::ok;
    });
}

// The JSON object of one lock on ZooKeeper or PostgreSQL, shared by status
// --json and list --json.
std::string store_status_json(std::string_view name, bool zk, const store_lock_status& st) {
    std::string line = "{\"name\":" + json_string(name) + ",\"backend\":" +
                       (zk ? "\"zk\"" : "\"postgresql\"") +
                       ",\"kind\":\"mutex\",\"held\":" + (st.held ? "true" : "false") +
                       ",\"owner\":" + json_string(st.held ? st.owner : "") +
                       ",\"last_token\":" + std::to_string(st.last_token) +
                       holder_json(st.held ? st.holder : std::nullopt, true) +
                       ",\"waiters\":" + std::to_string(st.waiters);
    if (zk) line += ",\"node\":" + (st.held ? json_string(st.node) : std::string("null"));
    else line += ",\"session_pid\":" + (st.held ? std::to_string(st.session_pid) : std::string("null"));
    return line + "}";
}

// Runs body(admin) on ZooKeeper's or PostgreSQL's admin once it has its own
// session or connection; `doing` names the command in a failure's report.
int with_store(const common_options& o, const std::string& doing,
               const std::function<asio::awaitable<int>(store_admin&)>& body) {
    return with_service<store_admin>(
        [&](const asio::any_io_executor& ex) { return make_store_admin(ex, o); },
        [&](store_admin& a) -> asio::awaitable<int> {
            if (auto ec = co_await a.connect(); ec)
                co_return report_redis_failure(o, doing, ec, a.last_error());
            co_return co_await body(a);
        });
}

// status on ZooKeeper or PostgreSQL: one read of the lock (store_admin).
int store_status(const status_options& o) {
    const std::string doing = "status of lock '" + o.name + "'";
    return with_store(o.common, doing, [&](store_admin& a) -> asio::awaitable<int> {
        auto [ec, st] = co_await a.status(o.name);
        if (ec) co_return report_redis_failure(o.common, doing, ec, a.last_error());
        const bool zk = o.common.kind == url_kind::zk;
        // ZooKeeper: the holder's wall clock wrote since; PostgreSQL: the server's.
        const char* clocks = zk ? ", by the hosts' clocks" : "";
        if (o.json) {
            const std::string line = store_status_json(o.name, zk, st) + "\n";
            std::fputs(line.c_str(), stdout);
            co_return status_exit(st.held);
        }
        std::printf("lock:       %s\n", printable(o.name).c_str());
        std::printf("kind:       mutex\n");
        std::printf("held:       %s\n", st.held ? "yes" : "no");
        if (st.held) {
            std::printf("owner:      %s\n", printable(st.owner).c_str());
            if (const auto& h = st.holder) {
                std::printf("holder:     %s\n", holder_text(*h).c_str());
                std::printf("label:      %s\n", printable(h->label).c_str());
                std::printf("since:      %s (held for %s%s)\n", format_time(h->since).c_str(),
                            format_held_for(h->held_for).c_str(), clocks);
            } else {
                std::printf("holder:     unknown (not recorded)\n");
            }
            if (zk) std::printf("node:       %s\n", printable(st.node).c_str());
            else std::printf("session:    server pid %lld\n", static_cast<long long>(st.session_pid));
        }
        // ZooKeeper keeps no token for a free lock; PostgreSQL's row does.
        if (st.held || !zk)
            std::printf("last token: %llu\n", static_cast<unsigned long long>(st.last_token));
        std::printf("waiters:    %zu\n", st.waiters);
        co_return status_exit(st.held);
    });
}

// break on ZooKeeper (the holder's node deleted) or PostgreSQL (the
// holder's session ended): zk/zk_admin.hpp, pg/pg_admin.hpp.
int store_break(const break_options& o) {
    const std::string doing = "break lock '" + o.name + "'";
    return with_store(o.common, doing, [&](store_admin& a) -> asio::awaitable<int> {
        auto [ec, removed] = co_await a.break_lock(o.name);
        if (ec) {
            const int status = report_redis_failure(o.common, doing, ec, a.last_error());
            if (ec == error::connection_lost || ec == error::timeout)
                report_error("the break may or may not have happened; check with "
                             "'corolock status'");
            co_return status;
        }
        if (removed.held && o.common.kind == url_kind::zk)
            std::printf("removed lock %s held by %s (deleted its node %s)\n",
                        printable(o.name).c_str(), printable(removed.owner).c_str(),
                        printable(removed.node).c_str());
        else if (removed.held)
            std::printf("removed lock %s held by %s (ended its session, server pid %lld)\n",
                        printable(o.name).c_str(), printable(removed.owner).c_str(),
                        static_cast<long long>(removed.session_pid));
        else
            std::printf("lock %s was not held\n", printable(o.name).c_str());
        if (removed.held && removed.waiters > 0)
            std::printf("%zu waiters keep their places; the first takes the lock\n",
                        removed.waiters);
        co_return exit_status::ok;
    });
}

// list on ZooKeeper (every lock directory under the root) or PostgreSQL
// (every name of corolock_locks), each lock read as status reads it.
int store_list(const list_options& o) {
    const bool zk = o.common.kind == url_kind::zk;
    return with_store(o.common, "list locks", [&](store_admin& a) -> asio::awaitable<int> {
        auto [ec, list] = co_await a.list(o.pattern);
        if (ec) co_return report_redis_failure(o.common, "list locks", ec, a.last_error());
        if (o.json) {
            std::string out = "{\"locks\":[";
            for (std::size_t i = 0; i < list.locks.size(); ++i) {
                if (i > 0) out += ',';
                out += store_status_json(list.locks[i].name, zk, list.locks[i].status);
            }
            out += std::string("],\"truncated\":") + (list.truncated ? "true" : "false") +
                   ",\"backend\":" + (zk ? "\"zk\"" : "\"postgresql\"") + "}\n";
            std::fputs(out.c_str(), stdout);
        } else {
            // Every lock is a mutex, and its lease is its holder's session
            // (no TTL the admin can read).
            std::vector<list_row> rows;
            for (const auto& [name, st] : list.locks) {
                list_row r;
                r.name = name;
                if (!st.held) r.state = "free";
                if (st.holder) r.set_holder(*st.holder);
                r.waiters = std::to_string(st.waiters);
                rows.push_back(std::move(r));
            }
            print_list(rows);
        }
        if (list.truncated)
            report_warning("the listing stopped at a bound (time or locks); there may be more "
                           "held locks");
        co_return exit_status::ok;
    });
}

int etcd_break(const break_options& o) {
    return with_etcd(o.common, [&o](detail::etcd::admin& a) -> asio::awaitable<int> {
        auto [ec, removed] = co_await a.break_lock(o.name);
        if (ec) {
            const int status = report_redis_failure(o.common, "break lock '" + o.name + "'", ec,
                                                    a.last_error().message);
            if (ec == error::connection_lost || ec == error::timeout)
                report_error("the break may or may not have happened; check with "
                             "'corolock status'");
            co_return status;
        }
        if (removed.held)
            std::printf("removed lock %s held by %s (deleted its key)\n", printable(o.name).c_str(),
                        printable(removed.removed.owner).c_str());
        else
            std::printf("lock %s was not held\n", printable(o.name).c_str());
        co_return exit_status::ok;
    });
}

int etcd_list(const list_options& o) {
    return with_etcd(o.common, [&o](detail::etcd::admin& a) -> asio::awaitable<int> {
        detail::etcd::admin_list_options lo;
        lo.pattern = o.pattern;
        auto [ec, list] = co_await a.list(lo);
        if (ec)
            co_return report_redis_failure(o.common, "list locks", ec, a.last_error().message);
        if (o.json) {
            std::string out = "{\"locks\":[";
            for (std::size_t i = 0; i < list.locks.size(); ++i) {
                if (i > 0) out += ',';
                out += etcd_status_json(list.locks[i].name, list.locks[i].status);
            }
            out += std::string("],\"truncated\":") + (list.truncated ? "true" : "false") +
                   ",\"backend\":\"etcd\",\"revision\":" + std::to_string(list.revision) + "}\n";
            std::fputs(out.c_str(), stdout);
        } else {
            // Every etcd lock is a mutex; its TTL is the lease's, in whole
            // seconds.
            std::vector<list_row> rows;
            for (const auto& [name, st] : list.locks) {
                list_row r;
                r.name = name;
                if (!st.held) r.state = "free";
                if (const auto& h = st.holder.holder) r.set_holder(*h);
                r.ttl = st.ttl.count() < 0 ? "none" : std::to_string(st.ttl.count());
                r.waiters = std::to_string(st.waiters.size());
                rows.push_back(std::move(r));
            }
            print_list(rows);
        }
        if (list.truncated)
            report_warning("the listing stopped at a bound (time, pages or locks); there may be "
                           "more held locks");
        co_return exit_status::ok;
    });
}

std::string plural_levels(std::int64_t n) {
    return std::to_string(n) + (n == 1 ? " level" : " levels");
}


// When a name in lock-delay becomes free to take, by this host's clock
// (the server counts the delay down; this is for people to read).
std::chrono::system_clock::time_point delayed_until(const lock_status& st) {
    return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
        std::chrono::system_clock::now() + st.delayed_for);
}

// The JSON object of one lock, shared by status --json and list --json.
std::string status_json(std::string_view name, const lock_status& st) {
    const std::string holder = holder_json(st.holder, true);
    std::string line =
        "{\"name\":" + json_string(name) + ",\"held\":" + (st.held ? "true" : "false") +
        ",\"owner\":" + json_string(st.owner) + ",\"ttl_ms\":" + std::to_string(st.ttl.count()) +
        ",\"levels\":" + std::to_string(st.levels) +
        ",\"last_token\":" + std::to_string(st.last_token) + holder +
        ",\"kind\":" + json_string(lock_type_name(st.type)) +
        ",\"queued\":" + std::to_string(st.queued) +
        ",\"capacity\":" + std::to_string(st.capacity) +
        ",\"permits_in_use\":" + std::to_string(st.permits_in_use) +
        ",\"holder_count\":" + std::to_string(st.holder_count) +
        ",\"lock_delay_ms\":" + std::to_string(st.lock_delay.count()) +
        ",\"in_lock_delay\":" + (st.delayed_for.count() > 0 ? "true" : "false") +
        ",\"delayed_for_ms\":" + std::to_string(st.delayed_for.count()) +
        ",\"delayed_until\":" +
        (st.delayed_for.count() > 0 ? json_string(format_time(delayed_until(st))) : "null") +
        ",\"holders\":[";
    for (std::size_t i = 0; i < st.holders.size(); ++i) {
        const auto& h = st.holders[i];
        if (i > 0) line += ',';
        line += "{\"owner\":" + json_string(h.owner) + ",\"levels\":" + std::to_string(h.levels) +
                ",\"permits\":" + std::to_string(h.permits) +
                ",\"ttl_ms\":" + std::to_string(h.ttl.count()) + holder_json(h.holder, true) + "}";
    }
    return line + "]}";
}

// A semaphore's holders or a shared mutex's readers (`others` of them in
// all), one line each, for status.
void print_holders(const lock_status& st, std::uint64_t others) {
    const bool permits = st.type == lock_type::semaphore;
    for (const auto& h : st.holders) {
        std::string who = "holder unknown (not recorded)";
        if (h.holder)
            who = holder_text(*h.holder) + " since " + format_time(h.holder->since) + ", label " +
                  printable(h.holder->label);
        const std::string count =
            permits ? std::to_string(h.permits) + (h.permits == 1 ? " permit, " : " permits, ")
                    : std::string();
        std::printf("  %s: %s%s, ttl %lld ms%s%s\n", printable(h.owner).c_str(), count.c_str(),
                    plural_levels(h.levels).c_str(), static_cast<long long>(h.ttl.count()),
                    permits ? "; " : "", permits ? who.c_str() : "");
    }
    if (others > st.holders.size())
        std::printf("  ... and %llu more\n",
                    static_cast<unsigned long long>(others - st.holders.size()));
}

std::string ttl_text(const lock_status& st) {
    if (!st.held) return "-";
    return st.ttl.count() < 0 ? "none (the key has no expiry)" : std::to_string(st.ttl.count()) + " ms";
}

}  // namespace

// RFC 3339 in UTC with milliseconds: 2026-11-25T19:03:18.123Z.
std::string format_time(std::chrono::system_clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    if (::gmtime_r(&secs, &tm) == nullptr) return "?";
    char buf[40];
    const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03dZ", static_cast<int>(ms % 1000));
    return std::string(buf, n) + frac;
}

// "2d 3h 4m 5s", or "12.345s" under a minute: a job stuck for days reads so.
std::string format_held_for(std::chrono::milliseconds d) {
    auto ms = d.count();
    if (ms < 60 * 1000) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%lld.%03llds", static_cast<long long>(ms / 1000),
                      static_cast<long long>(ms % 1000));
        return buf;
    }
    auto s = ms / 1000;
    std::string out;
    const std::pair<long long, const char*> units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
    for (const auto& [per, name] : units) {
        if (s >= per || (per == 1 && out.empty())) {
            if (!out.empty()) out += ' ';
            out += std::to_string(s / per) + name;
            s %= per;
        }
    }
    return out;
}

std::string holder_text(const lock_holder& h) {
    return printable(h.host) + ":" + std::to_string(h.pid);
}

int status_command(const status_options& o) {
    if (o.common.kind == url_kind::etcd) return etcd_status(o);
    if (!o.common.redis()) return store_status(o);
    return with_redis(o.common, [&o](auto& c) -> asio::awaitable<int> {
        // A PING first: it tells "cannot reach or log in" from "logged in
        // but not allowed" (NOPERM, which the library reports as auth_failed).
        if (const error_code reach = co_await first_check(c); reach)
            co_return report_redis_failure(o.common, "status of lock '" + o.name + "'", reach,
                                         cause_of(c));
        auto [ec, st] = co_await async_lock_status(c, o.name, use_nothrow);
        if (ec)
            co_return report_redis_failure(o.common, "status of lock '" + o.name + "'", ec,
                                         cause_of(c), pinged(c));
        if (o.json) {
            const std::string line = status_json(o.name, st) + "\n";
            std::fputs(line.c_str(), stdout);
            co_return status_exit(st.held);
        }
        // Names, owner ids, hosts and labels are binary-safe: printable()
        // keeps each on its line and away from the terminal's escape sequences.
        std::printf("lock:       %s\n", printable(o.name).c_str());
        std::printf("kind:       %s\n", std::string(lock_type_name(st.type)).c_str());
        const bool delayed = st.delayed_for.count() > 0;
        std::printf("held:       %s\n",
                    delayed ? "in lock-delay (the holder's tenure ended without a release)"
                            : st.held ? "yes" : "no");
        if (delayed)
            std::printf("lock-delay: %s s, until %s (%s s more; nobody can take it before)\n",
                        seconds(st.lock_delay).c_str(), format_time(delayed_until(st)).c_str(),
                        seconds(st.delayed_for).c_str());
        else if (st.held && st.lock_delay.count() > 0)
            std::printf("lock-delay: %s s (if the holder ends without a release)\n",
                        seconds(st.lock_delay).c_str());
        if (st.type == lock_type::semaphore) {
            std::printf("capacity:   %u\n", static_cast<unsigned>(st.capacity));
            std::printf("permits:    %llu in use\n",
                        static_cast<unsigned long long>(st.permits_in_use));
            std::printf("holders:    %llu\n", static_cast<unsigned long long>(st.holder_count));
            print_holders(st, st.holder_count);
        } else {
            // A shared mutex's owner is its writer, when one holds it.
            const bool shared = st.type == lock_type::shared_mutex;
            const bool owned = st.held && !st.owner.empty();
            std::printf("%s%s\n", shared ? "writer:     " : "owner:      ",
                        owned ? printable(st.owner).c_str() : "-");
            if (st.holder) {
                std::printf("holder:     %s\n", holder_text(*st.holder).c_str());
                std::printf("label:      %s\n", printable(st.holder->label).c_str());
                std::printf("since:      %s (held for %s)\n", format_time(st.holder->since).c_str(),
                            format_held_for(st.holder->held_for).c_str());
            } else if (owned) {
                std::printf("holder:     unknown (not recorded)\n");
            }
        }
        std::printf("ttl:        %s\n", ttl_text(st).c_str());
        std::printf("levels:     %lld\n", static_cast<long long>(st.levels));
        if (st.type == lock_type::fair_mutex)
            std::printf("queued:     %llu\n", static_cast<unsigned long long>(st.queued));
        if (st.type == lock_type::shared_mutex) {
            // The owner above is the writer; the other holders are readers.
            const std::uint64_t readers = st.holder_count - (st.owner.empty() ? 0 : 1);
            std::printf("writer waiting: %s\n", st.queued > 0 ? "yes" : "no");
            std::printf("readers:    %llu\n", static_cast<unsigned long long>(readers));
            print_holders(st, readers);
        }
        std::printf("last token: %llu\n", static_cast<unsigned long long>(st.last_token));
        co_return status_exit(st.held);
    });
}

int break_command(const break_options& o) {
    if (o.common.kind == url_kind::etcd) return etcd_break(o);
    if (!o.common.redis()) return store_break(o);
    return with_redis(o.common, [&o](auto& c) -> asio::awaitable<int> {
        if (const error_code reach = co_await first_check(c); reach)
            co_return report_redis_failure(o.common, "break lock '" + o.name + "'", reach,
                                         cause_of(c));
        auto [ec, removed] = co_await async_break_lock(c, o.name, use_nothrow);
        if (ec) {
            const int status =
                report_redis_failure(o.common, "break lock '" + o.name + "'", ec,
                                     cause_of(c), pinged(c));
            if (ec == error::connection_lost || ec == error::timeout)
                report_error("the break may or may not have happened; check with "
                             "'corolock status'");
            co_return status;
        }
        if (!removed.held)
            std::printf("lock %s was not held\n", printable(o.name).c_str());
        else if (removed.type == lock_type::semaphore)
            std::printf("removed semaphore %s: %llu %s held by %llu %s (%s)\n",
                        printable(o.name).c_str(),
                        static_cast<unsigned long long>(removed.permits_in_use),
                        removed.permits_in_use == 1 ? "permit" : "permits",
                        static_cast<unsigned long long>(removed.holder_count),
                        removed.holder_count == 1 ? "owner" : "owners",
                        plural_levels(removed.levels).c_str());
        else if (removed.type == lock_type::shared_mutex)
            std::printf("removed shared mutex %s: %s, %llu readers\n", printable(o.name).c_str(),
                        removed.owner.empty()
                            ? "no writer"
                            : ("writer " + printable(removed.owner) + " (" +
                               plural_levels(removed.levels) + ")")
                                  .c_str(),
                        static_cast<unsigned long long>(removed.holder_count -
                                                        (removed.owner.empty() ? 0 : 1)));
        else
            std::printf("removed lock %s held by %s (%s)\n", printable(o.name).c_str(),
                        printable(removed.owner).c_str(), plural_levels(removed.levels).c_str());
        if (removed.type == lock_type::fair_mutex && removed.queued > 0)
            std::printf("%llu queued waiters keep their places; the first takes the lock\n",
                        static_cast<unsigned long long>(removed.queued));
        co_return exit_status::ok;
    });
}

int list_command(const list_options& o) {
    if (o.common.kind == url_kind::etcd) return etcd_list(o);
    if (!o.common.redis()) return store_list(o);
    return with_redis(o.common, [&o](auto& c) -> asio::awaitable<int> {
        if (const error_code reach = co_await first_check(c); reach)
            co_return report_redis_failure(o.common, "list locks", reach, cause_of(c));
        lock_list_options lo;
        lo.pattern = o.pattern;
        auto [ec, list] = co_await async_list_locks(c, lo, use_nothrow);
        if (ec)
            co_return report_redis_failure(o.common, "list locks", ec, cause_of(c),
                                           pinged(c));
        if (o.json) {
            std::string out = "{\"locks\":[";
            for (std::size_t i = 0; i < list.locks.size(); ++i) {
                if (i > 0) out += ',';
                out += status_json(list.locks[i].name, list.locks[i].status);
            }
            out += std::string("],\"truncated\":") + (list.truncated ? "true" : "false") + "}\n";
            std::fputs(out.c_str(), stdout);
        } else {
            // printable() escapes control bytes inside the fields.
            std::vector<list_row> rows;
            for (const auto& [name, st] : list.locks) {
                list_row r;
                r.name = name;
                r.kind = std::string(lock_type_name(st.type));
                if (!st.held) r.state = "free";
                // A semaphore's one holder is shown as a mutex's; several are counted.
                const std::optional<lock_holder>& h =
                    st.holders.size() == 1 ? st.holders.front().holder : st.holder;
                if (st.holder_count > 1)
                    r.holder = "(" + std::to_string(st.holder_count) + ")";
                else if (h)
                    r.set_holder(*h);
                if (st.held) r.ttl = st.ttl.count() < 0 ? "none" : seconds(st.ttl);
                if (st.delayed_for.count() > 0) {
                    r.state = "lock-delay";
                    r.delay = seconds(st.delayed_for);
                }
                if (st.type == lock_type::fair_mutex) r.waiters = std::to_string(st.queued);
                if (st.type == lock_type::semaphore)
                    r.permits = std::to_string(st.permits_in_use) + "/" + std::to_string(st.capacity);
                rows.push_back(std::move(r));
            }
            print_list(rows);
        }
        if (list.truncated)
            report_warning("the listing stopped at a bound (time, steps or locks); there may be "
                           "more held locks");
        co_return exit_status::ok;
    });
}

}  // namespace corolock::cli
