// src/schemes.hpp: the one table of URL schemes that the library's entry
// point (src/connect.cpp) and the corolock tool both read.
#include "schemes.hpp"

#include <corolock/backend.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

#include <string>

using corolock::detail::family_of;
using corolock::detail::scheme_family;

TEST_CASE("schemes: each scheme names its backend, in any case", "[schemes]") {
    CHECK(family_of("redis://h") == scheme_family::redis);
    CHECK(family_of("REDISS://h") == scheme_family::redis);
    CHECK(family_of("redis+sentinel://h/s") == scheme_family::redis);
    CHECK(family_of("rediss+cluster://h") == scheme_family::redis);
    CHECK(family_of("redlock://a,b,c") == scheme_family::redlock);
    CHECK(family_of("RedLock+RedisS://a,b,c") == scheme_family::redlock);
    CHECK(family_of("etcd://h:2379") == scheme_family::etcd);
    CHECK(family_of("etcds://h:2379") == scheme_family::etcd);
    CHECK(family_of("zk://h:2181/r") == scheme_family::zk);
    CHECK(family_of("postgresql://h/db") == scheme_family::postgresql);
    CHECK(family_of("Postgres://h/db") == scheme_family::postgresql);
    // No scheme: host:port for Redis, whose parser explains what is wrong.
    CHECK(family_of("127.0.0.1:6379") == scheme_family::redis);
    // A scheme of the table that lost a '/' goes to its own parser, which
    // says so; other text before ":/" is never taken for a scheme.
    CHECK(family_of("redis:/h") == scheme_family::redis);
    CHECK(family_of("etcd:/h:2379") == scheme_family::etcd);
    CHECK(family_of("ZK:/h:2181") == scheme_family::zk);
    CHECK(family_of("http:/h") == scheme_family::redis);
    CHECK(family_of("user:/secret@h") == scheme_family::redis);
    CHECK(family_of("user:pa ss://@h") == scheme_family::redis);  // no scheme: never echoed
    CHECK(family_of("http://h") == scheme_family::unknown);
    CHECK(family_of("redis+tls://h") == scheme_family::unknown);
}

TEST_CASE("schemes: an unknown scheme is refused with every scheme accepted", "[schemes]") {
    const auto all = corolock::detail::accepted_schemes();
    for (const auto& e : corolock::detail::schemes) {
        INFO(e.name);
        CHECK(all.find(e.name) != std::string::npos);
    }
    boost::asio::io_context ioc;
    try {
        corolock::backend b(ioc.get_executor(), "http://127.0.0.1:1");
        FAIL("an http:// URL was accepted");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == corolock::error::invalid_url);
        const std::string what = e.what();
        CHECK(what.find("'http'") != std::string::npos);
        CHECK(what.find(all) != std::string::npos);
    }
}
