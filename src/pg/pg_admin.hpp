// Operator tools for locks on PostgreSQL: whether the server answers, and
// one lock's state. Behind `corolock run`'s first look and `corolock
// status` with a postgresql:// URL. Private to corolock's own layers (the
// CLI); the statements are protocol.hpp's.
//
// A connection of its own (connection.hpp): connecting (authentication
// included) is the reachability check, and takes no lock. status() reads
// pg_locks for the lock's advisory key (the granted session holds it, the
// others wait in the server's queue) and the name's row of corolock_locks
// (its fence is the last token; its holder record the holder's, written at
// the grant by the server's clock).
#pragma once

#include "pg/connection.hpp"
#include "pg/protocol.hpp"

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

    const std::string& last_error() const noexcept { return why_; }
    // Closes the connection. Idempotent; never throws.
    void stop() noexcept;

private:
    connection::executor_type strand_;
    std::shared_ptr<const url_parts> url_;
    std::chrono::milliseconds request_timeout_;
    std::shared_ptr<connection> conn_;
    std::string why_;
};

}  // namespace corolock::detail::pg
