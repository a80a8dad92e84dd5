// How the client words a connection failure's cause (client::last_error()).
// The unknown-host case is checked here rather than against a resolver:
// tests talk only to loopback, and resolving a missing name asks DNS.
#include "redis/connection/client_impl.hpp"

#include <boost/asio/error.hpp>

#include <catch2/catch.hpp>

namespace ae = boost::asio::error;
using corolock::error;
using corolock::error_code;
using corolock::detail::classify_server_error;
using corolock::detail::describe_cause;

TEST_CASE("connect cause: socket and resolver failures in plain words", "[unit][client]") {
    CHECK(describe_cause(ae::connection_refused) == "connection refused");
    CHECK(describe_cause(ae::host_not_found) == "host not found");
    CHECK(describe_cause(ae::host_not_found_try_again) == "host not found");
    CHECK(describe_cause(ae::no_data) == "host not found");
    CHECK(describe_cause(ae::timed_out) == "connection timed out");
    CHECK(describe_cause(ae::network_unreachable) == "network is unreachable");
}

TEST_CASE("connect cause: server error replies map to their codes", "[unit][client]") {
    CHECK(classify_server_error("NOPERM this user has no permissions to run the 'set' command") ==
          error::no_permission);
    // An ACL denial inside a script (Redis 7.0's wording).
    CHECK(classify_server_error("ERR The user executing the script can't run this command or "
                                "subcommand script: 1732fe, on @user_script:1.") ==
          error::no_permission);
    CHECK(classify_server_error("WRONGPASS invalid username-password pair") == error::auth_failed);
    CHECK(classify_server_error("NOAUTH Authentication required.") == error::auth_failed);
    CHECK(classify_server_error("WRONGTYPE Operation against a key") == error::wrong_type);
    CHECK(classify_server_error("NOSCRIPT No matching script") == error::no_script);
    CHECK(classify_server_error("STALE token 3 is older than 4, the highest recorded in {a}:fence") ==
          error::stale_token);
    CHECK(classify_server_error("ERR DB index is out of range") == error::server_error);
}
