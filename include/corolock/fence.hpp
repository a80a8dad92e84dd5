// Fences where the data lives (docs/fencing.md): a write to Redis that the
// server itself refuses when its fencing token is older than the highest
// one already written through the same fence key.
//
//   // the fence key and the data key share the hash tag {stock:7}
//   auto [ec, r] = co_await corolock::async_fenced_exec(
//       redis /* a client, or a Redis backend */, "{stock:7}:fence", guard.token(),
//       corolock::command{"SET", "{stock:7}:count", "41"},
//       asio::as_tuple(asio::use_awaitable));
//   if (ec == corolock::error::stale_token) { /* a newer holder has written */ }
//
// The check, the write and the recording of the token are one call of the
// Redis function corolock_fenced_exec (the library `corolock`, Redis 7.0 or
// later), loaded by `corolock fence install` or, when a call finds it
// missing, by the call itself.
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/command.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/reply.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace corolock {

namespace detail {
class lock_backend;
using fence_signature = void(error_code, reply);
using fence_handler = boost::asio::any_completion_handler<fence_signature>;
COROLOCK_API void fenced_exec_impl(const std::shared_ptr<lock_backend>& b, std::string fence_key,
                      std::uint64_t token, command cmd, fence_handler handler, bool direct);
COROLOCK_API void fence_install_impl(const std::shared_ptr<lock_backend>& b, fence_handler handler,
                        bool direct);

struct initiate_fence {
    using executor_type = boost::asio::any_io_executor;
    std::shared_ptr<lock_backend> b;
    executor_type ex;
    executor_type get_executor() const noexcept { return ex; }
    template <class Handler>
    void operator()(Handler&& handler, std::string fence_key, std::uint64_t token,
                    command cmd) const {
        auto h = erase_handler<fence_signature>(std::forward<Handler>(handler), ex);
        fenced_exec_impl(b, std::move(fence_key), token, std::move(cmd), std::move(h.handler),
                         h.direct);
    }
    template <class Handler>
    void operator()(Handler&& handler) const {
        auto h = erase_handler<fence_signature>(std::forward<Handler>(handler), ex);
        fence_install_impl(b, std::move(h.handler), h.direct);
    }
};
}  // namespace detail

// On a Redis backend (`redis://`, `redis+sentinel://`, `redis+cluster://`,
// ...) or a client: runs `cmd`, a command of one key with the key as its first argument
// (SET k v, HSET k f v, DEL k, INCRBY k n, ...), on the server only if
// `token` is at least the highest token recorded in `fence_key`, and
// records `token` there when the command succeeded; all of it atomically.
// On a Redis Cluster the two keys must hash to one slot: give them the same
// hash tag ({stock:7}:fence and {stock:7}:count). Completes with the
// command's reply, or with:
//  - error::stale_token: a newer token was recorded; nothing was written
//    (the reply is the server's "STALE token T is older than H ..." error);
//  - error::invalid_argument: an empty fence key, a command without a key,
//    (Cluster) keys in different slots, or a backend that is not Redis
//    (etcd, ZooKeeper, PostgreSQL, RedLock); the reply's text says which;
//  - error::no_functions: the library is missing and the server cannot load
//    it (Redis before 7.0);
//  - whatever client::async_exec completes with (a server error for the
//    command itself, with nothing written and no token recorded; timeouts,
//    connection loss, cancellation: the caller's slot goes with the FCALL
//    as documented there; while a missing library is being loaded,
//    cancellation waits for the load's end).
// A missing library (a new server, FUNCTION FLUSH) is loaded once, then the
// call is sent again. The write is idempotent on a repeat with the same
// token only when `cmd` is, and is re-sent after a drop only if marked so.
template <class CompletionToken = detail::default_token>
auto async_fenced_exec(const backend& b, std::string_view fence_key, std::uint64_t token,
                       command cmd, CompletionToken&& completion = {}) {
    return boost::asio::async_initiate<CompletionToken, detail::fence_signature>(
        detail::initiate_fence{detail::backend_access::impl(b), b.get_executor()}, completion, std::string(fence_key),
        token, std::move(cmd));
}
// The same on a client's server (one server, or Sentinel's primary).
template <class CompletionToken = detail::default_token>
auto async_fenced_exec(const client& c, std::string_view fence_key, std::uint64_t token,
                       command cmd, CompletionToken&& completion = {}) {
    return async_fenced_exec(c.lock_backend(), fence_key, token, std::move(cmd),
                             std::forward<CompletionToken>(completion));
}

// Loads the library `corolock` (FUNCTION LOAD REPLACE): on the server, or
// on every primary of a Cluster backend. Idempotent. Completes with the
// server's OK (the library's name), or error::no_functions (Redis < 7.0,
// the reply's text says so), no_permission, or a connection error. On a
// Cluster where some primaries refuse, the others keep the library and the
// reply's text names each primary that lacks it, and why.
//
// On a PostgreSQL backend (postgresql://): creates the schema corolock with
// the table corolock.fences and the function corolock.fence(resource,
// token) (docs/fencing.md), in one transaction on a connection of its own,
// bounded by the backend's request timeout: all of it or nothing, and
// idempotent. Completes with a status reply "OK", or with
// error::no_permission (the role may not create the schema), a connection
// error or server_error, the reply's error text saying why (never the
// password). Any other backend: error::invalid_argument.
template <class CompletionToken = detail::default_token>
auto async_fence_install(const backend& b, CompletionToken&& completion = {}) {
    return boost::asio::async_initiate<CompletionToken, detail::fence_signature>(
        detail::initiate_fence{detail::backend_access::impl(b), b.get_executor()}, completion);
}
template <class CompletionToken = detail::default_token>
auto async_fence_install(const client& c, CompletionToken&& completion = {}) {
    return async_fence_install(c.lock_backend(), std::forward<CompletionToken>(completion));
}

}  // namespace corolock
