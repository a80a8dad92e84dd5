// Running the caller's SQL inside a PostgreSQL lock (docs/postgresql.md).
//
// A guard of a postgresql:// backend holds its lock on one database session.
// async_execute_locked runs statements on that session, in one transaction
// that also checks that the session still holds the lock with the guard's
// fence, and commits: the statements' writes and the lock commit or fail
// together. On any other backend it completes with error::invalid_argument.
//
//   std::vector<corolock::sql_statement> tx{
//       {"UPDATE stock SET count = count - 1 WHERE sku = $1 AND count > 0", {sku}}};
//   auto [ec, out] = co_await corolock::async_execute_locked(
//       guard, std::move(tx), asio::as_tuple(asio::use_awaitable));
#pragma once

#include <corolock/export.hpp>

#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/guard.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/system_executor.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace corolock {

// One statement: its text with $1, $2, ... placeholders, and the values,
// sent apart from the text (libpq's extended protocol) as text; nullopt is
// SQL NULL. One statement per text; no transaction control, no COPY.
struct sql_statement {
    std::string text;
    std::vector<std::optional<std::string>> params;
};

// One statement's answer.
struct sql_result {
    std::vector<std::string> columns;                           // empty: no rows returned
    std::vector<std::vector<std::optional<std::string>>> rows;  // text values; nullopt: NULL
    std::string command_tag;                                    // "UPDATE 1", "SELECT 2", ...
    std::uint64_t affected = 0;  // rows inserted, updated, deleted or selected
};

struct sql_outcome {
    std::vector<sql_result> results;  // one per statement, when committed
    // On failure: the server's SQLSTATE and message (or corolock's reason,
    // with an empty SQLSTATE), and which statement failed.
    std::string sqlstate;
    std::string message;
    std::optional<std::size_t> failed_statement;
};

namespace detail {
using sql_handler = boost::asio::any_completion_handler<void(error_code, sql_outcome)>;
// The guard's client executor; empty for an empty guard.
COROLOCK_API boost::asio::any_io_executor guard_executor(const guard& g) noexcept;
COROLOCK_API void execute_locked_impl(const guard& g, std::vector<sql_statement> statements,
                         sql_handler handler, bool direct);

struct initiate_execute_locked {
    using executor_type = boost::asio::any_io_executor;
    const guard* g;
    executor_type get_executor() const noexcept {
        auto ex = guard_executor(*g);
        return ex ? ex : executor_type(boost::asio::system_executor());
    }
    template <class Handler>
    void operator()(Handler&& handler, std::vector<sql_statement> statements) const {
        auto h = erase_handler<void(error_code, sql_outcome)>(std::forward<Handler>(handler),
                                                             guard_executor(*g));
        execute_locked_impl(*g, std::move(statements), std::move(h.handler), h.direct);
    }
};
}  // namespace detail

// Runs `statements` in order on the session holding g's lock, in one
// transaction: BEGIN; a check that the session holds the lock and that the
// lock's fence row (locked FOR UPDATE until the end) is this tenure's; the
// statements; the check again; COMMIT. Completes with:
//  - success: committed; out.results has each statement's answer;
//  - error::lock_lost: the lock was not held (lost before or during the
//    call, or a statement unlocked it); nothing committed, the guard is
//    lost (a statement that released the lock loses it);
//  - error::server_error: a statement failed (out.sqlstate, out.message,
//    out.failed_statement); rolled back, the lock still held;
//  - error::invalid_argument: a statement was refused before anything was
//    sent (transaction control, COPY, a NUL byte), or g is not a guard of a
//    postgresql:// backend (out.message says which);
//  - error::released: g is empty or released; error::client_stopped;
//  - error::connection_lost with COMMIT sent and no answer: whether it
//    committed is unknown (if it did, it did while the lock was held);
//  - operation_aborted when cancelled (any type): honoured between
//    statements; a statement already sent runs to its end first. Rolled
//    back, the lock still held, the session usable.
// Renewals of the lock wait while the transaction runs; its statements
// renew the lease themselves. Each is bounded by the lease deadline.
template <class CompletionToken = detail::default_token>
auto async_execute_locked(const guard& g, std::vector<sql_statement> statements,
                          CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, sql_outcome)>(
        detail::initiate_execute_locked{&g}, token, std::move(statements));
}

}  // namespace corolock
