// rediss+cluster://: every node reached over TLS at the tls-port CLUSTER
// SHARDS names (docs/topologies.md, "TLS"). A TLS cluster
// (support/cluster_fleet.hpp) with tls-cluster, so that the cluster itself
// names its nodes by their TLS ports; CLIENT LIST shows where the lock
// connections came in.
#include <corolock/corolock.hpp>

#include "redis/topology/slot_map.hpp"
#include "redis/lock/scripts.hpp"
#include "support/async_test.hpp"
#include "support/cluster_fleet.hpp"
#include "support/lock_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error_code;
using corolock::detail::cluster::key_slot;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

// How many normal clients came in on `port` (the fixture's own connection,
// the one running CLIENT LIST, left out).
int clients_on(redis_server& s, std::uint16_t port) {
    std::istringstream in(s.cmd1({"CLIENT", "LIST", "TYPE", "normal"}));
    int n = 0;
    for (std::string line; std::getline(in, line);)
        if (line.find(" laddr=127.0.0.1:" + std::to_string(port) + " ") != std::string::npos &&
            line.find(" cmd=client|list ") == std::string::npos)
            ++n;
    return n;
}

}  // namespace

TEST_CASE("cluster tls: rediss+cluster:// locks on every primary over TLS, and a wrong CA fails",
          "[cluster][integration][tls]") {
    cluster_fleet fleet({.tls = true});
    asio::io_context ioc;
    auto a = fleet.open_backend(ioc.get_executor());
    auto b = fleet.open_backend(ioc.get_executor());
    CHECK(a.scheme() == "rediss+cluster");

    // One name per primary (by the slot's owner), the first also contended.
    std::map<redis_server*, std::string> names;
    for (int i = 0; i < 1000 && names.size() < 3; ++i) {
        const std::string name = "tls-" + std::to_string(i);
        auto* owner = fleet.primary_of_slot(key_slot(name));
        REQUIRE(owner != nullptr);
        names.emplace(owner, name);
    }
    REQUIRE(names.size() == 3);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        for (const auto& [owner, name] : names) {
            CAPTURE(name, owner->port());
            corolock::mutex ma(a, name);
            corolock::mutex mb(b, name);
            auto ga = co_await ma.acquire({.lease = 10s});
            CHECK(owner->cmd1({"EXISTS", lock_key(name)}) == "1");
            // A contended wait, woken by the sharded unlock message.
            std::optional<corolock::guard> gb;
            bool done = false;
            asio::co_spawn(
                ioc,
                [&]() -> asio::awaitable<void> {
                    auto [ec, g] = co_await mb.async_acquire({.lease = 10s, .wait = 20s},
                                                             use_nothrow);
                    CHECK(ec == error_code{});
                    if (!ec) gb.emplace(std::move(g));
                    done = true;
                },
                asio::detached);
            const std::string channel(corolock::detail::lock_keys(name).channel());
            const bool subscribed = co_await eventually(
                [&] {
                    const auto r = owner->cmd({"PUBSUB", "SHARDNUMSUB", channel});
                    return r.size() == 2 && r[1] == "1";
                },
                5s);
            REQUIRE(subscribed);
            const auto released = co_await ga.release();
            CHECK(released == error_code{});
            const bool granted = co_await eventually([&] { return done; }, 5s);
            REQUIRE(granted);
            REQUIRE(gb.has_value());
            CHECK(gb->token() > ga.token());
            const auto released_b = co_await gb->release();
            CHECK(released_b == error_code{});
            // Every lock connection to this primary came in on its TLS port.
            CHECK(clients_on(*owner, owner->tls_port()) > 0);
            CHECK(clients_on(*owner, owner->port()) == 0);
        }
    }, 60s);

    // A CA that signed none of the certificates: a TLS error within the
    // wait, not a hang.
    const std::string wrong_url = fleet.url() + "?tls_ca=" + fleet.wrong_ca_file();
    corolock::backend wrong(ioc.get_executor(), wrong_url);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(wrong, names.begin()->second);
        auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 3s}, use_nothrow);
        INFO(ec.message());
        CHECK(ec == corolock::error::tls_handshake_failed);
    }, 30s);
}
