// etcd:// URLs and the lock key layout (src/etcd/etcd_backend.hpp), without
// a server.
#include "etcd/etcd_backend.hpp"

#include <catch2/catch.hpp>

using corolock::error;
using corolock::detail::etcd::backend_options;
using corolock::detail::etcd::lock_prefix;
using corolock::detail::etcd::parse_url;

TEST_CASE("etcd url: endpoints, credentials, prefix and TLS", "[etcd][unit]") {
    backend_options o;
    std::string why;
    REQUIRE_FALSE(parse_url("etcd://127.0.0.1:2379", o, why));
    CHECK(o.gateway.endpoints == std::vector<std::string>{"127.0.0.1:2379"});
    CHECK_FALSE(o.gateway.tls);
    CHECK(o.prefix == "corolock/");

    REQUIRE_FALSE(parse_url("ETCDS://u%40x:p%3Aw@a:1,b:2,[::1]:3/locks/app?ca_file=%2Fca.pem", o, why));
    CHECK(o.gateway.tls);
    CHECK(o.gateway.username == "u@x");
    CHECK(o.gateway.password == "p:w");
    CHECK(o.gateway.endpoints == std::vector<std::string>{"a:1", "b:2", "[::1]:3"});
    CHECK(o.prefix == "locks/app/");
    CHECK(o.gateway.ca_file == "/ca.pem");

    // The gateway's bounds, in milliseconds, for etcd:// and etcds:// alike.
    const auto defaults = corolock::detail::etcd::gateway_options{};
    REQUIRE_FALSE(parse_url("etcd://h:1", o, why));
    CHECK(o.gateway.request_timeout == defaults.request_timeout);
    CHECK(o.gateway.connect_timeout == defaults.connect_timeout);
    REQUIRE_FALSE(parse_url("etcd://h:1?request_timeout_ms=1500&connect_timeout_ms=250", o, why));
    CHECK(o.gateway.request_timeout == std::chrono::milliseconds(1500));
    CHECK(o.gateway.connect_timeout == std::chrono::milliseconds(250));
}

TEST_CASE("etcd url: bad ones are invalid_url with a reason that holds no password",
          "[etcd][unit]") {
    for (const char* url : {"etcd://", "etcd://host", "etcd://host:0", "etcd://host:99999",
                            "etcd://host:x", "etcd://:secret@host:1", "etcd://h:1,",
                            "etcd://h:1?ca_file=x", "etcds://h:1?bogus=1", "redis://h:1",
                            "etcd://u:%zzsecret@h:1", "etcd://h:1/%", "etcd://h :1",
                            "etcd://h:1?request_timeout_ms=0", "etcd://h:1?request_timeout_ms=1.5",
                            "etcd://h:1?connect_timeout_ms=", "etcd://h:1?connect_timeout_ms",
                            "etcd://h:1?request_timeout_ms=3600001",
                            // Endpoints the gateway cannot read (found by
                            // fuzz/etcd_url_fuzz.cpp): refused here, not by
                            // the gateway's std::invalid_argument.
                            "etcd://:2379", "etcd://[::1:2379", "etcd://[::1]x:2379",
                            "etcd://[]:2379", "etcd://[::1]:23:79"}) {
        INFO(url);
        backend_options o;
        o.prefix = "untouched/";
        std::string why;
        CHECK(parse_url(url, o, why) == error::invalid_url);
        CHECK_FALSE(why.empty());
        CHECK(why.find("secret") == std::string::npos);
        CHECK(o.prefix == "untouched/");  // nothing taken from a bad URL
    }
}

TEST_CASE("etcd lock keys: a name's prefix never holds another name's keys", "[etcd][unit]") {
    CHECK(lock_prefix("corolock/", "a") == "corolock/1:a/");
    // "a" and "a/b" (or "1:a/x") would share a prefix without the length.
    const auto a = lock_prefix("corolock/", "a");
    for (const char* other : {"a/b", "a/", "1:a/x", "ab"}) {
        INFO(other);
        CHECK(lock_prefix("corolock/", other).rfind(a, 0) == std::string::npos);
    }
    // Binary-safe: a NUL byte is kept.
    CHECK(lock_prefix("p/", std::string_view("x\0y", 3)) == std::string("p/3:x\0y/", 8));
}
