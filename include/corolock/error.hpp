// corolock error codes.
//
// Every failure the library reports is a boost::system::error_code in
// corolock's own category (or an Asio/system code passed through unchanged,
// such as operation_aborted for cancellation). Server error text is never
// squeezed into the code: it is kept as a diagnostic next to it.
#pragma once

#include <corolock/export.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <type_traits>

namespace corolock {

using error_code = boost::system::error_code;

enum class error {
    // Configuration and input.
    invalid_argument = 1,   // a bad option, lock name, lease or wait
    invalid_url,            // config::from_url could not parse the URL

    // Connection.
    connect_timeout,        // TCP connect or TLS handshake took too long
    resolve_failed,         // the host name did not resolve
    tls_handshake_failed,   // certificate verification or TLS negotiation failed
    auth_failed,            // HELLO/AUTH rejected the credentials
    handshake_failed,       // HELLO 3 or SELECT failed for another reason
    connection_lost,        // the connection dropped with the command written
    not_connected,          // the client is stopped or was never started
    timeout,                // the command got no reply within its timeout
    client_stopped,         // client::stop() ended the operation

    // Protocol.
    protocol_error,         // the byte stream is not valid RESP3
    reply_too_large,        // a bulk length or aggregate exceeds the limits
    nesting_too_deep,       // aggregates nested deeper than the limit
    unexpected_reply,       // a well-formed reply of the wrong shape

    // Server replies.
    server_error,           // the server answered with an error (message kept)
    wrong_type,             // the lock's key holds a value of another type
    no_script,              // NOSCRIPT that survived the EVAL fallback

    // Locks.
    lock_held,              // try_acquire: another owner holds the lock
    wait_timeout,           // acquire: options.wait elapsed
    not_owner,              // release/renew: someone else holds the lock now
    expired,                // release/renew: the lock no longer exists
    lock_lost,              // the lease was lost while held
    released,               // the guard was released; nothing to wait for

    // Appended later; the values above stay as they were.
    never_connected,        // no connection was made within connect_timeout, or the
                            // last attempt failed in a way retrying cannot fix; the
                            // cause is in client::last_error()
    no_permission,          // NOPERM: the ACL user may not run the command or touch the key
    server_too_old,         // the server refused HELLO 3: RESP3 needs Redis 6.0 or later
    drain_timeout,          // async_drain: the background clean-up was not done in time
    no_primary,             // Sentinel: no Sentinel named a primary that confirmed
                            // its role (ROLE) in time; the cause is in last_error()
    cluster_down,           // Cluster: the lock's slot had no serving primary
                            // (CLUSTERDOWN, TRYAGAIN, redirections) within the deadline
    replicas_missing,       // acquire: fewer replicas than lock_options asked for
                            // acknowledged the grant in time; the lock was given back
    upgrade_refused,        // shared_mutex: an exclusive acquire by a handle holding only
                            // shared levels; refused, since two upgraders would each wait
                            // for the other's share forever
    not_supported,          // admin: this backend cannot do the operation (RedLock's
                            // status, list, break and release-owner; docs/architecture.md);
                            // acquire: a lock_delay this backend or lock kind does not
                            // honour (docs/safety.md, "Lock-delay")
    stale_token,            // a fence (Redis function, PostgreSQL corolock.fence) refused
                            // a token older than the highest it recorded: a newer holder
                            // has written; the server's message is kept as diagnostic
    no_functions,           // fence install: the server has no Redis Functions (Redis < 7)
};

COROLOCK_API const boost::system::error_category& error_category() noexcept;

inline error_code make_error_code(error e) noexcept {
    return {static_cast<int>(e), error_category()};
}

// Generic conditions, so callers can ask "was this a timeout?" without
// knowing which layer produced the code.
enum class condition {
    timeout = 1,        // connect_timeout, timeout, wait_timeout, drain_timeout,
                        // asio timed_out
    connection_failure, // connection_lost, not_connected, never_connected,
                        // resolve/connect/TLS failures, no_primary, cluster_down
    lock_unavailable,   // lock_held, wait_timeout
    lease_gone,         // not_owner, expired, lock_lost, stale_token
};

COROLOCK_API const boost::system::error_category& condition_category() noexcept;

inline boost::system::error_condition make_error_condition(condition c) noexcept {
    return {static_cast<int>(c), condition_category()};
}

// True when the code means the connection is unusable and must be rebuilt.
COROLOCK_API bool is_fatal_connection_error(const error_code& ec) noexcept;

}  // namespace corolock

template <>
struct boost::system::is_error_code_enum<corolock::error> : std::true_type {};
template <>
struct boost::system::is_error_condition_enum<corolock::condition> : std::true_type {};
