// The PostgreSQL fence (docs/fencing.md): schema `corolock`, its table
// `corolock.fences` and the function corolock.fence(resource text, token
// bigint), installed in one transaction by `corolock fence install`.
#pragma once

#include "pg/protocol.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace corolock::detail::pg {

// corolock.fence's SQLSTATE for a stale token (class CL: corolock's own,
// outside every class the SQL standard and PostgreSQL use).
inline constexpr std::string_view stale_token_sqlstate = "CLF01";

// The install's statements, in order, each idempotent; run between BEGIN
// and COMMIT by install_fence().
std::span<const std::string_view> fence_install_statements() noexcept;

// Connects to `url` (postgresql://...) and installs the fence in one
// transaction: all of it or nothing. Completes with the error and, on
// failure, the reason in words (scrubbed of the URL's secrets):
// error::no_permission when the role may not create the schema (CREATE on
// the database), invalid_url for a bad URL, a connection error, or
// server_error with the server's message.
boost::asio::awaitable<std::tuple<error_code, std::string>> install_fence(
    boost::asio::any_io_executor ex, std::string_view url, std::chrono::milliseconds timeout);
// The same on a URL already parsed (a backend's: pg_backend's
// admin_fence_install).
boost::asio::awaitable<std::tuple<error_code, std::string>> install_fence(
    boost::asio::any_io_executor ex, std::shared_ptr<const url_parts> url,
    std::chrono::milliseconds timeout);

}  // namespace corolock::detail::pg
