// The RedLock URL (src/redlock/redlock_url.hpp): every host becomes a node,
// sharing credentials, database and query; node_timeout_ms is RedLock's;
// what is malformed is refused with error::invalid_url, never echoing the
// password; backend(ex, url) opens RedLock by it, and open_redlock over
// backends the caller opened.
#include "redlock/redlock_url.hpp"

#include <corolock/backend.hpp>
#include <corolock/config.hpp>
#include <corolock/redlock.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using corolock::config;
using corolock::error;
using corolock::detail::parse_redlock_url;

TEST_CASE("redlock url: every host is a node with the shared credentials, db and query",
          "[unit][redlock][url]") {
    const auto r = parse_redlock_url(
        "REDLOCK+REDISS://app:s3cret@a.example:7001,b.example,[::1]:7003/2?tls_verify=no&"
        "node_timeout_ms=75");
    REQUIRE(r.nodes.size() == 3);
    CHECK(r.nodes[0] == "rediss://app:s3cret@a.example:7001/2?tls_verify=no");
    CHECK(r.options.node_timeout == std::chrono::milliseconds(75));
    const std::vector<std::pair<std::string, std::uint16_t>> want = {
        {"a.example", 7001}, {"b.example", 6379}, {"::1", 7003}};
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("node " << i);
        const auto c = config::from_url(r.nodes[i]);
        CHECK(c.host == want[i].first);
        CHECK(c.port == want[i].second);
        CHECK(c.username == "app");
        CHECK(c.password == "s3cret");
        CHECK(c.database == 2);
        CHECK(c.tls.enabled);
        CHECK_FALSE(c.tls.verify_peer);
    }
    for (const auto* plain : {"redlock://h1,h2:6380,h3:6381", "redlock+redis://h1,h2:6380,h3:6381"}) {
        const auto p = parse_redlock_url(plain);
        REQUIRE(p.nodes.size() == 3);
        CHECK(p.nodes[2] == "redis://h3:6381");
        CHECK(p.options.node_timeout == corolock::detail::redlock_options{}.node_timeout);
    }
    CHECK(parse_redlock_url("redlock://h1,h2,h3,h4,h5").nodes.size() == 5);
}

TEST_CASE("redlock url: malformed ones are refused, naming the node, never the password",
          "[unit][redlock][url]") {
    const std::string secret = "pw-0f9e8d";
    struct row {
        std::string url;
        error code;
        std::string says;
    };
    const std::vector<row> rows = {
        {"redlock://u:" + secret + "@h1,h2", error::invalid_url, "names 2 hosts, at least 3"},
        {"redlock://u:" + secret + "@h1", error::invalid_url, "names 1 host,"},
        {"redlock://u:" + secret + "@h1,,h3", error::invalid_url, "empty host"},
        {"redlock://u:" + secret + "@h1,h2,h3:notaport", error::invalid_url,
         "host 3 of the URL's host list: "},
        {"redlock://u:" + secret + "@h1:1,h2:2,H1:1", error::invalid_url, "node 3 names host"},
        {"redlock://u:" + secret + "@h1,h2,h3/x", error::invalid_url, "node 1: invalid database"},
        {"redlock://u:" + secret + "@h1,h2,h3?nosuch=1", error::invalid_url, "node 1: unknown"},
        {"redlock://u:pa/" + secret + "@h1,h2,h3", error::invalid_url, "unexpected '@'"},
        {"redlock+etcd://h1,h2,h3", error::invalid_url, "expected redlock://"},
        {"redlock://h1,h2,h3?node_timeout_ms=0", error::invalid_argument, "node_timeout_ms"},
        {"redlock://h1,h2,h3?node_timeout_ms=5s", error::invalid_argument, "node_timeout_ms"},
        // A key given twice is a malformed URL, whichever the key.
        {"redlock://h1,h2,h3?node_timeout_ms=5&node_timeout_ms=6", error::invalid_url,
         "given twice"},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        try {
            parse_redlock_url(r.url);
            FAIL("accepted");
        } catch (const boost::system::system_error& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(e.code() == r.code);
            CHECK(what.find(r.says) != std::string::npos);
            CHECK(what.find(secret) == std::string::npos);
        }
    }
}

TEST_CASE("redlock url: backend(ex, url) opens RedLock, or throws invalid_url",
          "[unit][redlock][url]") {
    boost::asio::io_context ioc;  // never run: nothing connects
    {
        corolock::backend b(ioc.get_executor(), "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
        CHECK(b.scheme() == "redlock");
        b.stop();
    }
    try {
        corolock::backend b(ioc.get_executor(), "redlock://u:hidden-pw@127.0.0.1:1,127.0.0.1:2");
        FAIL("accepted");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == error::invalid_url);
        CHECK(std::string(e.what()).find("hidden-pw") == std::string::npos);
    }
}

TEST_CASE("redlock: open_redlock takes Redis nodes opened by the caller, and refuses others",
          "[unit][redlock]") {
    boost::asio::io_context ioc;  // never run: nothing connects
    auto redis_nodes = [&](int n) {
        std::vector<corolock::backend> nodes;
        for (int i = 1; i <= n; ++i) {
            config cfg;
            cfg.port = static_cast<std::uint16_t>(i);
            nodes.emplace_back(ioc.get_executor(), cfg);
        }
        return nodes;
    };
    {
        corolock::redlock_settings rs;
        rs.node_timeout = std::chrono::milliseconds(75);
        auto b = corolock::open_redlock(ioc.get_executor(), redis_nodes(3), rs);
        CHECK(b.scheme() == "redlock");
        b.stop();
    }
    auto refused = [&](std::vector<corolock::backend> nodes, corolock::redlock_settings rs,
                       const std::string& says) {
        try {
            auto b = corolock::open_redlock(ioc.get_executor(), std::move(nodes), rs);
            b.stop();
            FAIL("accepted");
        } catch (const boost::system::system_error& e) {
            CHECK(e.code() == error::invalid_argument);
            CHECK(std::string(e.what()).find(says) != std::string::npos);
        }
    };
    refused({}, {}, "no nodes");
    corolock::redlock_settings negative;
    negative.node_timeout = -std::chrono::milliseconds(1);
    refused(redis_nodes(3), negative, "node_timeout is negative");
    auto mixed = redis_nodes(2);
    mixed.emplace_back(ioc.get_executor(), "etcd://127.0.0.1:1");
    refused(std::move(mixed), {}, "node 3 is a etcd backend");
    auto cluster = redis_nodes(2);
    cluster.emplace_back(ioc.get_executor(), "redis+cluster://127.0.0.1:1");
    refused(std::move(cluster), {}, "node 3 is a redis+cluster backend");
}
