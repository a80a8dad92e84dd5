// URL parsing, defaults and validation of corolock::config.
#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

#include <string>

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
        {"redis://h/0", "h", 6379, "", "", 0, false},
        {"redis://h/2147483647", "h", 6379, "", "", 2147483647, false},
        {"redis://h:1", "h", 1, "", "", 0, false},
        {"redis://h:065535", "h", 65535, "", "", 0, false},  // leading zeros are still decimal
        {"redis://redis-0.cache_svc.internal", "redis-0.cache_svc.internal", 6379, "", "", 0, false},
        {"rediss://cache.example:6380/1", "cache.example", 6380, "", "", 1, true},
        {"REDISS://h", "h", 6379, "", "", 0, true},  // schemes are case-insensitive
        {"redis://:pw@h", "h", 6379, "", "pw", 0, false},
        {"redis://@h", "h", 6379, "", "", 0, false},  // an empty userinfo carries nothing
        {"redis://alice:s3cret@h:1/2", "h", 1, "alice", "s3cret", 2, false},
        {"redis://al%40ce:p%3Aw%2F%25@h", "h", 6379, "al@ce", "p:w/%", 0, false},
        {"redis://u:p%3f%23%20@h", "h", 6379, "u", "p?# ", 0, false},  // lower-case hex too
        {"redis://u:pa:ss@h", "h", 6379, "u", "pa:ss", 0, false},      // the first ':' splits
        {"redis://u:p@ss@h", "h", 6379, "u", "p@ss", 0, false},        // the last '@' splits
        {"redis://[::1]", "::1", 6379, "", "", 0, false},
        {"redis://[::1]:6380", "::1", 6380, "", "", 0, false},
        {"rediss://u:p@[fe80::1]:65535/15", "fe80::1", 65535, "u", "p", 15, true},
        {"redis://[::ffff:10.0.0.1]/3", "::ffff:10.0.0.1", 6379, "", "", 3, false},
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
        {"", "the URL is empty"},
        {"localhost:6379", "no scheme"},
        {"redis:/h", "the scheme is followed by ':/' instead of '://'"},
        {"rediss+sentinel:/h/m", "the scheme is followed by ':/' instead of '://'"},
        {"u:pw@h/x://", "no scheme"},
        {"http://localhost", "unsupported URL scheme \"http\""},
        {"redis+tls://h", "unsupported URL scheme \"redis+tls\""},
        {"redis://", "empty host"},
        {"redis://:6379", "empty host"},
        {"redis://u:p@", "empty host"},
        {"redis://u:p@/1", "empty host"},
        {"redis://[]:6379", "empty host"},
        {"redis://h:", "empty port after ':'"},
        {"redis://[::1]:", "empty port after ':'"},
        {"redis://h:0", "invalid port \"0\" in the URL: must be 1-65535"},
        {"redis://h:70000", "invalid port \"70000\" in the URL: must be 1-65535"},
        {"redis://h:99999999999999999999999", "must be 1-65535"},
        {"redis://h:63a9", "invalid port in the URL: not a decimal number"},
        {"redis://h:-1", "invalid port in the URL: not a decimal number"},
        {"redis://h:+1", "invalid port in the URL: not a decimal number"},
        {"redis://h:6379abc", "invalid port in the URL: not a decimal number"},
        {"redis://h/x", "invalid database \"x\""},
        {"redis://h/-1", "invalid database \"-1\""},
        {"redis://h/+1", "invalid database \"+1\""},
        {"redis://h/0x1", "invalid database \"0x1\""},
        {"redis://h/1/2", "invalid database \"1/2\""},
        {"redis://h//", "invalid database \"/\""},
        {"redis://h/99999999999", "invalid database \"99999999999\" in the URL: out of range"},
        {"redis://h?db=1", "unknown parameter \"db\" (known: tls_ca, tls_cert, tls_key"},
        {"redis://h/0?timeout=1", "unknown parameter \"timeout\""},
        {"redis://h#frag", "fragments ('#') are not supported"},
        {"rediss://h?tls_ca=a#frag", "fragments ('#') are not supported"},
        {"redis://h?tls_ca=ca.pem", "TLS parameter \"tls_ca\" in a redis:// URL: use rediss://"},
        {"rediss://h?tls_ca", "parameter \"tls_ca\" in the URL's query has no value"},
        {"rediss://h?tls_ca=", "\"tls_ca\" has an empty value (in the URL's query)"},
        {"rediss://h?tls_server_name=", "\"tls_server_name\" has an empty value"},
        {"rediss://h?tls_ca=a&tls_ca=b", "parameter \"tls_ca\" is given twice"},
        {"rediss://h?tls_ca=a&&tls_key=b", "empty parameter in the URL's query"},
        {"rediss://h?tls_ca=a&", "empty parameter in the URL's query"},
        {"rediss://h?tls_verify=maybe", "\"tls_verify\" must be yes or no"},
        {"rediss://h?tls_verify=No", "\"tls_verify\" must be yes or no"},
        {"rediss://h?tls_ca=%zz", "malformed percent-escape in the URL's query"},
        {"rediss://h?tls%5Fca%0A=x", "unknown parameter \"tls_ca\\n\""},  // decoded, printable
        {"redis://[::1", "unbalanced '['"},
        {"redis://::1]", "unbalanced bracket"},
        {"redis://h]:1", "unbalanced bracket"},
        {"redis://::1:6379", "IPv6 host must go in brackets"},
        {"redis://[::1]x", "unexpected \"x\" after the bracketed host"},
        {"redis://[::1]]", "unexpected \"]\" after the bracketed host"},
        {"redis://[localhost]", "bracketed host \"localhost\" is not an IPv6 address"},
        {"redis://[10.0.0.1]:6379", "bracketed host \"10.0.0.1\" is not an IPv6 address"},
        {"redis://h!x", "invalid character '!' in the URL's host"},
        {"redis://h%41", "invalid character '%' in the URL's host"},
        {"redis://h\xc3\xa9", "invalid character byte 0xC3 in the URL's host"},
        {"redis://h ost", "whitespace or a control character at offset 9"},
        {" redis://h", "whitespace or a control character at offset 0"},
        {"redis://h\n", "whitespace or a control character"},
        {"redis://h\t:1", "whitespace or a control character"},
        {"redis://user:pa%zzword@h", "malformed percent-escape in the URL's password"},
        {"redis://user:pw%4@h", "malformed percent-escape in the URL's password"},
        {"redis://user:pw%@h", "malformed percent-escape in the URL's password"},
        {"redis://us%4@h", "malformed percent-escape in the URL's user name"},
        {"redis://alice@h", "has a user part without a password"},
        {"redis://alice:@h", "has a user part with an empty password"},
        {"redis://u:pa/ss@h", "unexpected '@' after the URL's host"},
        {"redis://u:pa?ss@h", "unexpected '@' after the URL's host"},
        {"redis://u:pa#ss@h", "unexpected '@' after the URL's host"},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        // What precedes '@' may be a password: it is never echoed.
        if (std::string_view(r.url).find("alice") != std::string_view::npos) {
            config probe;
            std::string probe_why;
            (void)config::parse_url(r.url, probe, probe_why);
            CHECK(probe_why.find("alice") == std::string::npos);
        }
        config out;
        out.host = "untouched";
        out.port = 1234;
        out.username = "keep-user";
        out.password = "keep-pw";
        out.database = 5;
        out.tls.enabled = true;
        std::string why = "stale";
        CHECK(config::parse_url(r.url, out, why) == error::invalid_url);
        CHECK_THAT(why, Catch::Contains(r.reason));
        // Nothing is half-written on failure.
        CHECK(out.host == "untouched");
        CHECK(out.port == 1234);
        CHECK(out.username == "keep-user");
        CHECK(out.password == "keep-pw");
        CHECK(out.database == 5);
        CHECK(out.tls.enabled);
    }
}

TEST_CASE("config: a rediss:// URL's query sets the TLS options", "[unit][config]") {
    const config c = config::from_url(
        "rediss://u:p@h:6380/2?tls_ca=%2Fetc%2Fca%20bundle.pem&tls_cert=c.pem&tls_key=k.pem"
        "&tls_server_name=redis.internal&tls_verify=no");
    CHECK(c.host == "h");
    CHECK(c.port == 6380);
    CHECK(c.database == 2);
    CHECK(c.password == "p");
    CHECK(c.tls.enabled);
    CHECK(c.tls.ca_file == "/etc/ca bundle.pem");  // percent-decoded
    CHECK(c.tls.cert_file == "c.pem");
    CHECK(c.tls.key_file == "k.pem");
    CHECK(c.tls.server_name == "redis.internal");
    CHECK_FALSE(c.tls.verify_peer);

    // Without a path, an empty query, and tls_verify=yes.
    const config d = config::from_url("rediss://h?tls_verify=yes&tls_ca=ca.pem");
    CHECK(d.database == 0);
    CHECK(d.tls.verify_peer);
    CHECK(d.tls.ca_file == "ca.pem");
    CHECK(config::from_url("rediss://h/1?").database == 1);

    // Options the query does not name are kept from the config parsed into.
    config e;
    e.tls.server_name = "kept";
    std::string why;
    REQUIRE(!config::parse_url("rediss://h?tls_ca=x", e, why));
    CHECK(e.tls.server_name == "kept");
    CHECK(e.tls.ca_file == "x");
}

TEST_CASE("config: an unknown query key is named, its value never echoed", "[unit][config]") {
    for (const char* url : {"rediss://h?password=s3cret", "redis://h/0?auth=s3cret",
                            "rediss://h?tls_ca=a&pass=s3cret"}) {
        INFO(url);
        config c;
        std::string why;
        CHECK(config::parse_url(url, c, why) == error::invalid_url);
        CHECK_THAT(why, Catch::Contains("unknown parameter"));
        CHECK(why.find("s3cret") == std::string::npos);
    }
}

TEST_CASE("config: tls_config::set maps each query key onto one field", "[unit][config]") {
    corolock::tls_config t;
    std::string why;
    CHECK(!t.set("tls_ca", "ca", why));
    CHECK(!t.set("tls_cert", "cert", why));
    CHECK(!t.set("tls_key", "key", why));
    CHECK(!t.set("tls_server_name", "name", why));
    CHECK(!t.set("tls_verify", "no", why));
    CHECK(why.empty());
    CHECK(t.ca_file == "ca");
    CHECK(t.cert_file == "cert");
    CHECK(t.key_file == "key");
    CHECK(t.server_name == "name");
    CHECK_FALSE(t.verify_peer);
    CHECK_FALSE(t.enabled);  // the scheme (or the CLI) decides that
    CHECK(t.set("tls-ca", "x", why) == error::invalid_argument);
    CHECK_THAT(why, Catch::Contains("unknown parameter \"tls-ca\""));
    CHECK(t.ca_file == "ca");
}

TEST_CASE("config: from_url throws system_error(invalid_url) with the reason", "[unit][config]") {
    try {
        (void)config::from_url("redis://h:70000");
        FAIL("from_url accepted port 70000");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == error::invalid_url);
        CHECK_THAT(std::string(e.what()), Catch::Contains("invalid port \"70000\""));
    }
    CHECK_THROWS_AS(config::from_url("http://h"), boost::system::system_error);
    CHECK_NOTHROW(config::from_url("redis://h"));
}

TEST_CASE("config: error messages never echo a password", "[unit][config]") {
    // Each URL carries "hunter2" where a password is or where one was most
    // likely meant: a '/' in the password, a forgotten "@host", a bad escape.
    const char* const urls[] = {
        "redis://user:hunter2@h:99999",   "redis://user:hunter2@h:x",
        "redis://user:hunter2@h/bad",     "redis://user:hunt%zzer2@h",
        "redis://user:hunter2@[::1",      "redis://user:hunter2@h!",
        "redis://user:hun/ter2@h",        "redis://user:hunter2/x@h",
        "redis://user:hunter2",           "redis://:hunter2",
        "redis://user:hunter2@h?x=1",     "redis://user:hunter2@h#f",
        "redis://user:hunter2@",          "redis://user:hunter2@[localhost]",
        "user:hunter2@h/x://y",           "redis://user:hunter2@h:",
        "redis://user:hunter2@h ",        "redis://user:hun%2",
    };
    for (const char* url : urls) {
        INFO(url);
        bool threw = false;
        try {
            (void)config::from_url(url);
        } catch (const boost::system::system_error& e) {
            threw = true;
            CHECK(e.code() == error::invalid_url);
            // Either half of the password counts as echoed.
            CHECK_THAT(std::string(e.what()), !Catch::Contains("hun") && !Catch::Contains("ter2"));
        }
        CHECK(threw);  // not FAIL: one accepted URL must not hide the others
    }
}

TEST_CASE("config: parse_url keeps the fields a URL does not carry", "[unit][config]") {
    config c;
    c.command_timeout = 250ms;
    c.connect_timeout = 1s;
    c.client_name = "svc";
    c.tls.ca_file = "ca.pem";
    c.tls.server_name = "redis.example";
    c.max_nesting_depth = 7;
    std::string why = "stale";
    REQUIRE(!config::parse_url("rediss://u:p@h:1/3", c, why));
    CHECK(why.empty());
    CHECK(c.host == "h");
    CHECK(c.port == 1);
    CHECK(c.username == "u");
    CHECK(c.password == "p");
    CHECK(c.database == 3);
    CHECK(c.tls.enabled);
    CHECK(c.command_timeout == 250ms);
    CHECK(c.connect_timeout == 1s);
    CHECK(c.client_name == "svc");
    CHECK(c.tls.ca_file == "ca.pem");
    CHECK(c.tls.server_name == "redis.example");
    CHECK(c.max_nesting_depth == 7);

    // The URL fields are replaced, not merged: credentials and db from an
    // earlier URL do not leak into a URL that has none.
    REQUIRE(!config::parse_url("redis://other", c, why));
    CHECK(c.host == "other");
    CHECK(c.port == 6379);
    CHECK(c.username.empty());
    CHECK(c.password.empty());
    CHECK(c.database == 0);
    CHECK_FALSE(c.tls.enabled);
}

TEST_CASE("config: from_url starts from a default config", "[unit][config]") {
    const config c = config::from_url("redis://h");
    const config d;
    CHECK(c.connect_timeout == d.connect_timeout);
    CHECK(c.command_timeout == d.command_timeout);
    CHECK(c.client_name.empty());
    CHECK(c.logger == nullptr);
    CHECK(c.tls.ca_file.empty());
}

TEST_CASE("config: a lone word before '@' (probably a password) is never echoed",
          "[unit][config]") {
    for (const char* url : {"redis://s3cret@host", "redis://s3cret:@host", "rediss://s3cret@h:1/2"}) {
        INFO(url);
        std::string why;
        config out;
        CHECK(config::parse_url(url, out, why) == error::invalid_url);
        CHECK(why.find("s3cret") == std::string::npos);
        try {
            (void)config::from_url(url);
            FAIL("from_url accepted it");
        } catch (const boost::system::system_error& e) {
            CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
        }
    }
}

TEST_CASE("config: with_defaults fills zeros and keeps what was set", "[unit][config]") {
    config c;
    c.command_timeout = 100ms;
    c.max_nesting_depth = 4;
    const config d = c.with_defaults();
    CHECK(d.connect_timeout == 1s);
    CHECK(d.command_timeout == 100ms);
    CHECK(d.health_check_interval == 2s);
    CHECK(d.reconnect_min == 50ms);
    CHECK(d.reconnect_max == 2s);
    CHECK(d.max_bulk_length == 512u * 1024 * 1024);
    CHECK(d.max_nesting_depth == 4);
    CHECK(d.max_aggregate_size == 16u * 1024 * 1024);
    CHECK(d.max_reply_size == 64u * 1024 * 1024);

    // Every field set: nothing changes. Negative durations are not "unset";
    // validate reports them.
    config all;
    all.connect_timeout = 1ms;
    all.command_timeout = 2ms;
    all.health_check_interval = 3ms;
    all.reconnect_min = -4ms;
    all.reconnect_max = 5ms;
    all.max_bulk_length = 6;
    all.max_nesting_depth = 7;
    all.max_aggregate_size = 8;
    const config a = all.with_defaults();
    CHECK(a.connect_timeout == 1ms);
    CHECK(a.command_timeout == 2ms);
    CHECK(a.health_check_interval == 3ms);
    CHECK(a.reconnect_min == -4ms);
    CHECK(a.reconnect_max == 5ms);
    CHECK(a.max_bulk_length == 6);
    CHECK(a.max_nesting_depth == 7);
    CHECK(a.max_aggregate_size == 8);
}

TEST_CASE("config: validate rejects what defaults cannot fix", "[unit][config]") {
    std::string why = "stale";
    CHECK(!config{}.validate(why));
    CHECK(why.empty());
    CHECK(!config::from_url("rediss://u:p@[::1]:1/9").validate(why));
    CHECK(why.empty());

    auto rejects = [](const config& c, const char* reason) {
        std::string w;
        CHECK(c.validate(w) == error::invalid_argument);
        CHECK_THAT(w, Catch::Contains(reason));
    };
    config c;
    c.host.clear();
    rejects(c, "config.host is empty");
    c = {};
    c.port = 0;
    rejects(c, "config.port is 0");
    c = {};
    c.database = -2;
    rejects(c, "config.database is negative");
    c = {};
    c.connect_timeout = -1ms;
    rejects(c, "config.connect_timeout is negative");
    c = {};
    c.command_timeout = -1ms;
    rejects(c, "config.command_timeout is negative");
    c = {};
    c.health_check_interval = -1ms;
    rejects(c, "config.health_check_interval is negative");
    c = {};
    c.reconnect_min = -1ms;
    rejects(c, "config.reconnect_min is negative");
    c = {};
    c.reconnect_max = -1ms;
    rejects(c, "config.reconnect_max is negative");
    c = {};
    c.reconnect_min = 5s;  // above the default cap of 2 s
    rejects(c, "reconnect_min is above config.reconnect_max");
    c = {};
    c.reconnect_min = 1s;
    c.reconnect_max = 500ms;
    rejects(c, "reconnect_min is above config.reconnect_max");
    c = {};
    c.tls.cert_file = "client.pem";
    rejects(c, "config.tls.cert_file and config.tls.key_file must be given together");
    c = {};
    c.tls.key_file = "client.key";
    rejects(c, "config.tls.cert_file and config.tls.key_file must be given together");

    // Equal bounds, and a minimum below a raised cap, are fine.
    c = {};
    c.reconnect_min = 2s;
    CHECK(!c.validate(why));
    c.reconnect_min = 10s;
    c.reconnect_max = 30s;
    CHECK(!c.validate(why));
    c = {};
    c.tls.cert_file = "client.pem";
    c.tls.key_file = "client.key";
    CHECK(!c.validate(why));
    CHECK(why.empty());
}

TEST_CASE("config: use_lock_only_limits tightens the reply limits that are unset",
          "[unit][config]") {
    config c;
    c.max_bulk_length = 100;
    c.use_lock_only_limits();
    CHECK(c.max_bulk_length == 100);  // set already: kept
    CHECK(c.max_aggregate_size == 1024);
    CHECK(c.max_nesting_depth == 4);
    CHECK(c.max_reply_size == 1024u * 1024);
    const config d = config{}.use_lock_only_limits().with_defaults();
    CHECK(d.max_bulk_length == 64u * 1024);
    std::string why;
    CHECK(!d.validate(why));
    // A Cluster client reads the slot map too: 16384 ranges of two numbers.
    config k = config::from_url("redis+cluster://127.0.0.1:7000");
    k.use_lock_only_limits();
    CHECK(k.max_aggregate_size == 2u * 16384);
    CHECK(k.max_reply_size == 8u * 1024 * 1024);
    CHECK(k.max_nesting_depth == 4);
    CHECK(k.max_bulk_length == 64u * 1024);
}

TEST_CASE("config: redis+sentinel:// names the Sentinels and the service", "[unit][config]") {
    const config c = config::from_url(
        "redis+sentinel://app:pw@10.0.0.1,s2.internal:26380,[::1]/orders/3?sentinel_user=sen&"
        "sentinel_password=s%26p");
    CHECK(c.mode == corolock::topology::sentinel);
    REQUIRE(c.nodes.size() == 3);
    CHECK(c.nodes[0] == corolock::endpoint{"10.0.0.1", 26379});  // the Sentinel port by default
    CHECK(c.nodes[1] == corolock::endpoint{"s2.internal", 26380});
    CHECK(c.nodes[2] == corolock::endpoint{"::1", 26379});
    CHECK(c.service_name == "orders");
    CHECK(c.database == 3);
    CHECK(c.username == "app");
    CHECK(c.password == "pw");
    CHECK(c.sentinel_username == "sen");
    CHECK(c.sentinel_password == "s&p");
    CHECK_FALSE(c.tls.enabled);
    std::string why;
    CHECK(!c.validate(why));

    const config t = config::from_url("rediss+sentinel://h/my%20svc?tls_verify=no");
    CHECK(t.mode == corolock::topology::sentinel);
    CHECK(t.tls.enabled);
    CHECK_FALSE(t.tls.verify_peer);
    CHECK(t.service_name == "my svc");
    CHECK(t.database == 0);
    REQUIRE(t.nodes.size() == 1);
}

TEST_CASE("config: sentinel_tls_server_name pins the Sentinels' name, apart from the servers'",
          "[unit][config][tls]") {
    const config c = config::from_url(
        "rediss+sentinel://10.0.0.1,10.0.0.2/orders?tls_server_name=redis.internal&"
        "sentinel_tls_server_name=sentinel%2Einternal");
    CHECK(c.tls.enabled);
    CHECK(c.tls.server_name == "redis.internal");
    CHECK(c.tls.sentinel_server_name == "sentinel.internal");  // percent-decoded

    const config only = config::from_url("rediss+sentinel://h/svc?sentinel_tls_server_name=s.x");
    CHECK(only.tls.sentinel_server_name == "s.x");
    CHECK(only.tls.server_name.empty());

    // Kept from the config parsed into, as every TLS option the query does
    // not name.
    config kept;
    kept.tls.sentinel_server_name = "kept";
    std::string why;
    REQUIRE(!config::parse_url("rediss+sentinel://h/svc?tls_ca=x", kept, why));
    CHECK(kept.tls.sentinel_server_name == "kept");

    struct row {
        const char* url;
        const char* reason;
    };
    const row rows[] = {
        {"rediss+sentinel://h/svc?sentinel_tls_server_name=",
         "\"sentinel_tls_server_name\" has an empty value (in the URL's query)"},
        {"rediss+sentinel://h/svc?sentinel_tls_server_name",
         "parameter \"sentinel_tls_server_name\" in the URL's query has no value"},
        {"rediss+sentinel://h/svc?sentinel_tls_server_name=a&sentinel_tls_server_name=b",
         "parameter \"sentinel_tls_server_name\" is given twice"},
        {"redis+sentinel://h/svc?sentinel_tls_server_name=s",
         "TLS parameter \"sentinel_tls_server_name\" in a redis:// URL: use rediss://"},
        {"rediss://h?sentinel_tls_server_name=s",
         "parameter \"sentinel_tls_server_name\" in the URL's query is for rediss+sentinel:// URLs"},
        {"rediss+cluster://h?sentinel_tls_server_name=s", "is for rediss+sentinel:// URLs"},
        {"redis://h?sentinel_tls_server_name=s", "is for rediss+sentinel:// URLs"},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        config out;
        CHECK(config::parse_url(r.url, out, why) == error::invalid_url);
        CHECK_THAT(why, Catch::Contains(r.reason));
        CHECK(out.tls.sentinel_server_name.empty());  // untouched
    }

    // tls_config::set, which the CLI's --sentinel-tls-server-name uses.
    corolock::tls_config t;
    CHECK(!t.set("sentinel_tls_server_name", "s.internal", why));
    CHECK(why.empty());
    CHECK(t.sentinel_server_name == "s.internal");
    CHECK(t.server_name.empty());
    CHECK(t.set("sentinel_tls_server_name", "", why) == error::invalid_argument);
    CHECK(why == "\"sentinel_tls_server_name\" has an empty value");
    CHECK(t.sentinel_server_name == "s.internal");
    CHECK(t.set("sentinel-tls-server-name", "x", why) == error::invalid_argument);
    CHECK_THAT(why, Catch::Contains("unknown parameter \"sentinel-tls-server-name\""));
    CHECK_THAT(why, Catch::Contains("sentinel_tls_server_name"));  // among the known keys
}

TEST_CASE("config: expected_name is the name each TLS connection checks, in every case",
          "[unit][config][tls]") {
    using peer = corolock::tls_config::peer;
    struct row {
        const char* server_name;
        const char* sentinel_server_name;
        peer to;
        const char* expected;
    };
    // host: the host connected to ("announced" for a data node: the address
    // a Sentinel named; "s1.conf" for a Sentinel: as configured).
    const row rows[] = {
        // Nothing pinned: each connection checks the host it goes to, so a
        // Sentinel's primary is checked against the name the Sentinel gave.
        {"", "", peer::data_node, "announced"},
        {"", "", peer::sentinel, "s1.conf"},
        // tls_server_name alone: the servers and (as before
        // sentinel_tls_server_name existed) the Sentinels.
        {"data.pin", "", peer::data_node, "data.pin"},
        {"data.pin", "", peer::sentinel, "data.pin"},
        // sentinel_tls_server_name alone: the Sentinels only; a primary is
        // still checked against the announced name.
        {"", "sentinel.pin", peer::data_node, "announced"},
        {"", "sentinel.pin", peer::sentinel, "sentinel.pin"},
        // Both: each its own.
        {"data.pin", "sentinel.pin", peer::data_node, "data.pin"},
        {"data.pin", "sentinel.pin", peer::sentinel, "sentinel.pin"},
    };
    for (const auto& r : rows) {
        corolock::tls_config t;
        t.server_name = r.server_name;
        t.sentinel_server_name = r.sentinel_server_name;
        const char* host = r.to == peer::sentinel ? "s1.conf" : "announced";
        INFO("server_name=" << r.server_name << " sentinel_server_name=" << r.sentinel_server_name
                            << " to " << (r.to == peer::sentinel ? "sentinel" : "data node"));
        CHECK(t.expected_name(r.to, host) == r.expected);
    }
    // verify_peer and enabled do not change the name (it is also the SNI).
    corolock::tls_config off;
    off.verify_peer = false;
    off.sentinel_server_name = "s";
    CHECK(off.expected_name(peer::sentinel, "h") == "s");
    CHECK(off.expected_name(peer::data_node, "h") == "h");
}

TEST_CASE("config: redis+cluster:// names seed nodes", "[unit][config]") {
    const config c = config::from_url("REDIS+CLUSTER://u:p@127.0.0.1:7000,127.0.0.1:7001,h");
    CHECK(c.mode == corolock::topology::cluster);
    REQUIRE(c.nodes.size() == 3);
    CHECK(c.nodes[0] == corolock::endpoint{"127.0.0.1", 7000});
    CHECK(c.nodes[2] == corolock::endpoint{"h", 6379});  // the Redis port by default
    CHECK(c.database == 0);
    CHECK(c.username == "u");
    CHECK(config::from_url("rediss+cluster://h:7000/0").tls.enabled);

    // A single-server URL after a cluster one leaves no nodes behind.
    config r = c;
    std::string why;
    REQUIRE(!config::parse_url("redis://other:1", r, why));
    CHECK(r.mode == corolock::topology::single);
    CHECK(r.nodes.empty());
    CHECK(r.host == "other");
}

TEST_CASE("config: bad Sentinel and Cluster URLs name the problem", "[unit][config]") {
    struct row {
        const char* url;
        const char* reason;
    };
    const row rows[] = {
        {"redis://a,b", "names one server"},
        {"redis+sentinel://h", "needs the service name"},
        {"redis+sentinel://h/", "needs the service name"},
        {"redis+sentinel://h/svc/x", "invalid database \"x\""},
        {"redis+sentinel://h,,g/svc", "empty host"},
        {"redis+sentinel://h:1,h:1/svc", "listed twice"},
        {"redis+sentinel://h/svc?tls_ca=x", "use rediss://"},
        {"redis+sentinel://h/svc?sentinel_tls_server_name=x", "use rediss://"},
        {"redis+sentinel://h/svc?sentinel_password=", "empty value"},
        {"redis+cluster://h/1", "only database 0"},
        {"redis+cluster://h?sentinel_user=x", "for redis+sentinel:// URLs"},
        {"redis+cluster://h:0", "must be 1-65535"},
        {"redis+sentinels://h/s", "unsupported URL scheme \"redis+sentinels\""},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        config c;
        std::string why;
        CHECK(config::parse_url(r.url, c, why) == corolock::error::invalid_url);
        CHECK_THAT(why, Catch::Contains(r.reason));
        CHECK(c.mode == corolock::topology::single);  // untouched
    }
    // A Sentinel password in the query is never echoed.
    config c;
    std::string why;
    CHECK(config::parse_url("redis+sentinel://h/svc?sentinel_password=hunter2&sentinel_password=x",
                            c, why));
    CHECK(why.find("hunter2") == std::string::npos);
}

TEST_CASE("config: validate checks the nodes of Sentinel and Cluster configs", "[unit][config]") {
    std::string why;
    config s;
    s.mode = corolock::topology::sentinel;
    CHECK(s.validate(why) == corolock::error::invalid_argument);
    CHECK_THAT(why, Catch::Contains("name the Sentinels"));
    s.nodes.push_back({"127.0.0.1", 26379});
    CHECK(s.validate(why) == corolock::error::invalid_argument);
    CHECK_THAT(why, Catch::Contains("service_name"));
    s.service_name = "svc";
    CHECK(!s.validate(why));
    config k;
    k.mode = corolock::topology::cluster;
    k.nodes.push_back({"127.0.0.1", 0});
    CHECK(k.validate(why) == corolock::error::invalid_argument);
    k.nodes.front().port = 7000;
    k.database = 2;
    CHECK(k.validate(why) == corolock::error::invalid_argument);
    k.database = 0;
    CHECK(!k.validate(why));
}
