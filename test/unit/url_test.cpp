// core/url.hpp: the one grammar of corolock's URLs, and that every backend's
// parser reads the shared parts the same way. Without a server.
#include "core/url.hpp"

#include "etcd/etcd_backend.hpp"
#include "redlock/redlock_url.hpp"
#ifdef COROLOCK_HAVE_ZOOKEEPER
#include "zk/url.hpp"
#endif

#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <catch2/catch.hpp>

using namespace corolock::detail;
using namespace std::chrono_literals;

TEST_CASE("url: a URL is cut into scheme, user part, hosts, path and query", "[unit][url]") {
    url_parts p;
    std::string why;
    REQUIRE(split_url("ETCDS://u%40x:p@ss@a:1,[::1]:2/locks/app?k=v&w=%2F", "x", p, why));
    CHECK(p.scheme == "ETCDS");
    CHECK(p.has_userinfo);
    CHECK(p.userinfo == "u%40x:p@ss");  // the last '@' ends it; nothing decoded yet
    CHECK(p.hosts == "a:1,[::1]:2");
    CHECK(p.path == "/locks/app");
    CHECK(p.query == "k=v&w=%2F");

    REQUIRE(split_url("zk://h:1", "x", p, why));
    CHECK_FALSE(p.has_userinfo);
    CHECK(p.userinfo.empty());
    CHECK(p.path.empty());
    CHECK(p.query.empty());
    REQUIRE(split_url("redis://@h?", "x", p, why));
    CHECK(p.has_userinfo);  // an empty user part is still one
    CHECK(p.userinfo.empty());
    CHECK(p.hosts == "h");
}

TEST_CASE("url: what no parser accepts, and messages that hold no secret", "[unit][url]") {
    struct row {
        const char* url;
        const char* says;
    };
    const row rows[] = {
        {"", "the URL is empty (expected EXAMPLE)"},
        {"h:1", "has no scheme (expected EXAMPLE)"},
        {"u:s3cret@h/x://y", "has no scheme"},  // a "://" that is no scheme's
        {"1x://h", "has no scheme"},
        {"x://h :1", "whitespace or a control character at offset 5"},
        {"x://h\x7f", "whitespace or a control character at offset 5"},
        {"x://u:pa/s3cret@h", "unexpected '@' after the URL's host"},
        {"x://u:pa?s3cret@h", "unexpected '@' after the URL's host"},
        {"x://u:pa#s3cret@h", "unexpected '@' after the URL's host"},
        {"x://h/p#frag", "fragments ('#') are not supported"},
    };
    for (const auto& r : rows) {
        INFO(r.url);
        url_parts p;
        p.hosts = "untouched";
        std::string why;
        CHECK_FALSE(split_url(r.url, "EXAMPLE", p, why));
        CHECK_THAT(why, Catch::Contains(r.says));
        CHECK(why.find("s3cret") == std::string::npos);
        CHECK(p.hosts == "untouched");
    }
}

TEST_CASE("url: the user part is decoded strictly, the password never echoed", "[unit][url]") {
    url_credentials c;
    std::string why;
    REQUIRE(decode_userinfo("a%40b:p%3Aw:x", c, why));
    CHECK(c.user == "a@b");
    CHECK(c.has_password);
    CHECK(c.password == "p:w:x");  // the first ':' separates
    REQUIRE(decode_userinfo("alone", c, why));
    CHECK(c.user == "alone");
    CHECK_FALSE(c.has_password);
    REQUIRE(decode_userinfo(":", c, why));
    CHECK(c.has_password);
    CHECK(c.password.empty());

    c.user = "kept";
    CHECK_FALSE(decode_userinfo("u:s3cret%zz", c, why));
    CHECK_THAT(why, Catch::Contains("malformed percent-escape in the URL's password"));
    CHECK(why.find("s3cret") == std::string::npos);
    CHECK(c.user == "kept");  // nothing half-written
    CHECK_FALSE(decode_userinfo("us%4:x", c, why));
    CHECK_THAT(why, Catch::Contains("the URL's user name"));
}

TEST_CASE("url: hosts, ports and the host list", "[unit][url]") {
    url_host h;
    std::string why;
    REQUIRE(parse_url_host("[::1]:2379", std::nullopt, "EX", h, why));
    CHECK(h.host == "::1");
    CHECK(h.port == 2379);
    CHECK(h.text == "[::1]:2379");
    REQUIRE(parse_url_host("my-host_1.local", std::uint16_t{6379}, "EX", h, why));
    CHECK(h.host == "my-host_1.local");
    CHECK(h.port == 6379);

    struct row {
        const char* text;
        const char* says;
    };
    const row rows[] = {
        {"h", "each host needs a port: EX"},  // no fallback
        {"", "empty host"},
        {":1", "empty host"},
        {"h:", "empty port"},
        {"h:0", "must be 1-65535"},
        {"h:65536", "must be 1-65535"},
        {"h:s3cret", "not a decimal number"},
        {"::1:2379", "IPv6 host must go in brackets"},
        {"[::1:2379", "unbalanced '['"},
        {"[::1]x:1", "unexpected \"x:1\" after the bracketed host"},
        {"[]:1", "empty host"},
        {"[10.0.0.1]:1", "is not an IPv6 address"},
        {"h]:1", "unbalanced bracket"},
        {"h%41:1", "invalid character '%'"},
    };
    for (const auto& r : rows) {
        INFO(r.text);
        CHECK_FALSE(parse_url_host(r.text, std::nullopt, "EX", h, why));
        CHECK_THAT(why, Catch::Contains(r.says));
        CHECK(why.find("s3cret") == std::string::npos);
    }

    std::vector<url_host> list;
    REQUIRE(parse_url_hosts("a:1,b,[::1]:3", std::uint16_t{9}, "EX", list, why));
    REQUIRE(list.size() == 3);
    CHECK(list[1].host == "b");
    CHECK(list[1].port == 9);
    CHECK(list[2].host == "::1");
    for (const char* bad : {"", "a:1,", ",a:1", "a:1,,b:2"}) {
        INFO(bad);
        list.assign(1, url_host{});
        CHECK_FALSE(parse_url_hosts(bad, std::uint16_t{9}, "EX", list, why));
        CHECK_THAT(why, Catch::Contains("empty host"));
        CHECK(list.size() == 1);  // untouched
    }
}

TEST_CASE("url: the query's parameters", "[unit][url]") {
    std::vector<url_param> q;
    std::string why;
    REQUIRE(parse_url_query("", q, why));
    CHECK(q.empty());
    REQUIRE(parse_url_query("a=1&b%5Fc=x%2Fy&d=", q, why));
    REQUIRE(q.size() == 3);
    CHECK(q[0].key == "a");
    CHECK(q[1].key == "b_c");
    CHECK(q[1].value == "x/y");
    CHECK(q[1].text == "b%5Fc=x%2Fy");  // as written, for a parser that passes it on
    CHECK(q[2].value.empty());

    struct row {
        const char* query;
        const char* says;
    };
    const row rows[] = {
        {"a=1&&b=2", "empty parameter"},
        {"a=1&", "empty parameter"},
        {"&", "empty parameter"},
        {"a", "parameter \"a\" in the URL's query has no value"},
        {"a=1&a=2", "parameter \"a\" is given twice"},
        {"a=1&%61=2", "is given twice"},  // compared decoded
        {"a=s3cret%z", "malformed percent-escape in the URL's query"},
        {"k%0A=1&k%0A=2", "\"k\\n\""},  // a key is made printable
    };
    for (const auto& r : rows) {
        INFO(r.query);
        CHECK_FALSE(parse_url_query(r.query, q, why));
        CHECK_THAT(why, Catch::Contains(r.says));
        CHECK(why.find("s3cret") == std::string::npos);
    }

    std::chrono::milliseconds ms{7};
    url_param p{"t_ms", "1500", {}};
    REQUIRE(parse_url_milliseconds(p, 1ms, 2000ms, ms, why));
    CHECK(ms == 1500ms);
    for (const char* bad : {"", "0", "2001", "1.5", "1e3", "-1", " 1", "99999999999999999999"}) {
        INFO(bad);
        p.value = bad;
        ms = 7ms;
        CHECK_FALSE(parse_url_milliseconds(p, 1ms, 2000ms, ms, why));
        CHECK(why == "\"t_ms\" must be a whole number of milliseconds from 1 to 2000");
        CHECK(ms == 7ms);
    }
}

// The proof that the rules live once: each backend's parser reads the shared
// parts as core/url.hpp does. A parser that grew its own host, query or
// user-part rule again would accept one of these or say something else.
TEST_CASE("url: every backend's parser refuses the same shared mistakes alike", "[unit][url]") {
    struct row {
        const char* hosts;  // after "scheme://", with ports where a backend needs them
        const char* query;  // appended after '?', or nullptr
        const char* says;
    };
    const row rows[] = {
        {"h%21:1,g:2,k:3", nullptr, "invalid character '%'"},
        {"[localhost]:1,g:2,k:3", nullptr, "is not an IPv6 address"},
        {"h:1,,k:3", nullptr, "empty host"},
        {"h:70000,g:2,k:3", nullptr, "must be 1-65535"},
        {"u:pa/s3cret@h:1,g:2,k:3", nullptr, "unexpected '@' after the URL's host"},
        {"u:s3cret%zz@h:1,g:2,k:3", nullptr, "malformed percent-escape in the URL's password"},
        {"h:1,g:2,k:3", "a=1&&b=2", "empty parameter"},
        {"h:1,g:2,k:3", "x=1&x=2", "is given twice"},
        {"h:1,g:2,k:3#f", nullptr, "fragments"},
    };
    auto check_all = [](const std::string& hosts_and_tail, const char* says) {
        std::string why;
        {
            INFO("etcd");
            etcd::backend_options o;
            CHECK(etcd::parse_url("etcd://" + hosts_and_tail, o, why) == corolock::error::invalid_url);
            CHECK_THAT(why, Catch::Contains(says));
            CHECK(why.find("s3cret") == std::string::npos);
        }
#ifdef COROLOCK_HAVE_ZOOKEEPER
        {
            INFO("zk");
            zk::zk_options o;
            CHECK(zk::parse_url("zk://" + hosts_and_tail, o, why) == corolock::error::invalid_url);
            CHECK_THAT(why, Catch::Contains(says));
            CHECK(why.find("s3cret") == std::string::npos);
        }
#endif
        {
            INFO("redis+cluster");
            corolock::config c;
            CHECK(corolock::config::parse_url("redis+cluster://" + hosts_and_tail, c, why) ==
                  corolock::error::invalid_url);
            CHECK_THAT(why, Catch::Contains(says));
            CHECK(why.find("s3cret") == std::string::npos);
        }
        {
            INFO("redlock");
            try {
                (void)parse_redlock_url("redlock://" + hosts_and_tail);
                FAIL("accepted");
            } catch (const boost::system::system_error& e) {
                CHECK(e.code() == corolock::error::invalid_url);
                CHECK_THAT(std::string(e.what()), Catch::Contains(says));
                CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
            }
        }
    };
    for (const auto& r : rows) {
        std::string url = r.hosts;
        if (r.query != nullptr) url.append("?").append(r.query);
        INFO(url);
        check_all(url, r.says);
    }
}
