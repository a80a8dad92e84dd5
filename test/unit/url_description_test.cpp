// corolock/url.hpp: a URL read without connecting, through the library's
// scheme table and each backend's parser; the credential rewrites. Without
// a server.
#include <corolock/url.hpp>

#include <catch2/catch.hpp>

#include <string>

using corolock::error;
using corolock::url_description;
using corolock::url_service;

TEST_CASE("url description: the scheme table picks the service", "[unit][url]") {
    CHECK(corolock::url_scheme("REDIS+Sentinel://h/svc") == "redis+sentinel");
    CHECK(corolock::url_scheme("127.0.0.1:6379").empty());
    // Text before "://" that is no scheme may be a password: never returned.
    CHECK(corolock::url_scheme("u:s3cret@h/x://y").empty());
    CHECK(corolock::service_of_url("rediss://h") == url_service::redis);
    CHECK(corolock::service_of_url("127.0.0.1:6379") == url_service::redis);
    CHECK(corolock::service_of_url("redlock://a,b,c") == url_service::redlock);
    CHECK(corolock::service_of_url("etcds://h:2379") == url_service::etcd);
    CHECK(corolock::service_of_url("zk://h:2181") == url_service::zookeeper);
    CHECK(corolock::service_of_url("postgres://h/db") == url_service::postgresql);
    CHECK(corolock::service_of_url("http://h") == url_service::unknown);
    const auto all = corolock::accepted_url_schemes();
    CHECK(all.starts_with("redis, rediss, "));
    CHECK(all.find("etcd") != std::string::npos);
}

TEST_CASE("url description: each backend's parser, never the password", "[unit][url]") {
    url_description d;
    std::string why;
    REQUIRE_FALSE(corolock::describe_url("etcd://root:s3cret@10.0.0.1:2379,10.0.0.2:2379/app", d, why));
    CHECK(d.service == url_service::etcd);
    CHECK(d.endpoints == "10.0.0.1:2379,10.0.0.2:2379");

    REQUIRE_FALSE(corolock::describe_url(
        "redlock://app:s3cret@127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003?node_timeout_ms=75", d,
        why));
    CHECK(d.service == url_service::redlock);
    REQUIRE(d.nodes.size() == 3);
    CHECK(d.nodes[1] == "redis://app:s3cret@127.0.0.1:7002");
    CHECK(d.node_timeout == std::chrono::milliseconds(75));
    CHECK(d.endpoints == "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");

    CHECK(corolock::describe_url("etcd://root:s3cret@", d, why) == error::invalid_url);
    CHECK_FALSE(why.empty());
    CHECK(why.find("s3cret") == std::string::npos);
    CHECK(corolock::describe_url("redlock://u:hidden-pw@127.0.0.1:1,127.0.0.1:2", d, why) ==
          error::invalid_url);
    CHECK(why.find("hidden-pw") == std::string::npos);
    // Redis URLs are config::parse_url's; a scheme of no service is named.
    CHECK(corolock::describe_url("redis://h", d, why) == error::invalid_url);
    CHECK(corolock::describe_url("http://h", d, why) == error::invalid_url);
    CHECK(why.find("'http'") != std::string::npos);
#ifdef COROLOCK_HAVE_ZOOKEEPER
    REQUIRE_FALSE(corolock::describe_url("zk://127.0.0.1:2181/locks", d, why));
    CHECK(d.service == url_service::zookeeper);
    CHECK(d.endpoints == "127.0.0.1:2181");
    CHECK_FALSE(d.authenticated);
    REQUIRE_FALSE(corolock::describe_url("zk://u:pw@127.0.0.1:2181", d, why));
    CHECK(d.authenticated);
#endif
}

TEST_CASE("url description: credentials taken out, or a password put in", "[unit][url]") {
    CHECK(corolock::url_without_credentials("etcd://root:s3cret@127.0.0.1:2379/app") ==
          "etcd://127.0.0.1:2379/app");
    CHECK(corolock::url_without_credentials(
              "postgresql://u@h/db?sslmode=require&password=x&pass%77ord=y") ==
          "postgresql://h/db?sslmode=require");
    CHECK(corolock::url_without_credentials("redis://u:p/w@h/0").empty());
    CHECK(corolock::url_with_password("zk://alice@h:2181/locks", "p@ss word") ==
          "zk://alice:p%40ss%20word@h:2181/locks");
    CHECK(corolock::url_with_password("redis://alice:old@h", "new") == "redis://alice:new@h");
    CHECK_FALSE(corolock::url_with_password("redis://h:6379", "pw"));
    CHECK_FALSE(corolock::url_with_password("redis://:pw@h:6379", "pw"));
}
