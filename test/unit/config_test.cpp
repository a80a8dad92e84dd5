// URL parsing, defaults and validation of corolock::config.
#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

using corolock::config;
using corolock::error;
using namespace std::chrono_literals;

TEST_CASE("config: valid URLs fill every field", "[unit][config]") {
    struct row {
        const char* url;
        const char* host;
        unsigned port;
        const char* user;
        const char* password;
        int db;
        bool tls;
    };
    const row rows[] = {
        {"redis://localhost", "localhost", 6379, "", "", 0, false},
        {"redis://127.0.0.1:6390", "127.0.0.1", 6390, "", "", 0, false},
        {"redis://127.0.0.1:6390/", "127.0.0.1", 6390, "", "", 0, false},
        {"redis://127.0.0.1:6390/7", "127.0.0.1", 6390, "", "", 7, false},
        {"rediss://cache.example:6380/1", "cache.example", 6380, "", "", 1, true},
        {"redis://:pw@h", "h", 6379, "", "pw", 0, false},
        {"redis://alice:s3cret@h:1/2", "h", 1, "alice", "s3cret", 2, false},
        {"redis://al%40ce:p%3Aw%2F%25@h", "h", 6379, "al@ce", "p:w/%", 0, false},
        {"redis://[::1]", "::1", 6379, "", "", 0, false},
        {"redis://u:p@[fe80::1]:65535/15", "fe80::1", 65535, "u", "p", 15, false},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        const config c = config::from_url(r.url);
        CHECK(c.host == r.host);
        CHECK(c.port == r.port);
        CHECK(c.username == r.user);
        CHECK(c.password == r.password);
        CHECK(c.database == r.db);
        CHECK(c.tls.enabled == r.tls);
        CHECK(c.tls.verify_peer);  // verification stays on for rediss://
    }
}

TEST_CASE("config: malformed URLs name the problem", "[unit][config]") {
    struct row {
        const char* url;
        const char* reason;  // a substring of the message
    };
    const row rows[] = {
        {"", "no scheme"},
        {"localhost:6379", "no scheme"},
        {"http://localhost", "unsupported URL scheme \"http\""},
        {"redis://", "empty host"},
        {"redis://:6379", "empty host"},
        {"redis://h:", "empty port"},
        {"redis://h:0", "invalid port \"0\""},
        {"redis://h:70000", "invalid port \"70000\""},
        {"redis://h:63a9", "invalid port \"63a9\""},
        {"redis://h:-1", "invalid port \"-1\""},
        {"redis://h/x", "invalid database \"x\""},
        {"redis://h/-1", "invalid database \"-1\""},
        {"redis://h/1/2", "invalid database \"1/2\""},
        {"redis://h/99999999999", "invalid database"},
        {"redis://h?db=1", "query strings"},
        {"redis://h#frag", "fragments"},
        {"redis://[::1", "unbalanced '['"},
        {"redis://::1:6379", "IPv6 host must go in brackets"},
        {"redis://[::1]x", "after the bracketed host"},
        {"redis://h ost", "whitespace"},
        {"redis://user:pa%zzword@h", "percent-escape in the URL's password"},
        {"redis://us%4@h", "percent-escape in the URL's user name"},
        {"redis://alice@h", "without a password"},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        config out;
        out.host = "untouched";
        std::string why;
        CHECK(config::parse_url(r.url, out, why) == error::invalid_url);
        CHECK_THAT(why, Catch::Contains(r.reason));
        CHECK(out.host == "untouched");  // nothing is half-written on failure
    }
}

TEST_CASE("config: error messages never echo a password", "[unit][config]") {
    for (const char* url : {"redis://user:topsecret@h:99999", "redis://user:top%zzsecret@h",
                            "redis://user:topsecret@h/bad"}) {
        INFO(url);
        try {
            (void)config::from_url(url);
            FAIL("from_url accepted a malformed URL");
        } catch (const boost::system::system_error& e) {
            CHECK(e.code() == error::invalid_url);
            CHECK_THAT(std::string(e.what()), !Catch::Contains("topsecret") && !Catch::Contains("secret"));
        }
    }
}

TEST_CASE("config: parse_url keeps the fields a URL does not carry", "[unit][config]") {
    config c;
    c.command_timeout = 250ms;
    c.client_name = "svc";
    std::string why;
    REQUIRE(!config::parse_url("redis://h:1", c, why));
    CHECK(c.command_timeout == 250ms);
    CHECK(c.client_name == "svc");
    CHECK(c.host == "h");
}

TEST_CASE("config: with_defaults fills zeros and keeps what was set", "[unit][config]") {
    config c;
    c.command_timeout = 100ms;
    c.max_nesting_depth = 4;
    const config d = c.with_defaults();
    CHECK(d.connect_timeout == 5s);
    CHECK(d.command_timeout == 100ms);
    CHECK(d.health_check_interval == 2s);
    CHECK(d.reconnect_min == 50ms);
    CHECK(d.reconnect_max == 2s);
    CHECK(d.max_bulk_length == 512u * 1024 * 1024);
    CHECK(d.max_nesting_depth == 4);
    CHECK(d.max_aggregate_size == 16u * 1024 * 1024);
}

TEST_CASE("config: validate rejects what defaults cannot fix", "[unit][config]") {
    std::string why;
    CHECK(!config{}.validate(why));
    CHECK(why.empty());

    auto rejects = [](config c, const char* reason) {
        std::string w;
        CHECK(c.validate(w) == error::invalid_argument);
        CHECK_THAT(w, Catch::Contains(reason));
    };
    config c;
    c.host.clear();
    rejects(c, "host is empty");
    c = {};
    c.port = 0;
    rejects(c, "port is 0");
    c = {};
    c.command_timeout = -1ms;
    rejects(c, "command_timeout is negative");
    c = {};
    c.reconnect_min = 5s;  // above the default cap of 2 s
    rejects(c, "reconnect_min is above");
    c = {};
    c.database = -2;
    rejects(c, "database is negative");
    c = {};
    c.tls.cert_file = "client.pem";
    rejects(c, "cert_file and config.tls.key_file");
}
