// rediss+sentinel://: TLS to the Sentinels and to the primary they name
// (docs/topologies.md, "TLS"). A TLS fleet (support/sentinel_fleet.hpp):
// the Sentinels name the servers by their TLS ports, so a client that spoke
// plain text anywhere could not lock; CLIENT LIST shows where it came in.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/sentinel_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using corolock::error_code;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

// The laddr= of the CLIENT LIST line of the client named `name`, or "".
std::string local_address_of(redis_server& s, const std::string& name) {
    std::istringstream in(s.cmd1({"CLIENT", "LIST"}));
    for (std::string line; std::getline(in, line);) {
        if (line.find(" name=" + name + " ") == std::string::npos) continue;
        const auto at = line.find(" laddr=");
        if (at == std::string::npos) return {};
        const auto end = line.find(' ', at + 1);
        return line.substr(at + 7, end == std::string::npos ? end : end - at - 7);
    }
    return {};
}

}  // namespace

TEST_CASE("sentinel tls: rediss+sentinel:// locks over TLS, and a wrong CA fails by cause",
          "[sentinel][integration][tls]") {
    sentinel_fleet fleet({.replicas = 1, .sentinels = 2, .tls = true});
    asio::io_context ioc;
    auto cfg = corolock::config::from_url(fleet.url());
    REQUIRE(cfg.tls.enabled);
    cfg.tls.ca_file = fleet.ca_file();
    cfg.connect_timeout = 2s;
    cfg.command_timeout = 2s;
    cfg.client_name = "tls-sentinel-probe";

    {
        corolock::client c(ioc.get_executor(), cfg);
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "tls-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 5s}, use_nothrow);
            REQUIRE(ec == error_code{});
            CHECK_FALSE(fleet.server(0).cmd1({"HGET", lock_key("tls-lock"), "owner"}).empty());
            // The lock connection came in on the primary's TLS port.
            CHECK(local_address_of(fleet.server(0), "tls-sentinel-probe") ==
                  "127.0.0.1:" + std::to_string(fleet.server(0).tls_port()));
            const auto released = co_await g.release();
            CHECK(released == error_code{});
        }, 30s);
        CHECK(c.last_error().code == error_code{});
        c.stop();
    }

    {  // a CA that signed none of the certificates: the wait ends (as any
       // Sentinel failure: never_connected after connect_timeout) naming
       // the TLS cause of each Sentinel
        auto wrong = cfg;
        wrong.tls.ca_file = fleet.wrong_ca_file();
        corolock::client c(ioc.get_executor(), wrong);
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "tls-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 3s}, use_nothrow);
            INFO(ec.message() << ": " << c.last_error().message);
            CHECK(ec == error::never_connected);
            for (std::size_t i = 0; i < fleet.sentinels(); ++i)
                CHECK_THAT(c.last_error().message,
                           Catch::Contains("sentinel 127.0.0.1:" +
                                           std::to_string(fleet.sentinel(i).tls_port()) +
                                           ": TLS handshake: certificate verify failed"));
        }, 30s);
        c.stop();
    }
}
