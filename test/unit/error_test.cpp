// corolock's error category, its generic conditions and the fatal-error test.
#include <corolock/error.hpp>

#include <boost/asio/error.hpp>

#include <catch2/catch.hpp>

#include <set>

using corolock::condition;
using corolock::error;
using corolock::error_code;

namespace {
constexpr int first_error = static_cast<int>(error::invalid_argument);
constexpr int last_error = static_cast<int>(error::released);
}  // namespace

TEST_CASE("error: every code has its own message in the corolock category", "[unit][error]") {
    std::set<std::string> seen;
    for (int v = first_error; v <= last_error; ++v) {
        const error_code ec = static_cast<error>(v);
        INFO(v);
        CHECK(std::string(ec.category().name()) == "corolock");
        CHECK(!ec.message().empty());
        CHECK(ec.message().find("unknown") == std::string::npos);
        CHECK(seen.insert(ec.message()).second);
    }
    CHECK(seen.size() == static_cast<std::size_t>(last_error - first_error + 1));
}

TEST_CASE("error: generic conditions group codes across layers", "[unit][error]") {
    namespace ae = boost::asio::error;
    CHECK(error_code(error::timeout) == condition::timeout);
    CHECK(error_code(error::wait_timeout) == condition::timeout);
    CHECK(error_code(error::connect_timeout) == condition::timeout);
    CHECK(error_code(ae::timed_out) == condition::timeout);
    CHECK(error_code(error::lock_held) != condition::timeout);

    CHECK(error_code(error::connect_timeout) == condition::connection_failure);
    CHECK(error_code(error::connection_lost) == condition::connection_failure);
    CHECK(error_code(error::not_connected) == condition::connection_failure);
    CHECK(error_code(ae::connection_refused) == condition::connection_failure);
    CHECK(error_code(ae::eof) == condition::connection_failure);
    CHECK(error_code(error::server_error) != condition::connection_failure);

    CHECK(error_code(error::lock_held) == condition::lock_unavailable);
    CHECK(error_code(error::wait_timeout) != condition::lock_unavailable);

    CHECK(error_code(error::not_owner) == condition::lease_gone);
    CHECK(error_code(error::expired) == condition::lease_gone);
    CHECK(error_code(error::lock_lost) == condition::lease_gone);
    CHECK(error_code(error::released) != condition::lease_gone);

    CHECK(std::string(corolock::condition_category().name()) == "corolock.condition");
}

TEST_CASE("error: fatal connection errors are the ones that need a new connection",
          "[unit][error]") {
    namespace ae = boost::asio::error;
    for (error_code ec : {error_code(error::connection_lost), error_code(error::protocol_error),
                          error_code(error::auth_failed), error_code(ae::eof),
                          error_code(ae::connection_reset), error_code(ae::broken_pipe)}) {
        INFO(ec.message());
        CHECK(corolock::is_fatal_connection_error(ec));
    }
    for (error_code ec : {error_code(), error_code(error::server_error), error_code(error::wrong_type),
                          error_code(error::lock_held), error_code(error::timeout),
                          error_code(ae::operation_aborted)}) {
        INFO(ec.message());
        CHECK_FALSE(corolock::is_fatal_connection_error(ec));
    }
}
