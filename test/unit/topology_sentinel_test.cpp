// The Sentinel topology's decisions (src/redis/topology/sentinel.hpp), sans-I/O: the
// replies are the bytes real Sentinels and servers send, parsed.
#include "redis/topology/sentinel.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

namespace sentinel = corolock::detail::sentinel;
using corolock::endpoint;
using corolock::reply;

namespace {

reply parse_reply(std::string_view bytes) {
    corolock::detail::resp3_parser p(corolock::detail::parser_limits{1 << 20, 8, 1024, 1 << 20});
    corolock::error_code ec;
    p.consume(bytes, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(p.has_reply());
    return p.pop();
}

}  // namespace

TEST_CASE("sentinel: get-master-addr-by-name replies", "[unit][sentinel]") {
    auto ok = sentinel::parse_master_addr(parse_reply("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n7001\r\n"));
    CHECK(ok.result == sentinel::master_addr::status::ok);
    CHECK(ok.ep == endpoint{"127.0.0.1", 7001});

    // RESP3 null and RESP2 nil array: the Sentinel monitors no such name.
    for (std::string_view nil : {"_\r\n", "*-1\r\n"}) {
        auto unknown = sentinel::parse_master_addr(parse_reply(nil));
        CHECK(unknown.result == sentinel::master_addr::status::unknown_service);
        CHECK(unknown.why == "service unknown");
    }

    auto refused = sentinel::parse_master_addr(parse_reply("-NOAUTH Authentication required.\r\n"));
    CHECK(refused.result == sentinel::master_addr::status::refused);
    CHECK(refused.why == "NOAUTH Authentication required.");

    // Not a Sentinel, or a broken answer: never an address.
    for (std::string_view bad : {"+OK\r\n", "*1\r\n$9\r\n127.0.0.1\r\n",
                                 "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n",
                                 "*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n",
                                 "*2\r\n$0\r\n\r\n$4\r\n7001\r\n",
                                 "*2\r\n$9\r\n127.0.0.1\r\n$3\r\n7x1\r\n"}) {
        INFO(bad);
        auto r = sentinel::parse_master_addr(parse_reply(bad));
        CHECK(r.result == sentinel::master_addr::status::bad_reply);
        CHECK_THAT(r.why, Catch::StartsWith("unexpected reply"));
    }
}

TEST_CASE("sentinel: ROLE says whether the server is the primary", "[unit][sentinel]") {
    std::string role;
    CHECK(sentinel::role_is_master(parse_reply("*3\r\n$6\r\nmaster\r\n:3129659\r\n*0\r\n"), role));
    CHECK(role == "master");
    CHECK_FALSE(sentinel::role_is_master(
        parse_reply("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:9538\r\n$9\r\nconnected\r\n:3167038\r\n"),
        role));
    CHECK(role == "slave");
    CHECK_FALSE(sentinel::role_is_master(parse_reply("*2\r\n$8\r\nsentinel\r\n*0\r\n"), role));
    CHECK(role == "sentinel");
    CHECK_FALSE(sentinel::role_is_master(parse_reply("-NOPERM no ROLE for you\r\n"), role));
    CHECK(role == "ROLE: NOPERM no ROLE for you");
    CHECK_FALSE(sentinel::role_is_master(parse_reply("+master\r\n"), role));
    CHECK_THAT(role, Catch::StartsWith("unexpected ROLE reply"));
}

TEST_CASE("sentinel: +switch-master messages of our service only", "[unit][sentinel]") {
    const std::string payload = "mymaster 127.0.0.1 7001 127.0.0.1 7002";
    const std::string push = ">3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$" +
                             std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
    auto ep = sentinel::parse_switch_master(parse_reply(push), "mymaster");
    REQUIRE(ep);
    CHECK(*ep == endpoint{"127.0.0.1", 7002});
    // RESP2 delivers the same message as an array.
    std::string resp2 = push;  // not "*" + ...: g++ 12's false -Wrestrict at -O3
    resp2[0] = '*';
    CHECK(sentinel::parse_switch_master(parse_reply(resp2), "mymaster"));
    CHECK_FALSE(sentinel::parse_switch_master(parse_reply(push), "other"));
    CHECK_FALSE(sentinel::parse_switch_master(parse_reply(push), "mymaste"));

    auto message = [](std::string_view channel, std::string_view text) {
        return ">3\r\n$7\r\nmessage\r\n$" + std::to_string(channel.size()) + "\r\n" +
               std::string(channel) + "\r\n$" + std::to_string(text.size()) + "\r\n" +
               std::string(text) + "\r\n";
    };
    CHECK_FALSE(sentinel::parse_switch_master(parse_reply(message("+sdown", payload)), "mymaster"));
    for (std::string_view bad : {"mymaster 127.0.0.1 7001 127.0.0.1", "mymaster a b c d e",
                                 "mymaster 127.0.0.1 7001 127.0.0.1 7002 extra", ""}) {
        INFO(bad);
        CHECK_FALSE(sentinel::parse_switch_master(parse_reply(message("+switch-master", bad)),
                                                  "mymaster"));
    }
    // The subscription's confirmation is no switch.
    CHECK_FALSE(sentinel::parse_switch_master(
        parse_reply(">3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n"), "mymaster"));
}

TEST_CASE("sentinel: a demoted primary's READONLY", "[unit][sentinel]") {
    CHECK(sentinel::is_readonly_error("READONLY You can't write against a read only replica."));
    CHECK_FALSE(sentinel::is_readonly_error("ERR READONLY"));
    CHECK_FALSE(sentinel::is_readonly_error("LOADING"));
}

TEST_CASE("sentinel: a failed discovery in words", "[unit][sentinel]") {
    sentinel::discovery_report r;
    CHECK(r.empty());
    r.note_unknown();
    r.sentinel_failed({"127.0.0.1", 26379}, "service unknown");
    r.primary_failed({"127.0.0.1", 7001}, "127.0.0.1:7001 is a replica");
    r.sentinel_failed({"::1", 26380}, "connection refused");
    r.primary_failed({"127.0.0.1", 7002}, "connection refused");
    CHECK(r.text() ==
          "sentinel 127.0.0.1:26379: service unknown; 127.0.0.1:7001 is a replica; "
          "sentinel [::1]:26380: connection refused; 127.0.0.1:7002: connection refused");
    CHECK_FALSE(r.all_unknown(3));

    // Every Sentinel answered that it does not know the name: permanent.
    sentinel::discovery_report all;
    for (std::uint16_t port : {26379, 26380}) {
        all.note_unknown();
        all.sentinel_failed({"127.0.0.1", port}, "service unknown");
    }
    CHECK(all.all_unknown(2));
    CHECK_FALSE(all.all_unknown(3));
    CHECK_FALSE(sentinel::discovery_report{}.all_unknown(0));
}
