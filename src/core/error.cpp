// corolock's error category, its generic conditions and the fatal-error test.
#include <corolock/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/errc.hpp>

namespace corolock {

namespace {

class error_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "corolock"; }

    // Messages are distinct, so a log line alone tells which code it was.
    std::string message(int ev) const override {
        switch (static_cast<error>(ev)) {
        case error::invalid_argument: return "invalid argument";
        case error::invalid_url: return "malformed URL";
        case error::connect_timeout: return "connecting to the server timed out";
        case error::resolve_failed: return "the server's host name did not resolve";
        case error::tls_handshake_failed: return "TLS handshake or certificate verification failed";
        case error::auth_failed: return "the server rejected the credentials";
        case error::handshake_failed: return "the HELLO/SELECT handshake failed";
        case error::connection_lost: return "the connection to the server was lost";
        case error::not_connected: return "not connected to the server";
        case error::timeout: return "the command got no reply in time";
        case error::client_stopped: return "the client was stopped";
        case error::protocol_error: return "malformed RESP3 data from the server";
        case error::reply_too_large: return "a reply exceeds the configured size limits";
        case error::nesting_too_deep: return "a reply nests deeper than the configured limit";
        case error::unexpected_reply: return "the server's reply has an unexpected shape";
        case error::server_error: return "the server answered with an error";
        case error::wrong_type: return "the lock's key holds a value of another type";
        case error::no_script: return "the script is not loaded on the server";
        case error::lock_held: return "the lock is held by another owner";
        case error::wait_timeout: return "the lock was not acquired within the wait";
        case error::not_owner: return "the lock is held by another owner now";
        case error::expired: return "the lock expired";
        case error::lock_lost: return "the lease was lost";
        case error::released: return "the guard was already released";
        case error::never_connected: return "no connection to the server could be made";
        case error::no_permission: return "permission denied by the server's ACL";
        case error::server_too_old:
            return "the server does not speak RESP3 (HELLO 3): Redis 6.0 or later is required";
        case error::drain_timeout: return "the background clean-up was not done in time";
        case error::no_primary: return "no Sentinel named a primary that confirmed its role";
        case error::cluster_down: return "no primary of the cluster served the lock's slot in time";
        case error::replicas_missing:
            return "too few replicas acknowledged the acquire in time; the lock was given back";
        case error::upgrade_refused:
            return "an exclusive acquire while holding only shared levels (an upgrade) is "
                   "refused: two upgraders would deadlock";
        case error::not_supported: return "this backend does not support the operation";
        case error::stale_token:
            return "the fence refused a token older than the highest it recorded (a newer "
                   "holder has written)";
        case error::no_functions:
            return "the server has no Redis Functions (FUNCTION LOAD): Redis 7.0 or later is "
                   "required for the fence";
        }
        return "unknown corolock error " + std::to_string(ev);
    }

    // No default_error_condition override: a code may belong to two
    // conditions (connect_timeout, wait_timeout), which a single default
    // condition cannot express. The condition category's `equivalent` does
    // the whole mapping instead; Boost consults it for `ec == condition`.
};

// The codes from the socket layer that mean the connection failed or is gone.
// errno-based codes are compared as generic conditions, so both the system
// category (what Asio produces) and the generic category match.
bool is_socket_failure(const error_code& ec) noexcept {
    namespace ae = boost::asio::error;
    using errc = boost::system::errc::errc_t;
    for (errc e : {errc::connection_refused, errc::connection_reset, errc::connection_aborted,
                   errc::broken_pipe, errc::not_connected, errc::host_unreachable,
                   errc::network_unreachable, errc::network_down, errc::network_reset,
                   // ETIMEDOUT from a socket is the kernel giving up on the peer
                   // (connect or retransmission), not a corolock deadline.
                   errc::timed_out}) {
        if (ec == boost::system::errc::make_error_condition(e)) return true;
    }
    // The peer closed the stream (Asio's misc category).
    if (ec == ae::eof) return true;
    // Resolver failures: the name did not resolve, so nothing was connected.
    if (ec.category() == ae::get_netdb_category()) return true;
    return false;
}

bool is_socket_timeout(const error_code& ec) noexcept {
    return ec == boost::system::errc::make_error_condition(boost::system::errc::timed_out);
}

// Whether a code belongs to a generic condition. One code may belong to two:
// connect_timeout is both a timeout and a connection failure, wait_timeout
// both a timeout and "the lock is not available", as error.hpp documents.
bool in_condition(condition c, const error_code& ec) noexcept {
    if (ec.category() == error_category()) {
        switch (static_cast<error>(ec.value())) {
        case error::timeout:
        case error::drain_timeout: return c == condition::timeout;
        case error::wait_timeout: return c == condition::timeout || c == condition::lock_unavailable;
        case error::connect_timeout:
            return c == condition::timeout || c == condition::connection_failure;
        case error::connection_lost:
        case error::not_connected:
        case error::never_connected:
        case error::resolve_failed:
        case error::no_primary:
        case error::cluster_down:
        case error::tls_handshake_failed: return c == condition::connection_failure;
        case error::lock_held: return c == condition::lock_unavailable;
        case error::not_owner:
        case error::expired:
        case error::lock_lost:
        case error::stale_token: return c == condition::lease_gone;
        // released is the caller's own doing, not a lost lease; client_stopped
        // likewise is no failure of the connection.
        default: return false;
        }
    }
    switch (c) {
    case condition::timeout: return is_socket_timeout(ec);
    case condition::connection_failure: return is_socket_failure(ec);
    default: return false;
    }
}

class condition_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "corolock.condition"; }

    std::string message(int ev) const override {
        switch (static_cast<condition>(ev)) {
        case condition::timeout: return "timed out";
        case condition::connection_failure: return "the connection to the server failed";
        case condition::lock_unavailable: return "the lock is not available";
        case condition::lease_gone: return "the lease is gone";
        }
        return "unknown corolock condition " + std::to_string(ev);
    }

    bool equivalent(const boost::system::error_code& code, int cond) const noexcept override {
        return in_condition(static_cast<condition>(cond), code);
    }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
    static const error_category_impl instance;
    return instance;
}

const boost::system::error_category& condition_category() noexcept {
    static const condition_category_impl instance;
    return instance;
}

bool is_fatal_connection_error(const error_code& ec) noexcept {
    if (!ec) return false;
    if (ec.category() == error_category()) {
        switch (static_cast<error>(ec.value())) {
        // No usable connection was made, or the byte stream can no longer be
        // trusted (the parser stopped mid-reply, so the next byte's place in
        // the stream is unknown): only a new connection helps.
        case error::connection_lost:
        case error::not_connected:
        case error::never_connected:
        case error::no_primary:
        case error::server_too_old:
        case error::connect_timeout:
        case error::resolve_failed:
        case error::tls_handshake_failed:
        case error::handshake_failed:
        case error::auth_failed:
        case error::protocol_error:
        case error::reply_too_large:
        case error::nesting_too_deep: return true;
        // A command's timeout says nothing about the stream by itself (the
        // reply may still come, and is matched and dropped); the health
        // check decides whether the connection is dead. Server errors, wrong
        // types, lock outcomes and a well-formed unexpected reply all arrived
        // over a healthy connection. client_stopped is deliberate.
        default: return false;
        }
    }
    // Asio/system codes: the socket failures above. Cancellation
    // (operation_aborted) is local and leaves the connection as it was.
    return is_socket_failure(ec);
}

}  // namespace corolock
