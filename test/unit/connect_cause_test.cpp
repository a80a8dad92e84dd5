// How the client words a connection failure's cause (client::last_error()).
// The unknown-host case is checked here rather than against a resolver:
// tests talk only to loopback, and resolving a missing name asks DNS.
#include "redis/connection/client_impl.hpp"

#include <corolock/client.hpp>
#include <corolock/command.hpp>

#include "support/async_test.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <catch2/catch.hpp>

#include <chrono>

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

TEST_CASE("connect cause: fail_fast_when_refused fails the first commands at the refusal, not at "
          "connect_timeout", "[unit][client]") {
    // No server: a loopback port nothing listens on (bound, then closed).
    namespace asio = boost::asio;
    using namespace std::chrono_literals;
    std::uint16_t closed = 0;
    {
        asio::io_context probe;
        asio::ip::tcp::acceptor a(probe, {asio::ip::make_address("127.0.0.1"), 0});
        closed = a.local_endpoint().port();
    }
    asio::io_context ioc;
    corolock::config cfg;
    cfg.port = closed;
    // A window far beyond the test's bound: only the refusal can end the
    // wait (without the option the 20 s bound fails the case).
    cfg.connect_timeout = 1h;
    cfg.fail_fast_when_refused = true;
    corolock::client c(ioc.get_executor(), cfg);
    corolock::test::run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await c.async_exec(corolock::command{"PING"}, corolock::test::use_nothrow);
        CHECK(ec == error::never_connected);
        CHECK(r.str == "never connected: connection refused");
        CHECK(c.last_error().code == ae::connection_refused);
        // Later commands fail at once too, while the client keeps trying.
        auto [ec2, r2] = co_await c.async_exec(corolock::command{"PING"}, corolock::test::use_nothrow);
        CHECK(ec2 == error::never_connected);
    }, 20s);
    c.stop();
}
