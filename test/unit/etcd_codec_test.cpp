// The etcd gateway codec without sockets: request bodies, response bodies
// (valid, malformed, hostile), base64, error bodies and the watch stream
// split at every byte.
#include "etcd/codec.hpp"

#include <boost/json/parse.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace corolock;
using namespace corolock::detail::etcd;
namespace json = boost::json;

namespace {

const std::string header =
    R"("header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"7","raft_term":"2"})";

}  // namespace

TEST_CASE("etcd codec: base64 round-trips every byte and rejects non-canonical text",
          "[etcd][codec]") {
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    for (std::size_t n = 0; n <= all.size(); n += 1) {
        const auto piece = all.substr(0, n);
        const auto back = codec::base64_decode(codec::base64_encode(piece));
        REQUIRE(back);
        REQUIRE(*back == piece);
    }
    CHECK(codec::base64_encode("foo") == "Zm9v");
    CHECK(codec::base64_encode("f") == "Zg==");
    CHECK(codec::base64_decode("") == std::string());
    CHECK_FALSE(codec::base64_decode("Zm9"));     // not a multiple of 4
    CHECK_FALSE(codec::base64_decode("Zm9v!A=="));  // bad character
    CHECK_FALSE(codec::base64_decode("Zg=v"));    // padding in the middle
    CHECK_FALSE(codec::base64_decode("Zh=="));    // non-zero bits under the padding
    CHECK_FALSE(codec::base64_decode("Zg==Zg=="));  // padding before the end
    CHECK_FALSE(codec::base64_decode("===="));
}

TEST_CASE("etcd codec: prefix_end covers exactly the prefix", "[etcd][codec]") {
    CHECK(prefix_end("lock/") == "lock0");
    CHECK(prefix_end(std::string("a\xff", 2)) == "b");
    CHECK(prefix_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
}

TEST_CASE("etcd codec: a put-if-absent txn with a lease and a prefix range encodes as the gateway "
          "expects", "[etcd][codec]") {
    txn_request t;
    t.compares.push_back({"l/k", compare::target::create_revision, compare::op::equal, 0});
    t.success.push_back(put_request{"l/k", "v", 42});
    range_request r;
    r.key = "l/";
    r.range_end = prefix_end("l/");
    r.sort_by_create_revision = true;
    r.limit = 1;
    r.max_create_revision = 9;
    t.success.push_back(r);
    t.failure.push_back(delete_request{"l/k", ""});
    const auto v = json::parse(codec::encode_txn(t)).as_object();
    const auto& c = v.at("compare").as_array().at(0).as_object();
    CHECK(c.at("key").as_string() == "bC9r");
    CHECK(c.at("target").as_string() == "CREATE");
    CHECK(c.at("result").as_string() == "EQUAL");
    CHECK(c.at("create_revision").as_string() == "0");
    const auto& put = v.at("success").as_array().at(0).as_object().at("request_put").as_object();
    CHECK(put.at("lease").as_string() == "42");
    CHECK(put.at("value").as_string() == "dg==");
    const auto& range = v.at("success").as_array().at(1).as_object().at("request_range").as_object();
    CHECK(range.at("range_end").as_string() == codec::base64_encode("l0"));
    CHECK(range.at("sort_target").as_string() == "CREATE");
    CHECK(range.at("sort_order").as_string() == "ASCEND");
    CHECK(range.at("limit").as_string() == "1");
    CHECK(range.at("max_create_revision").as_string() == "9");
    CHECK(v.at("failure").as_array().at(0).as_object().contains("request_delete_range"));
    CHECK_FALSE(range.contains("revision"));  // the latest, unless asked

    range_request at;
    at.key = "l/";
    at.revision = 12;
    CHECK(json::parse(codec::encode_range(at)).as_object().at("revision").as_string() == "12");

    const auto w = json::parse(codec::encode_watch_create({"k", "", 5})).as_object();
    CHECK(w.at("create_request").as_object().at("start_revision").as_string() == "5");
    CHECK_FALSE(w.at("create_request").as_object().contains("range_end"));
}

TEST_CASE("etcd codec: a txn response decodes with its nested results", "[etcd][codec]") {
    const std::string body = "{" + header +
        R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"2"}}},)"
        R"({"response_range":{"header":{"revision":"2"},"kvs":[{"key":"Zm9v","create_revision":"2",)"
        R"("mod_revision":"2","version":"1","lease":"4111120245260116489"}],"count":"1"}},)"
        R"({"response_delete_range":{"header":{"revision":"3"},"deleted":"1"}}]})";
    txn_result t;
    REQUIRE_FALSE(codec::decode_txn(body, t));
    CHECK(t.succeeded);
    CHECK(t.header.revision == 7);
    CHECK(t.header.member_id == 13668033151171901709ull);
    REQUIRE(t.responses.size() == 3);
    const auto& r = std::get<range_result>(t.responses[1]);
    REQUIRE(r.kvs.size() == 1);
    CHECK(r.kvs[0].key == "foo");
    CHECK(r.kvs[0].value.empty());  // left out by proto3: empty
    CHECK(r.kvs[0].lease == 4111120245260116489);
    CHECK(r.count == 1);
    CHECK(std::get<delete_result>(t.responses[2]).deleted == 1);

    txn_result failed;  // "succeeded" left out: false
    REQUIRE_FALSE(codec::decode_txn("{" + header + "}", failed));
    CHECK_FALSE(failed.succeeded);
    CHECK(failed.responses.empty());
}

TEST_CASE("etcd codec: leases decode, numbers as strings or integers", "[etcd][codec]") {
    lease_grant_result g;
    REQUIRE_FALSE(codec::decode_lease_grant("{" + header + R"(,"ID":"4111","TTL":5})", g));
    CHECK(g.id == 4111);
    CHECK(g.ttl == 5);
    lease_keepalive_result k;
    REQUIRE_FALSE(codec::decode_lease_keepalive(R"({"result":{)" + header + R"(,"ID":"1","TTL":"3"}})", k));
    CHECK(k.ttl == 3);
    lease_keepalive_result gone;  // an unknown lease: TTL left out
    REQUIRE_FALSE(codec::decode_lease_keepalive(R"({"result":{)" + header + R"(,"ID":"1"}})", gone));
    CHECK(gone.ttl == 0);
    lease_ttl_result t;
    REQUIRE_FALSE(codec::decode_lease_timetolive("{" + header + R"(,"ID":"1","TTL":"-1"})", t));
    CHECK(t.ttl == -1);
    std::string token;
    REQUIRE_FALSE(codec::decode_authenticate("{" + header + R"(,"token":"abc.20"})", token));
    CHECK(token == "abc.20");
}

TEST_CASE("etcd codec: malformed and hostile responses are rejected with a clear error",
          "[etcd][codec]") {
    struct bad {
        std::string body;
        error expected;
        std::string mentions;
    };
    const std::vector<bad> cases{
        {"", error::protocol_error, "invalid JSON"},
        {"{", error::protocol_error, "invalid JSON"},
        {"[1,2]", error::unexpected_reply, "not an object"},
        {R"({"kvs":[]})", error::unexpected_reply, "header: missing"},
        {"{" + header + R"(,"kvs":[{"key":"@@@@"}]})", error::unexpected_reply, "key: not valid base64"},
        {"{" + header + R"(,"kvs":[{"key":5}]})", error::unexpected_reply, "key: not a string"},
        {"{" + header + R"(,"kvs":{"key":"Zm9v"}})", error::unexpected_reply, "kvs: not an array"},
        {"{" + header + R"(,"kvs":["x"]})", error::unexpected_reply, "kv: not an object"},
        {"{" + header + R"(,"count":"12x"})", error::unexpected_reply, "count: not an integer"},
        {"{" + header + R"(,"count":""})", error::unexpected_reply, "count: not an integer"},
        {"{" + header + R"(,"count":1.5})", error::unexpected_reply, "count: not an integer"},
        {"{" + header + R"(,"count":"99999999999999999999"})", error::reply_too_large, "count: out of range"},
        {"{" + header + R"(,"count":18446744073709551615})", error::reply_too_large, "count: out of range"},
        {"{" + header + R"(,"more":"yes"})", error::unexpected_reply, "more: not a boolean"},
        {R"({"header":{"revision":true}})", error::unexpected_reply, "revision: not an integer"},
        {R"({"header":"x"})", error::unexpected_reply, "header: not an object"},
        {std::string(100, '[') + std::string(100, ']'), error::protocol_error, "invalid JSON"},
    };
    for (const auto& c : cases) {
        INFO(c.body);
        range_result r;
        const auto e = codec::decode_range(c.body, r);
        REQUIRE(e);
        CHECK(e->code == c.expected);
        CHECK_THAT(e->message, Catch::Contains(c.mentions));
    }
    txn_result t;
    const auto e = codec::decode_txn("{" + header + R"(,"responses":[{"response_nothing":{}}]})", t);
    REQUIRE(e);
    CHECK_THAT(e->message, Catch::Contains("no known response"));
    lease_grant_result g;
    CHECK(codec::decode_lease_grant("{" + header + "}", g));  // no ID
    lease_keepalive_result k;
    CHECK(codec::decode_lease_keepalive("{" + header + "}", k));  // not wrapped in result
}

TEST_CASE("etcd codec: gateway error bodies map to corolock codes with etcd's message",
          "[etcd][codec]") {
    auto e = codec::decode_error_body(400,
        R"({"error":"etcdserver: authentication failed, invalid user ID or password","message":"etcdserver: authentication failed, invalid user ID or password","code":3})");
    CHECK(e.code == error::auth_failed);
    CHECK(e.message == "etcdserver: authentication failed, invalid user ID or password");
    CHECK_FALSE(codec::is_stale_token(e));

    e = codec::decode_error_body(401,
        R"({"error":"etcdserver: invalid auth token","message":"etcdserver: invalid auth token","code":16})");
    CHECK(e.code == error::auth_failed);
    CHECK(codec::is_stale_token(e));

    e = codec::decode_error_body(404, R"({"error":"x","message":"etcdserver: requested lease not found","code":5})");
    CHECK(e.code == error::expired);
    e = codec::decode_error_body(403, R"({"message":"etcdserver: permission denied","code":7})");
    CHECK(e.code == error::no_permission);
    e = codec::decode_error_body(503, R"({"message":"etcdserver: no leader","code":14})");
    CHECK(e.code == error::server_error);
    CHECK(e.message == "etcdserver: no leader");
    e = codec::decode_error_body(502, "<html>bad gateway</html>");
    CHECK(e.code == error::server_error);
    CHECK(e.message == "HTTP 502: <html>bad gateway</html>");
    e = codec::decode_error_body(500, R"({"code":"x","message":7})");  // wrong types
    CHECK(e.code == error::server_error);
    CHECK_THAT(e.message, Catch::StartsWith("HTTP 500"));
}

TEST_CASE("etcd codec: the watch stream decodes however it is split", "[etcd][codec]") {
    const std::string stream =
        R"({"result":{)" + header + R"(,"created":true}})" "\n"
        R"({"result":{)" + header + R"(,"events":[{"kv":{"key":"Zm9v","create_revision":"4","mod_revision":"4","version":"1","value":"YQ=="}},{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"5"}}]}})" "\n";
    for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
        for (std::size_t cut2 = cut; cut2 <= stream.size(); cut2 += 17) {
            codec::watch_decoder d;
            std::vector<watch_update> out;
            REQUIRE_FALSE(d.feed(stream.substr(0, cut), out));
            REQUIRE_FALSE(d.feed(stream.substr(cut, cut2 - cut), out));
            REQUIRE_FALSE(d.feed(stream.substr(cut2), out));
            REQUIRE(out.size() == 2);
            CHECK(out[0].created);
            REQUIRE(out[1].events.size() == 2);
            CHECK(out[1].events[0].type == watch_event::kind::put);
            CHECK(out[1].events[0].kv.value == "a");
            CHECK(out[1].events[1].type == watch_event::kind::del);
            CHECK(out[1].events[1].kv.key == "foo");
            CHECK(out[1].events[1].kv.mod_revision == 5);
        }
    }
}

TEST_CASE("etcd codec: a watch stream ends on a server cancel, an error or garbage",
          "[etcd][codec]") {
    std::vector<watch_update> out;
    codec::watch_decoder compacted;
    auto e = compacted.feed(R"({"result":{)" + header + R"(,"canceled":true,"compact_revision":"3"}})", out);
    REQUIRE(e);
    CHECK(e->code == error::server_error);
    CHECK_THAT(e->message, Catch::Contains("compacted at revision 3"));

    codec::watch_decoder failed;
    e = failed.feed(R"({"error":{"grpc_code":16,"message":"etcdserver: invalid auth token"}})", out);
    REQUIRE(e);
    CHECK_THAT(e->message, Catch::Contains("invalid auth token"));

    codec::watch_decoder garbage;
    e = garbage.feed("{\"result\":}", out);
    REQUIRE(e);
    CHECK(e->code == error::protocol_error);
    CHECK(garbage.feed("{}", out));  // unusable afterwards

    codec::watch_decoder unknown;
    e = unknown.feed(R"({"result":{)" + header + R"(,"events":[{"type":"EXPLODE"}]}})", out);
    REQUIRE(e);
    CHECK_THAT(e->message, Catch::Contains("unknown"));
    CHECK(out.empty());
}

TEST_CASE("etcd codec: a body of many small elements is refused before it takes gigabytes",
          "[etcd][codec]") {
    // "{}," is 3 bytes on the wire and a 24-byte value once decoded (more
    // while the parser holds the open array): a 64 MiB body of them decoded
    // into gigabytes. The decoded memory is bounded (max_decoded_bytes).
    const std::size_t n = 4u << 20;  // 12 MB of body, about 100 MB decoded
    std::string elements;
    elements.reserve(3 * n);
    for (std::size_t i = 0; i < n; ++i) elements += "{},";
    elements.pop_back();
    {
        range_result r;
        const auto e = codec::decode_range("{" + header + R"(,"kvs":[)" + elements + "]}", r);
        REQUIRE(e);
        CHECK(e->code == error::reply_too_large);
        CHECK_THAT(e->message, Catch::Contains("once decoded"));
    }
    {
        // The same in one watch message (under the 16 MiB message limit).
        codec::watch_decoder d;
        std::vector<watch_update> out;
        const std::string message = R"({"result":{)" + header + R"(,"events":[)" + elements + "]}}\n";
        std::optional<codec::decode_error> e;
        for (std::size_t at = 0; at < message.size() && !e; at += 16384)
            e = d.feed(std::string_view(message).substr(at, 16384), out);
        REQUIRE(e);
        CHECK(e->code == error::reply_too_large);
        CHECK(out.empty());
    }
    // An ordinary large answer still decodes: a page of 1000 keys.
    std::string kvs;
    for (int i = 0; i < 1000; ++i)
        kvs += std::string(i ? "," : "") + R"({"key":"Zm9v","create_revision":"4","mod_revision":"4","version":"1","value":")" +
               std::string(400, 'Q') + R"("})";
    range_result r;
    REQUIRE_FALSE(codec::decode_range("{" + header + R"(,"kvs":[)" + kvs + "]}", r));
    CHECK(r.kvs.size() == 1000);
}
