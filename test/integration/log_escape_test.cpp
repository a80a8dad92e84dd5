// Library log lines cannot be forged: lock names and server error text reach
// the log escaped (printable.hpp), so a newline cannot start a line of its own
// and an escape sequence cannot reach a terminal.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::error;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;
constexpr std::string_view line_prefix = "[corolock-log] ";

// Each captured line must be one the logger wrote (it starts with the
// pattern's prefix) and hold no control byte.
void check_unforged(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    int count = 0;
    while (std::getline(lines, line)) {
        ++count;
        INFO("line " << count << ": " << corolock::printable(line));
        CHECK(line.rfind(line_prefix, 0) == 0);
        const bool control = std::any_of(line.begin(), line.end(), [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return u < 0x20 || u == 0x7f;
        });
        CHECK_FALSE(control);
    }
    CHECK(count > 0);
}

}  // namespace

TEST_CASE("log: lock names and server error text are escaped in every line",
          "[log][integration][proxy]") {
    redis_server server;
    fault_proxy proxy(server.port());
    std::ostringstream log_text;
    auto logger = std::make_shared<spdlog::logger>(
        "log-escape", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text));
    logger->set_pattern(std::string(line_prefix) + "%v");
    logger->set_level(spdlog::level::trace);

    auto cfg = config_for(server);
    cfg.port = proxy.port();
    cfg.logger = logger;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), cfg);
    const std::string name = "x\ncorolock: released lock cleanly \x1b[2J";
    // A blob error may hold any byte; a real server's could too.
    const std::string server_text = "ERR evil\nforged line \x1b[2J\x07\r\x7f";
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        // Lines naming the lock: bad options (debug), a release (debug), and
        // a lease lost when its key vanished (warn).
        corolock::mutex holder(c, name), other(c, name);
        auto [bad, none] = co_await other.async_acquire({.lease = -1s}, use_nothrow);
        CHECK(bad == error::invalid_argument);
        auto g = co_await holder.acquire({.lease = 5s});
        co_await g.release();
        auto lease = co_await holder.acquire({.lease = 300ms});
        server.cmd({"DEL", lock_key(name)});
        const bool lost = co_await eventually([&] { return lease.lost(); }, 3000ms);
        CHECK(lost);

        // A server error: the proxy swallows ECHO's reply and puts the
        // hostile error in its place.
        proxy.drop_next_reply(
            fault_proxy::after_drop::forward,
            [](const fault_proxy::command_args& a) { return !a.empty() && a[0] == "ECHO"; },
            [&] {
                // Appended, not `"!" + std::string&&`: g++ 12 at -O3 reports a
                // false -Wrestrict for that (GCC bug 105329).
                std::string frame = "!";
                frame += std::to_string(server_text.size());
                frame += "\r\n";
                frame += server_text;
                frame += "\r\n";
                proxy.inject_to_client(frame);
            });
        auto [ec, r] = co_await c.async_exec(command{"ECHO", "hi"}, use_nothrow);
        CHECK(ec == error::server_error);
        CHECK(r.str == server_text);  // the reply itself is the server's, unchanged
    }, 20s);
    c.stop();

    const std::string logged = log_text.str();
    INFO("log: " << corolock::printable(logged));
    check_unforged(logged);
    // The hostile text was logged, escaped.
    const std::string shown = "x\\ncorolock: released lock cleanly \\x1b[2J";
    CHECK_THAT(logged, Catch::Contains("acquire " + shown + ": "));
    CHECK_THAT(logged, Catch::Contains("release " + shown + " level 1: ok"));
    CHECK_THAT(logged, Catch::Contains("lock " + shown + " lost: "));
    CHECK_THAT(logged, Catch::Contains("server error: ECHO: ERR evil\\nforged line \\x1b[2J\\x07\\r\\x7f"));
}
