// corolock's error category, its generic conditions and the fatal-error test.
#include <corolock/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/errc.hpp>
#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <string>

using corolock::condition;
using corolock::error;
using corolock::error_code;

namespace {
constexpr int first_error = static_cast<int>(error::invalid_argument);
constexpr int last_error = static_cast<int>(error::no_functions);

error_code generic(boost::system::errc::errc_t e) { return boost::system::errc::make_error_code(e); }
}  // namespace

TEST_CASE("error: every code has its own message in the corolock category", "[unit][error]") {
    std::set<std::string> seen;
    for (int v = first_error; v <= last_error; ++v) {
        const error_code ec = static_cast<error>(v);
        INFO(v);
        CHECK(ec.value() == v);
        CHECK(std::string(ec.category().name()) == "corolock");
        CHECK(&ec.category() == &corolock::error_category());
        CHECK(ec.failed());
        CHECK(!ec.message().empty());
        CHECK(ec.message().find("unknown") == std::string::npos);
        CHECK(seen.insert(ec.message()).second);
    }
    CHECK(seen.size() == static_cast<std::size_t>(last_error - first_error + 1));
    // Values outside the enumeration still get a message rather than UB.
    CHECK_THAT(corolock::error_category().message(0), Catch::Contains("unknown corolock error 0"));
    CHECK_THAT(corolock::error_category().message(999), Catch::Contains("999"));
}

TEST_CASE("error: the condition category has a name and a message per condition", "[unit][error]") {
    CHECK(std::string(corolock::condition_category().name()) == "corolock.condition");
    std::set<std::string> seen;
    for (condition c : {condition::timeout, condition::connection_failure,
                        condition::lock_unavailable, condition::lease_gone}) {
        const boost::system::error_condition cond = c;
        CHECK(&cond.category() == &corolock::condition_category());
        CHECK(!cond.message().empty());
        CHECK(seen.insert(cond.message()).second);
    }
}

TEST_CASE("error: system_error carries the code and its message", "[unit][error]") {
    const boost::system::system_error e(error::lock_lost, "renew");
    CHECK(e.code() == error::lock_lost);
    CHECK(e.code() == condition::lease_gone);
    CHECK_THAT(std::string(e.what()), Catch::Contains("renew") && Catch::Contains("lease was lost"));
}

TEST_CASE("error: the timeout condition", "[unit][error]") {
    namespace ae = boost::asio::error;
    CHECK(error_code(error::timeout) == condition::timeout);
    CHECK(error_code(error::wait_timeout) == condition::timeout);
    CHECK(error_code(error::connect_timeout) == condition::timeout);
    CHECK(error_code(ae::timed_out) == condition::timeout);
    CHECK(generic(boost::system::errc::timed_out) == condition::timeout);
    // The comparison is symmetric.
    CHECK(condition::timeout == error_code(error::wait_timeout));

    CHECK(error_code(error::lock_held) != condition::timeout);
    CHECK(error_code(error::connection_lost) != condition::timeout);
    CHECK(error_code(ae::operation_aborted) != condition::timeout);
    CHECK(error_code() != condition::timeout);
}

TEST_CASE("error: the connection_failure condition", "[unit][error]") {
    namespace ae = boost::asio::error;
    using errc = boost::system::errc::errc_t;
    for (error_code ec :
         {error_code(error::connect_timeout), error_code(error::connection_lost),
          error_code(error::not_connected), error_code(error::resolve_failed),
          error_code(error::tls_handshake_failed), error_code(ae::connection_refused),
          error_code(ae::connection_reset), error_code(ae::connection_aborted),
          error_code(ae::broken_pipe), error_code(ae::eof), error_code(ae::not_connected),
          error_code(ae::host_unreachable), error_code(ae::network_unreachable),
          error_code(ae::timed_out), error_code(ae::host_not_found),
          error_code(ae::host_not_found_try_again), generic(errc::connection_refused),
          generic(errc::connection_reset), generic(errc::broken_pipe)}) {
        INFO(ec.category().name() << ":" << ec.value() << " " << ec.message());
        CHECK(ec == condition::connection_failure);
    }
    for (error_code ec : {error_code(), error_code(error::timeout), error_code(error::server_error),
                          error_code(error::auth_failed), error_code(error::client_stopped),
                          error_code(error::protocol_error), error_code(ae::operation_aborted),
                          error_code(ae::would_block), generic(errc::invalid_argument)}) {
        INFO(ec.category().name() << ":" << ec.value() << " " << ec.message());
        CHECK(ec != condition::connection_failure);
    }
}

TEST_CASE("error: the lock_unavailable and lease_gone conditions", "[unit][error]") {
    CHECK(error_code(error::lock_held) == condition::lock_unavailable);
    CHECK(error_code(error::wait_timeout) == condition::lock_unavailable);
    CHECK(error_code(error::timeout) != condition::lock_unavailable);
    CHECK(error_code(error::not_owner) != condition::lock_unavailable);

    CHECK(error_code(error::not_owner) == condition::lease_gone);
    CHECK(error_code(error::expired) == condition::lease_gone);
    CHECK(error_code(error::lock_lost) == condition::lease_gone);
    CHECK(error_code(error::released) != condition::lease_gone);
    CHECK(error_code(error::lock_held) != condition::lease_gone);
}

TEST_CASE("error: each corolock code belongs to exactly the documented conditions",
          "[unit][error]") {
    // The full table, so a new enumerator or a changed mapping is noticed.
    struct row {
        error e;
        bool timeout, connection_failure, lock_unavailable, lease_gone;
    };
    const row rows[] = {
        {error::invalid_argument, false, false, false, false},
        {error::invalid_url, false, false, false, false},
        {error::connect_timeout, true, true, false, false},
        {error::resolve_failed, false, true, false, false},
        {error::tls_handshake_failed, false, true, false, false},
        {error::auth_failed, false, false, false, false},
        {error::handshake_failed, false, false, false, false},
        {error::connection_lost, false, true, false, false},
        {error::not_connected, false, true, false, false},
        {error::timeout, true, false, false, false},
        {error::client_stopped, false, false, false, false},
        {error::protocol_error, false, false, false, false},
        {error::reply_too_large, false, false, false, false},
        {error::nesting_too_deep, false, false, false, false},
        {error::unexpected_reply, false, false, false, false},
        {error::server_error, false, false, false, false},
        {error::wrong_type, false, false, false, false},
        {error::no_script, false, false, false, false},
        {error::lock_held, false, false, true, false},
        {error::wait_timeout, true, false, true, false},
        {error::not_owner, false, false, false, true},
        {error::expired, false, false, false, true},
        {error::lock_lost, false, false, false, true},
        {error::released, false, false, false, false},
        {error::never_connected, false, true, false, false},
        {error::no_permission, false, false, false, false},
        {error::server_too_old, false, false, false, false},
        {error::drain_timeout, true, false, false, false},
        {error::no_primary, false, true, false, false},
        {error::cluster_down, false, true, false, false},
        {error::replicas_missing, false, false, false, false},
        {error::upgrade_refused, false, false, false, false},
        {error::not_supported, false, false, false, false},
        {error::stale_token, false, false, false, true},
        {error::no_functions, false, false, false, false},
    };
    REQUIRE(std::size(rows) == static_cast<std::size_t>(last_error - first_error + 1));
    for (const auto& r : rows) {
        const error_code ec = r.e;
        INFO(ec.message());
        CHECK((ec == condition::timeout) == r.timeout);
        CHECK((ec == condition::connection_failure) == r.connection_failure);
        CHECK((ec == condition::lock_unavailable) == r.lock_unavailable);
        CHECK((ec == condition::lease_gone) == r.lease_gone);
    }
}

TEST_CASE("error: fatal connection errors are the ones that need a new connection",
          "[unit][error]") {
    namespace ae = boost::asio::error;
    for (error_code ec :
         {error_code(error::connection_lost), error_code(error::not_connected),
          error_code(error::connect_timeout), error_code(error::resolve_failed),
          error_code(error::tls_handshake_failed), error_code(error::handshake_failed),
          error_code(error::auth_failed), error_code(error::protocol_error),
          error_code(error::reply_too_large), error_code(error::nesting_too_deep),
          error_code(error::never_connected), error_code(error::server_too_old),
          error_code(error::no_primary), error_code(ae::eof), error_code(ae::connection_reset), error_code(ae::broken_pipe),
          error_code(ae::connection_refused), error_code(ae::timed_out),
          generic(boost::system::errc::connection_reset)}) {
        INFO(ec.category().name() << ":" << ec.value() << " " << ec.message());
        CHECK(corolock::is_fatal_connection_error(ec));
    }
    for (error_code ec :
         {error_code(), error_code(error::invalid_argument), error_code(error::server_error),
          error_code(error::wrong_type), error_code(error::no_script),
          error_code(error::unexpected_reply), error_code(error::lock_held),
          error_code(error::wait_timeout), error_code(error::not_owner),
          error_code(error::lock_lost), error_code(error::timeout),
          error_code(error::client_stopped), error_code(error::released),
          error_code(error::no_permission), error_code(error::drain_timeout),
          error_code(error::cluster_down), error_code(error::replicas_missing),
          error_code(error::upgrade_refused), error_code(error::not_supported),
          error_code(error::stale_token), error_code(error::no_functions),
          error_code(ae::operation_aborted), generic(boost::system::errc::invalid_argument)}) {
        INFO(ec.category().name() << ":" << ec.value() << " " << ec.message());
        CHECK_FALSE(corolock::is_fatal_connection_error(ec));
    }
}
