// Operator tools for locks on PostgreSQL: whether the server answers, one
// lock's state, the locks held, and breaking one. Behind `corolock run`'s
// first look and `corolock status`, `list` and `break` with a
// postgresql:// URL. Private to corolock's own layers (the
// CLI); the statements are protocol.hpp's.
//
// A connection of its own (connection.hpp): connecting (authentication
// included) is the reachability check, and takes no lock. status() reads
// pg_locks for the lock's advisory key (the granted session holds it, the
// others wait in the server's queue) and the name's row of corolock_locks
// (its fence is the last token; its holder record the holder's, written at
// the grant by the server's clock).
#pragma once

#include "core/listed_locks.hpp"
#include "pg/connection.hpp"
#include "pg/protocol.hpp"

#include <corolock/admin.hpp>
#include <corolock/lock_holder.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

namespace corolock::detail::pg {

struct admin_lock_status {
    lock_report report;
    // report.holder read as a holder record (since and held_for by the
    // server's clock); absent when not held or of another shape.
    std::optional<lock_holder> holder;
};

// list()'s answer, by name.
using admin_lock_list = listed_locks<admin_lock_status>;

// "host:port[,host:port...]" of a parsed URL, by libpq's reading of it (a
// socket directory for a host that is a path), for messages.
std::string describe_server(const url_parts& url);

class admin {
public:
    admin(boost::asio::any_io_executor ex, std::shared_ptr<const url_parts> url,
          std::chrono::milliseconds request_timeout);
    ~admin();
    admin(const admin&) = delete;
    admin& operator=(const admin&) = delete;

    // Connects within the request timeout; the reason, scrubbed of the
    // password, in last_error().
    boost::asio::awaitable<error_code> connect();
    // The lock's sessions and row. Read-only. After connect().
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> status(std::string name);
    // The locks held now whose name matches options.pattern (a Redis glob,
    // core/glob_match.hpp): the advisory keys granted (pg_locks), then the
    // names of corolock_locks in byte order, count_per_step names a page
    // (zero: 1000) for max_steps pages, and status() of each whose key is
    // granted, within max_locks and max_time (zero: lock_list_defaults;
    // the bounds are checked between reads). Not one consistent view.
    // Read-only.
    boost::asio::awaitable<std::tuple<error_code, admin_lock_list>> list(lock_list_options options);
    // Ends the holder's session (pg_terminate_backend) if it still holds the
    // tenure status() read (the same fence), which frees the lock for the
    // first session in the server's queue; the holder's backend sees its
    // session break and fires the lost signal at once. Needs the right to
    // signal that session (its role, or pg_signal_backend): else
    // error::no_permission, the server's words in last_error(). A re-entry or
    // a new tenure between the read and the break (another fence) reads
    // again, three times at most (then error::lock_held). Answers the
    // status read, held false when nothing was held.
    // With `only_owner` not empty, only a session holding as that owner is
    // ended: else error::not_owner (someone else holds it; untouched).
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> break_lock(
        std::string name, std::string only_owner = {});

    const std::string& last_error() const noexcept { return why_; }
    // Closes the connection. Idempotent; never throws.
    void stop() noexcept;

private:
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> read_status(
        const std::string& name, connection::clock::time_point deadline);

    connection::executor_type strand_;
    std::shared_ptr<const url_parts> url_;
    std::chrono::milliseconds request_timeout_;
    std::shared_ptr<connection> conn_;
    std::string why_;
};

}  // namespace corolock::detail::pg
