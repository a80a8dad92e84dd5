// corolock status: one script run on Redis, a range (and a lease look-up) on
// etcd, a listing of the lock's directory on ZooKeeper, pg_locks and the
// name's row on PostgreSQL.
#include "inspect_common.hpp"

#include <corolock/printable.hpp>

#include <cstdio>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

// status's exit status, as test(1): 0 when the lock is held, 1 when free.
int status_exit(bool held) { return held ? exit_status::ok : exit_status::not_held; }

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

}  // namespace corolock::cli
