#include <corolock/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/errc.hpp>

namespace corolock {

namespace {

class error_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "corolock"; }

    std::string message(int ev) const override {
        switch (static_cast<error>(ev)) {
        case error::invalid_argument: return "invalid argument";
        case error::invalid_url: return "malformed Redis URL";
        case error::connect_timeout: return "connecting to Redis timed out";
        case error::resolve_failed: return "the Redis host name did not resolve";
        case error::tls_handshake_failed: return "TLS handshake or certificate verification failed";
        case error::auth_failed: return "Redis rejected the credentials";
        case error::handshake_failed: return "the HELLO/SELECT handshake failed";
        case error::connection_lost: return "the connection to Redis was lost";
        case error::not_connected: return "not connected to Redis";
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
        }
        return "unknown corolock error " + std::to_string(ev);
    }

    // The condition category does the mapping, in both directions; see
    // condition_category_impl::equivalent.
};

// Which generic conditions a code belongs to. One code may belong to two
// (connect_timeout is both a timeout and a connection failure), which is why
// this is `equivalent` rather than a single default_error_condition.
bool in_condition(condition c, const error_code& ec) noexcept {
    namespace ae = boost::asio::error;
    using boost::system::errc::make_error_code;
    using errc = boost::system::errc::errc_t;
    if (ec.category() == error_category()) {
        switch (static_cast<error>(ec.value())) {
        case error::timeout:
        case error::wait_timeout: return c == condition::timeout;
        case error::connect_timeout:
            return c == condition::timeout || c == condition::connection_failure;
        case error::connection_lost:
        case error::not_connected:
        case error::resolve_failed:
        case error::tls_handshake_failed: return c == condition::connection_failure;
        case error::lock_held: return c == condition::lock_unavailable;
        case error::not_owner:
        case error::expired:
        case error::lock_lost: return c == condition::lease_gone;
        default: return false;
        }
    }
    switch (c) {
    case condition::timeout:
        return ec == ae::timed_out || ec == make_error_code(errc::timed_out);
    case condition::connection_failure:
        return ec == ae::connection_refused || ec == ae::connection_reset ||
               ec == ae::connection_aborted || ec == ae::broken_pipe || ec == ae::eof ||
               ec == ae::host_unreachable || ec == ae::network_unreachable ||
               ec == ae::not_connected || ec == ae::host_not_found ||
               ec == make_error_code(errc::connection_refused) ||
               ec == make_error_code(errc::connection_reset);
    default: return false;
    }
}

class condition_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "corolock.condition"; }

    std::string message(int ev) const override {
        switch (static_cast<condition>(ev)) {
        case condition::timeout: return "timed out";
        case condition::connection_failure: return "the connection to Redis failed";
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
        // The byte stream can no longer be trusted or is gone: reconnect.
        case error::connection_lost:
        case error::not_connected:
        case error::connect_timeout:
        case error::resolve_failed:
        case error::tls_handshake_failed:
        case error::handshake_failed:
        case error::auth_failed:
        case error::protocol_error:
        case error::reply_too_large:
        case error::nesting_too_deep: return true;
        // A timeout of one command says nothing about the stream by itself;
        // the health check decides whether the connection is dead.
        default: return false;
        }
    }
    return in_condition(condition::connection_failure, ec);
}

}  // namespace corolock
