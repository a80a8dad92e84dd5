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

// docs/security.md, "Sentinel and TLS: the trust model". The fleet's data
// servers have a certificate for data.corolock.test only; its Sentinels, a
// rogue server and a hostile Sentinel one for 127.0.0.1 and localhost, all
// from the one CA the client trusts. The hostile Sentinel names the rogue as
// the primary, by the address 127.0.0.1, as a Sentinel (or whoever answers
// on its port) that lies would.
TEST_CASE("sentinel tls: a pinned tls_server_name refuses a primary without that name, whoever "
          "names it",
          "[sentinel][integration][tls]") {
    const std::string data_name = "data.corolock.test";
    sentinel_fleet fleet({.replicas = 0, .sentinels = 1, .quorum = 1, .tls = true,
                          .data_tls_names = "DNS:" + data_name});
    redis_server_options rogue_options;
    rogue_options.tls = true;
    rogue_options.tls_files_from = fleet.server(0).dir();
    rogue_options.tls_names = std::string(default_tls_names);
    redis_server rogue(rogue_options);
    const std::string service = fleet.options().service;
    redis_server_options hostile_options = rogue_options;
    hostile_options.extra_args = {"--tls-replication", "yes"};
    hostile_options.sentinel_config = {"sentinel monitor " + service + " 127.0.0.1 " +
                                       std::to_string(rogue.tls_port()) + " 1"};
    redis_server hostile(hostile_options);
    const std::string rogue_at = "127.0.0.1:" + std::to_string(rogue.tls_port());
    const std::string hostile_at = "127.0.0.1:" + std::to_string(hostile.tls_port());
    const std::string honest_at = "127.0.0.1:" + std::to_string(fleet.sentinel(0).tls_port());
    REQUIRE(hostile.cmd({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", service}) ==
            std::vector<std::string>{"127.0.0.1", std::to_string(rogue.tls_port())});

    asio::io_context ioc;
    // Each client has a name of its own, for CLIENT LIST.
    auto client_for = [&](const std::string& sentinels, const std::string& query,
                          const std::string& name) {
        auto cfg = corolock::config::from_url("rediss+sentinel://" + sentinels + "/" + service +
                                              query);
        cfg.tls.ca_file = fleet.ca_file();
        // Loose: nothing here waits for it to pass; a Sentinel slower than
        // it would only count as one that did not answer.
        cfg.connect_timeout = 5s;
        cfg.command_timeout = 5s;
        cfg.client_name = name;
        return cfg;
    };
    const std::string pinned =
        "?tls_server_name=" + data_name + "&sentinel_tls_server_name=localhost";
    auto rogue_holds = [&](const std::string& name) {
        return !rogue.cmd1({"HGET", lock_key(name), "owner"}).empty();
    };

    // One fleet for every step (a TLS fleet takes seconds to start).
    {  // unpinned: the primary is checked against the name announced, so the rogue passes
        corolock::client c(ioc.get_executor(), client_for(hostile_at, "", "pin-none"));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "pin-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 20s}, use_nothrow);
            REQUIRE(ec == error_code{});
            CHECK(rogue_holds("pin-lock"));
            const auto released = co_await g.release();
            CHECK(released == error_code{});
        }, 60s);
        c.stop();
    }

    {  // pinned: the rogue is refused before anything is sent to it
        corolock::client c(ioc.get_executor(), client_for(hostile_at, pinned, "pin-rogue"));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "pin-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 20s}, use_nothrow);
            INFO(ec.message() << ": " << c.last_error().message);
            CHECK(ec == error::tls_handshake_failed);
            CHECK_THAT(c.last_error().message,
                       Catch::Contains(rogue_at + ": TLS handshake: certificate verify failed"));
        }, 60s);
        c.stop();
        CHECK_FALSE(rogue_holds("pin-lock"));
        // No connection of the client reached the rogue's HELLO (and its
        // password): the handshake failed first.
        CHECK(rogue.cmd1({"CLIENT", "LIST"}).find("name=pin-rogue ") == std::string::npos);
    }

    {  // pinned: a hostile Sentinel first does not stop an honest one after it
        corolock::client c(ioc.get_executor(),
                           client_for(hostile_at + "," + honest_at, pinned, "pin-both"));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "pin-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 20s}, use_nothrow);
            INFO(c.last_error().message);
            REQUIRE(ec == error_code{});
            CHECK_FALSE(fleet.server(0).cmd1({"HGET", lock_key("pin-lock"), "owner"}).empty());
            CHECK(local_address_of(fleet.server(0), "pin-both") ==
                  "127.0.0.1:" + std::to_string(fleet.server(0).tls_port()));
            CHECK_FALSE(rogue_holds("pin-lock"));
            const auto released = co_await g.release();
            CHECK(released == error_code{});
        }, 60s);
        c.stop();
    }

    {  // tls_server_name alone also checks the Sentinels against it, as before
        corolock::client c(ioc.get_executor(),
                           client_for(honest_at, "?tls_server_name=" + data_name, "pin-compat"));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            const std::string expected =
                "sentinel " + honest_at + ": TLS handshake: certificate verify failed";
            const bool named = co_await eventually(
                [&] { return c.last_error().message.find(expected) != std::string::npos; }, 20s);
            INFO(c.last_error().message);
            CHECK(named);
        }, 60s);
        c.stop();
        // With the Sentinels' own name pinned too, the same fleet works.
        corolock::client ok(ioc.get_executor(), client_for(honest_at, pinned, "pin-honest"));
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(ok, "pin-lock");
            auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 20s}, use_nothrow);
            REQUIRE(ec == error_code{});
            const auto released = co_await g.release();
            CHECK(released == error_code{});
        }, 60s);
        ok.stop();
    }
}
