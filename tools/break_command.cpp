// corolock break: one script run on Redis, a range and a revoke on etcd, a
// listing of the lock's directory and a delete on ZooKeeper, pg_locks and the
// name's row and a pg_terminate_backend on PostgreSQL.
#include "inspect_common.hpp"

#include <corolock/printable.hpp>

#include <cstdio>

namespace corolock::cli {

namespace asio = boost::asio;

namespace {

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

}  // namespace

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

}  // namespace corolock::cli
