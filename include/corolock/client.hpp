// corolock::client: one logical connection to Redis, shared by every
// coroutine of a process.
//
// The client connects on construction and keeps itself connected: it runs the
// RESP3 handshake (HELLO 3 with AUTH and SETNAME, then SELECT), coalesces
// commands issued concurrently into few writes (auto-pipelining), matches
// replies in order, sends a health-check PING on a quiet connection, and
// reconnects with capped, jittered exponential backoff. All of its state
// lives on an internal strand, so it may be used from several threads.
#pragma once

#include <corolock/export.hpp>

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/command.hpp>
#include <corolock/config.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/metrics.hpp>
#include <corolock/reply.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace corolock {

namespace detail { class client_impl; }

// Counters for tests, benchmarks and monitoring. Read with client::stats().
struct client_stats {
    std::uint64_t commands_sent = 0;    // commands written to a socket
    std::uint64_t writes = 0;           // socket writes (one write may carry many commands)
    std::uint64_t replies = 0;          // replies matched to commands
    std::uint64_t pushes = 0;           // RESP3 push messages received
    std::uint64_t connects = 0;         // successful handshakes
    std::uint64_t disconnects = 0;      // connections lost after a handshake
    std::uint64_t timeouts = 0;         // commands completed with error::timeout
    std::uint64_t retries = 0;          // idempotent commands re-sent after a disconnect
    std::size_t queued = 0;             // commands waiting, written or abandoned right now
};

// The most recent failure the client saw, with its cause in words (see
// client::last_error). Never holds a password or any other secret.
struct error_detail {
    // The cause's own code: a socket error (connection_refused, ...),
    // resolve_failed, tls_handshake_failed, auth_failed, handshake_failed,
    // no_permission, server_too_old, a server error, a timeout, ...
    error_code code;
    // The cause, e.g. "connection refused", "host not found",
    // "TLS handshake: wrong version number", "SELECT 99: ERR DB index is out
    // of range", "permission denied: SET: NOPERM User ...".
    std::string message;
};

class COROLOCK_API client {
public:
    using executor_type = boost::asio::any_io_executor;
    using exec_signature = void(error_code, reply);

    // Starts connecting at once. The configuration is checked first; a bad
    // one throws boost::system::system_error(error::invalid_argument).
    client(executor_type ex, config cfg);
    // Parses the URL with config::from_url.
    client(executor_type ex, std::string_view url);

    client(const client&) = delete;
    client& operator=(const client&) = delete;
    client(client&&) noexcept = default;
    client& operator=(client&&) noexcept = default;

    // Stops the client (see stop()). Never throws, never blocks.
    ~client();

    executor_type get_executor() const noexcept;
    const config& get_config() const noexcept;

    // Runs one command. Completes with the reply, or with:
    //  - error::server_error / wrong_type / no_script / auth_failed, with the
    //    server's error reply still passed as the reply (its text is the diagnostic);
    //  - error::no_permission when the server's ACL refused the command or
    //    its key (NOPERM), with the server's reply passed as above;
    //  - error::timeout when no reply came within config.command_timeout
    //    (error::not_connected instead when the connection was down all that
    //    time); a command that was written and then timed out also resets the
    //    connection, since its reply can no longer be expected in time;
    //  - error::never_connected when the client has not connected once within
    //    config.connect_timeout of starting (then at once, until it connects);
    //    error::auth_failed, no_permission, tls_handshake_failed,
    //    handshake_failed (e.g. SELECT of a database the server lacks) or
    //    server_too_old at once while the last connection attempt failed that
    //    way, since retrying cannot fix it. The reply is then an error reply
    //    whose text names the cause ("never connected: connection refused"),
    //    as last_error() does;
    //  - error::connection_lost when the connection dropped after the
    //    command was written (an idempotent command is re-sent once instead);
    //  - error::protocol_error / reply_too_large / nesting_too_deep when its
    //    reply could not be read (corrupt, or over config's limits); the
    //    connection is then dropped for a new one, and an idempotent command
    //    is re-sent once first;
    //  - error::client_stopped after stop();
    //  - boost::asio::error::operation_aborted on cancellation.
    //
    // Cancellation: any cancellation type removes a command that has not
    // been written, and it is then never sent. A written command honours
    // terminal and partial cancellation: it completes at once and its reply
    // is discarded when it arrives.
    //
    // The handler runs on its associated executor, never inside this call.
    template <class CompletionToken = detail::default_token>
    auto async_exec(command cmd, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, exec_signature>(
            initiate_exec{impl_, get_executor()}, token, std::move(cmd));
    }

    // Ends all background work: the socket is closed, timers are cancelled,
    // pending commands complete with error::client_stopped and no coroutine
    // of the client remains. Idempotent, thread-safe, never blocks.
    void stop() noexcept;

    // backend::async_drain (backend.hpp) on this client's lock backend.
    template <class CompletionToken = detail::default_token>
    auto async_drain(std::chrono::steady_clock::duration bound,
                     CompletionToken&& token = {}) const {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiate_drain{detail::backend_access::impl(lock_backend()), get_executor()}, token, bound);
    }

    bool is_connected() const noexcept;
    client_stats stats() const;
    // The lock layer's metrics (see metrics.hpp). Any thread, any time;
    // relaxed reads, no lock.
    metrics_snapshot metrics() const noexcept;

    // The most recent failure: a failed connection attempt (with its cause),
    // a server error reply (with the command's name and the server's text),
    // a command's timeout. Empty code when nothing failed yet. Thread-safe;
    // for messages and logs, not for control flow.
    error_detail last_error() const;

    // This client as a lock backend: a handle that shares the client's
    // connection and does not stop it when destroyed.
    backend lock_backend() const noexcept;

    // The shared implementation, for corolock's own layers (locks, watchdog).
    const std::shared_ptr<detail::client_impl>& impl() const noexcept { return impl_; }

private:
    // The initiation of async_exec (see detail/completion.hpp).
    struct initiate_exec {
        std::shared_ptr<detail::client_impl> impl;
        executor_type ex;
        executor_type get_executor() const noexcept { return ex; }
        template <class Handler>
        void operator()(Handler&& handler, command cmd) const {
            start(detail::erase_keeping_work<exec_signature>(std::forward<Handler>(handler), ex),
                  std::move(cmd));
        }
        void start(boost::asio::any_completion_handler<exec_signature> handler, command cmd) const;
    };

    std::shared_ptr<detail::client_impl> impl_;
};

// admin.hpp's operations on a Redis client: the same operations on
// c.lock_backend() (a client is a backend too). Here, so that admin.hpp
// stays backend-neutral.
template <class CompletionToken = detail::default_token>
auto async_lock_status(const client& c, std::string_view name, CompletionToken&& token = {}) {
    return async_lock_status(c.lock_backend(), name, std::forward<CompletionToken>(token));
}
template <class CompletionToken = detail::default_token>
auto async_break_lock(const client& c, std::string_view name, CompletionToken&& token = {}) {
    return async_break_lock(c.lock_backend(), name, std::forward<CompletionToken>(token));
}
template <class CompletionToken = detail::default_token>
auto async_release_owner(const client& c, std::string_view name, std::string_view owner,
                         CompletionToken&& token = {}) {
    return async_release_owner(c.lock_backend(), name, owner,
                               std::forward<CompletionToken>(token));
}
template <class CompletionToken = detail::default_token>
auto async_list_locks(const client& c, lock_list_options options, CompletionToken&& token = {}) {
    return async_list_locks(c.lock_backend(), std::move(options),
                            std::forward<CompletionToken>(token));
}
template <class CompletionToken = detail::default_token>
auto async_check_token(const client& c, std::string_view name, std::uint64_t token,
                       CompletionToken&& completion = {}) {
    return async_check_token(c.lock_backend(), name, token,
                             std::forward<CompletionToken>(completion));
}


}  // namespace corolock
