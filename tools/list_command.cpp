// corolock list: SCAN and a script per lock on Redis (every primary of a
// Cluster), paged ranges and a lease look-up per lock on etcd, the lock
// directories (ZooKeeper) or the names of corolock_locks (PostgreSQL) and a
// status of each.
#include "inspect_common.hpp"

#include <corolock/printable.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

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

}  // namespace

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
