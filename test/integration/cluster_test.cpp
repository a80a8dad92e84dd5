// A Redis Cluster as a lock backend (redis+cluster://): three primaries with
// a replica each (support/cluster_fleet.hpp). Locks over names on every
// primary, each lock's keys on its slot's primary, and the unlock message
// sent by sharded pub/sub on the lock's shard only (or, from a cluster
// without CLUSTER SHARDS, as Redis 6 is, by classic pub/sub).
#include <corolock/corolock.hpp>

#include "redis/topology/cluster_router.hpp"
#include "redis/topology/slot_map.hpp"
#include "redis/lock/scripts.hpp"
#include "support/async_test.hpp"
#include "support/cluster_fleet.hpp"
#include "support/lock_testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using corolock::error_code;
using corolock::detail::cluster::key_slot;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

// A CLUSTER INFO field as a number (absent: 0, as the server leaves out
// counters that never moved).
// The number after `label` in an INFO-style text; 0 when it is absent.
long number_after(const std::string& text, const std::string& label) {
    const auto at = text.find(label);
    if (at == std::string::npos) return 0;
    return std::stol(text.substr(at + label.size()));
}

long info_field(redis_server& n, const std::string& field) {
    return number_after(n.cmd1({"CLUSTER", "INFO"}), field + ":");
}

// How many SPUBLISH commands the node has run (scripts' calls included).
long spublish_calls(redis_server& n) {
    return number_after(n.cmd1({"INFO", "commandstats"}), "cmdstat_spublish:calls=");
}

// A seed node that looks like Redis 6 to the client: a TCP relay to a real
// node that turns CLUSTER SHARDS (new in 7.0) into a subcommand the node
// does not know, so that the node answers as Redis 6 would ("ERR unknown
// subcommand"). Every other request, and every reply, passes unchanged and
// in order. Only the client's seed connection goes through it: the slot map
// then names the real nodes.
using tcp = asio::ip::tcp;

// The length of the request (an array of bulk strings) at the front of
// `in`, its arguments in `args`; 0 while it is incomplete.
std::size_t parse_request(std::string_view in, std::vector<std::string_view>& args) {
    args.clear();
    std::size_t pos = 0;
    auto line = [&]() -> std::optional<std::string_view> {
        const auto end = in.find("\r\n", pos);
        if (end == std::string_view::npos) return std::nullopt;
        const auto l = in.substr(pos, end - pos);
        pos = end + 2;
        return l;
    };
    auto number = [](std::string_view l, char type) {
        std::size_t n = 0;
        if (l.empty() || l[0] != type ||
            std::from_chars(l.data() + 1, l.data() + l.size(), n).ec != std::errc{} ||
            n > (1u << 20))
            throw std::runtime_error("not a request");
        return n;
    };
    const auto head = line();
    if (!head) return 0;
    const auto count = number(*head, '*');
    for (std::size_t i = 0; i < count; ++i) {
        const auto len_line = line();
        if (!len_line) return 0;
        const auto len = number(*len_line, '$');
        if (in.size() < pos + len + 2) return 0;
        args.push_back(in.substr(pos, len));
        pos += len + 2;
    }
    return pos;
}

bool same_word(std::string_view a, std::string_view b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
        return std::toupper(static_cast<unsigned char>(x)) ==
               std::toupper(static_cast<unsigned char>(y));
    });
}

asio::awaitable<void> pass_replies(tcp::socket& from, tcp::socket& to) {
    std::array<char, 4096> chunk;
    for (;;) {
        auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), use_nothrow);
        if (ec) co_return;
        auto [wec, written] = co_await asio::async_write(to, asio::buffer(chunk.data(), n),
                                                         use_nothrow);
        if (wec) co_return;
    }
}

asio::awaitable<void> rewrite_requests(tcp::socket& from, tcp::socket& to, int& rewritten) {
    std::array<char, 4096> chunk;
    std::string pending;
    std::vector<std::string_view> args;
    for (;;) {
        auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), use_nothrow);
        if (ec) co_return;
        pending.append(chunk.data(), n);
        std::string out;
        for (std::size_t used = 0; (used = parse_request(pending, args)) != 0;) {
            if (args.size() == 2 && same_word(args[0], "CLUSTER") && same_word(args[1], "SHARDS")) {
                ++rewritten;
                out += "*2\r\n$7\r\nCLUSTER\r\n$7\r\nSHARDS6\r\n";
            } else {
                out.append(pending, 0, used);
            }
            pending.erase(0, used);
        }
        if (out.empty()) continue;
        auto [wec, written] = co_await asio::async_write(to, asio::buffer(out), use_nothrow);
        if (wec) co_return;
    }
}

asio::awaitable<void> relay(tcp::socket client, std::uint16_t node, std::shared_ptr<int> rewritten) {
    tcp::socket server(client.get_executor());
    auto [ec] = co_await server.async_connect({asio::ip::make_address("127.0.0.1"), node},
                                              use_nothrow);
    if (ec) co_return;
    try {
        co_await (rewrite_requests(client, server, *rewritten) || pass_replies(server, client));
    } catch (const std::exception&) {
        // Bytes that are not a request: drop the connection.
    }
}

asio::awaitable<void> accept_seeds(tcp::acceptor acceptor, std::uint16_t node,
                                   std::shared_ptr<int> rewritten) {
    for (int i = 0; i < 64; ++i) {
        auto [ec, s] = co_await acceptor.async_accept(use_nothrow);
        if (ec) co_return;
        asio::co_spawn(acceptor.get_executor(), relay(std::move(s), node, rewritten),
                       asio::detached);
    }
}

// A waiter for a held lock, started in the background: `got` holds its guard
// once `done`.
struct background_waiter {
    std::optional<corolock::guard> got;
    bool done = false;

    void start(asio::io_context& ioc, corolock::mutex& m, std::chrono::milliseconds wait) {
        asio::co_spawn(
            ioc,
            [this, &m, wait]() -> asio::awaitable<void> {
                auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = wait}, use_nothrow);
                CHECK(ec == error_code{});
                if (!ec) got.emplace(std::move(g));
                done = true;
            },
            asio::detached);
    }

    // Releases `held` and expects this waiter to get the lock within
    // `limit`, with a higher token.
    asio::awaitable<void> takes_over(corolock::guard& held, std::chrono::milliseconds limit) {
        const auto released = co_await held.release();
        CHECK(released == error_code{});
        const bool granted = co_await eventually([&] { return done; }, limit);
        REQUIRE(granted);
        REQUIRE(got.has_value());
        CHECK(got->token() > held.token());
    }
};

}  // namespace

TEST_CASE("cluster: locks on every primary exclude each other and their tokens rise",
          "[cluster][integration]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    auto a = fleet.open_backend(ioc.get_executor());
    auto b = fleet.open_backend(ioc.get_executor());
    CHECK(a.scheme() == "redis+cluster");

    // Names until each primary serves at least 8 of them.
    std::map<std::uint16_t, int> per_primary;
    std::vector<std::string> names;
    for (int i = 0; i < 1000 && (per_primary.size() < 3 || std::any_of(
                                     per_primary.begin(), per_primary.end(),
                                     [](const auto& p) { return p.second < 8; }));
         ++i) {
        const std::string name = "spread-" + std::to_string(i);
        auto* owner = fleet.primary_of_slot(key_slot(name));
        REQUIRE(owner != nullptr);
        if (per_primary[owner->port()] >= 8) continue;
        ++per_primary[owner->port()];
        names.push_back(name);
    }
    REQUIRE(per_primary.size() == 3);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        for (const auto& name : names) {
            CAPTURE(name);
            corolock::mutex ma(a, name);
            corolock::mutex mb(b, name);
            auto ga = co_await ma.acquire({.lease = 5s});
            // The lock's keys live on its slot's primary.
            const corolock::detail::lock_keys keys(name);
            auto* owner = fleet.primary_of_slot(key_slot(name));
            REQUIRE(owner != nullptr);
            CHECK(owner->cmd1({"EXISTS", std::string(keys.lock())}) == "1");
            CHECK(owner->cmd1({"EXISTS", std::string(keys.fence())}) == "1");
            auto held = co_await mb.try_acquire({.lease = 5s});
            CHECK_FALSE(held.has_value());
            const auto released = co_await ga.release();
            CHECK(released == error_code{});
            auto gb = co_await mb.try_acquire({.lease = 5s});
            REQUIRE(gb.has_value());
            CHECK(gb->token() > ga.token());
            const auto released_b = co_await gb->release();
            CHECK(released_b == error_code{});
        }
        // Replica acknowledgement is refused on a cluster, before any grant.
        corolock::mutex mr(a, names.front());
        auto [rec, rg] = co_await mr.async_acquire({.lease = 5s, .wait = 1s, .replicas = 1},
                                                   use_nothrow);
        CHECK(rec == corolock::error::invalid_argument);
        CHECK(mr.held_levels() == 0);
    }, 60s);
    CHECK(a.metrics().acquisitions == names.size());
    CHECK(b.metrics().acquisitions == names.size());
    // A fresh map: nothing was redirected.
    CHECK(a.metrics().cluster_moved == 0);
    CHECK(a.metrics().cluster_ask == 0);
}

TEST_CASE("cluster: a release is delivered by the lock's shard only", "[cluster][integration]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    auto a = fleet.open_backend(ioc.get_executor());
    auto b = fleet.open_backend(ioc.get_executor());
    const std::string name = "sharded-release";
    const corolock::detail::lock_keys keys(name);
    const std::string channel(keys.channel());
    auto* owner = fleet.primary_of_slot(key_slot(name));
    REQUIRE(owner != nullptr);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex ma(a, name);
        corolock::mutex mb(b, name);
        auto ga = co_await ma.acquire({.lease = 10s});
        background_waiter wb;
        wb.start(ioc, mb, 20s);
        // The waiter's subscription is a shard channel on the slot's primary.
        const bool subscribed = co_await eventually(
            [&] {
                const auto r = owner->cmd({"PUBSUB", "SHARDNUMSUB", channel});
                return r.size() == 2 && r[1] == "1";
            },
            5s);
        REQUIRE(subscribed);
        for (std::size_t i = 0; i < fleet.size(); ++i) {
            auto& n = fleet.node(i);
            CHECK(n.cmd({"PUBSUB", "NUMSUB", channel}).at(1) == "0");  // nothing global
            if (&n != owner) CHECK(n.cmd({"PUBSUB", "SHARDNUMSUB", channel}).at(1) == "0");
        }
        std::vector<long> broadcast_before;
        for (std::size_t i = 0; i < fleet.size(); ++i)
            broadcast_before.push_back(info_field(fleet.node(i), "cluster_stats_messages_publish_received") +
                                       info_field(fleet.node(i), "cluster_stats_messages_publish_sent"));
        const auto spublish_before = spublish_calls(*owner);

        co_await wb.takes_over(ga, 5s);

        // No node sent or received a broadcast PUBLISH over the cluster bus;
        // the owner announced with SPUBLISH, which goes to its own replicas
        // only. (Whether it reached them is the server's affair: right after
        // the cluster formed, a replica's bus link may not be up yet.)
        for (std::size_t i = 0; i < fleet.size(); ++i) {
            CAPTURE(i, fleet.node(i).port(), owner->port());
            CHECK(info_field(fleet.node(i), "cluster_stats_messages_publish_received") +
                      info_field(fleet.node(i), "cluster_stats_messages_publish_sent") ==
                  broadcast_before[i]);
        }
        CHECK(spublish_calls(*owner) > spublish_before);
        const auto released_b = co_await wb.got->release();
        CHECK(released_b == error_code{});
    }, 30s);
}

TEST_CASE("cluster: a node without CLUSTER SHARDS (Redis 6) makes unlock messages classic pub/sub",
          "[cluster][integration]") {
    cluster_fleet fleet;
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    const auto seed_port = acceptor.local_endpoint().port();
    auto rewritten = std::make_shared<int>(0);
    asio::co_spawn(ioc, accept_seeds(std::move(acceptor), fleet.node(0).port(), rewritten),
                   asio::detached);
    auto cfg = corolock::config::from_url("redis+cluster://127.0.0.1:" + std::to_string(seed_port));
    cfg.command_timeout = 2s;
    cfg.connect_timeout = 2s;
    corolock::backend a(ioc.get_executor(), cfg);
    corolock::backend b(ioc.get_executor(), cfg);
    const std::string name = "redis6-release";
    const corolock::detail::lock_keys keys(name);
    const std::string channel(keys.channel());
    auto* owner = fleet.primary_of_slot(key_slot(name));
    REQUIRE(owner != nullptr);

    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex ma(a, name);
        corolock::mutex mb(b, name);
        // Held for longer than the waiter waits: only the unlock message
        // can grant the waiter in time.
        auto ga = co_await ma.acquire({.lease = 30s});
        background_waiter wb;
        wb.start(ioc, mb, 10s);
        // The waiter subscribed with SUBSCRIBE (on the slot's primary), not
        // SSUBSCRIBE.
        const bool subscribed = co_await eventually(
            [&] { return owner->cmd({"PUBSUB", "NUMSUB", channel}).at(1) == "1"; }, 5s);
        REQUIRE(subscribed);
        for (std::size_t i = 0; i < fleet.size(); ++i)
            CHECK(fleet.node(i).cmd({"PUBSUB", "SHARDNUMSUB", channel}).at(1) == "0");
        CHECK(*rewritten >= 2);  // each backend asked its seed for CLUSTER SHARDS
        const auto broadcast_before = info_field(*owner, "cluster_stats_messages_publish_sent");

        co_await wb.takes_over(ga, 12s);
        // The cost: the release's PUBLISH went to every node over the bus.
        CHECK(info_field(*owner, "cluster_stats_messages_publish_sent") > broadcast_before);
        const auto released_b = co_await wb.got->release();
        CHECK(released_b == error_code{});
    }, 40s);
}

TEST_CASE("cluster: corolock::client refuses a cluster URL and says what to use",
          "[cluster][integration]") {
    asio::io_context ioc;
    try {
        corolock::client c(ioc.get_executor(), "redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
        FAIL("no exception");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == corolock::error::invalid_argument);
        CHECK(std::string(e.what()).find("corolock::backend") != std::string::npos);
    }
}
