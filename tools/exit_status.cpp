// The tool's exit statuses for the library's errors (docs/cli.md, EXIT
// STATUS). In the parsing library, so that the unit tests can check it.
#include "cli.hpp"

namespace corolock::cli {

int exit_status_for(const error_code& ec) {
    if (!ec) return exit_status::ok;
    if (ec == error::wait_timeout || ec == error::lock_held) return exit_status::not_acquired;
    if (ec == error::invalid_argument || ec == error::invalid_url) return exit_status::usage;
    if (ec == error::no_permission) return exit_status::remote_error;
    // The library's connection failures (no primary and a Cluster's slot
    // without one among them), and what else keeps the service from being
    // used: no answer in time, refused credentials, a failed handshake.
    if (ec == condition::connection_failure || ec == error::timeout ||
        ec == error::auth_failed || ec == error::handshake_failed ||
        ec == error::server_too_old)
        return exit_status::unavailable;
    if (ec.category() != error_category()) return exit_status::unavailable;  // socket errors
    if (ec == error::client_stopped) return exit_status::os_error;
    // server_error, wrong_type, no_script, protocol errors, unexpected replies.
    return exit_status::remote_error;
}

}  // namespace corolock::cli
