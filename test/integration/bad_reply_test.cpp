// The bad-input row "a malformed or oversized server reply" (the other rows
// are in bad_input_test.cpp). A client talks to the server through the
// fault proxy, which puts bad bytes into its reply stream; a bystander client
// on a connection of its own holds a lock and runs commands meanwhile.
//
// Each case checks that the client names the problem (its log says which
// byte of the stream was wrong and why), fails the command that was waiting
// for that reply at once with the parser's own error (protocol_error or
// reply_too_large: not a garbage reply, not a timeout, not a bare
// connection_lost), drops that connection and reconnects; and that the
// bystander is not disturbed: its lock stays held and renewed with the same
// token, and every one of its commands succeeds.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/bystander.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>

#include <optional>
#include <sstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::error;
using corolock::error_code;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

struct bad_reply_row {
    const char* name;
    std::string injected;     // bytes the proxy puts into the reply stream ("": none)
    bool big_value;           // the command in flight reads a value over the limit
    error_code parser_error;  // what the client's parser reports
    const char* diagnostic;   // and the words its log line must contain
};

}  // namespace

TEST_CASE("bad input: a malformed or oversized server reply", "[bad-input][integration][proxy]") {
    const auto row = GENERATE(
        bad_reply_row{"malformed (unknown type byte)", "@oops\r\n", false, error::protocol_error,
                      "unknown RESP3 type byte '@' at byte "},
        bad_reply_row{"oversized (bulk length over the limit)", "$1048576\r\n", false,
                      error::reply_too_large, "length 1048576 in '$' header exceeds the limit of 4096 bytes"},
        bad_reply_row{"oversized (a real value over the limit)", "", true, error::reply_too_large,
                      "exceeds the limit of 4096 bytes"});
    INFO(row.name);
    redis_server server;
    fault_proxy proxy(server.port());
    std::ostringstream log_text;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text);
    auto logger = std::make_shared<spdlog::logger>("bad-reply", sink);
    logger->set_level(spdlog::level::warn);

    asio::io_context ioc;
    auto cfg = plain_config_for(server);  // BLPOP and GET of a plain key
    cfg.port = proxy.port();
    cfg.max_bulk_length = 4096;
    cfg.logger = logger;
    corolock::client victim(ioc.get_executor(), cfg);
    corolock::client other(ioc.get_executor(), config_for(server));
    bystander b(other, "bad-reply");
    if (row.big_value) server.cmd({"SET", "big", std::string(5000, 'v')});

    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(victim);
        co_await b.begin();
        const auto before = victim.stats();

        // A command waiting for its reply when the bad bytes come: a BLPOP
        // the server holds (for longer than the command timeout), or a GET of
        // a value over the limit.
        std::optional<error_code> result;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            // Built outside the co_await: g++ 12 destroys a conditional's
            // temporary twice inside one.
            command cmd = row.big_value ? command{"GET", "big"} : command{"BLPOP", "empty-list", "10"};
            auto [ec, r] = co_await victim.async_exec(std::move(cmd), use_nothrow);
            result = ec;
        }, asio::detached);
        if (!row.big_value) {
            const bool waiting = co_await eventually([&] { return !proxy.unanswered().empty(); }, 2000ms);
            REQUIRE(waiting);
        }
        const auto fault_at = corolock::guard::clock::now();
        if (!row.injected.empty()) CHECK(proxy.inject_to_client(row.injected) == 1);

        const bool completed = co_await eventually([&] { return result.has_value(); }, 3000ms);
        REQUIRE(completed);
        const auto took = corolock::guard::clock::now() - fault_at;
        CHECK(*result == row.parser_error);
        CHECK(took < 1s);  // at once, not at the command timeout (2 s)

        // The client said why, and dropped that connection for a new one.
        const bool reconnected = co_await eventually([&] {
            return victim.is_connected() && victim.stats().connects == before.connects + 1;
        }, 3000ms);
        CHECK(reconnected);
        CHECK(victim.stats().disconnects == before.disconnects + 1);
        const std::string logged = log_text.str();
        INFO("log: " << logged);
        CHECK_THAT(logged, Catch::Contains("protocol error: ") && Catch::Contains(row.diagnostic));
        CHECK_THAT(logged, Catch::Contains(row.parser_error.message()));
        const auto st = proxy.stats();
        CHECK(st.accepted == 2);
        CHECK(st.connections.front().closed_at.has_value());
        // The new connection works.
        auto [ec, pong] = co_await victim.async_exec(command{"PING"}, use_nothrow);
        CHECK_FALSE(ec);
        CHECK(pong.str == "PONG");

        co_await b.end(server, fault_at);
        CHECK(b.sent() > 10);
    }, 30s);
    victim.stop();
    other.stop();
}
