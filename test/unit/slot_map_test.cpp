// Redis Cluster routing without a server (src/redis/topology/slot_map.hpp):
// hash slots, the slot map from CLUSTER SHARDS / CLUSTER SLOTS replies, the
// redirection errors and the retry decisions, on made-up times.
#include "redis/topology/slot_map.hpp"
#include "redis/lock/scripts.hpp"

#include "support/reply_build.hpp"

#include <catch2/catch.hpp>

using namespace corolock;
using namespace corolock::detail::cluster;
using namespace corolock::test::replies;
using namespace std::chrono_literals;

namespace {

reply shard_node(std::string ip, std::int64_t port, std::string role, std::string health,
                 resp3_type t = resp3_type::map) {
    return node(t, {}, {bulk("id"), bulk("0123"), bulk("port"), integer(port), bulk("ip"), bulk(ip),
                   bulk("endpoint"), bulk(ip), bulk("role"), bulk(std::move(role)),
                   bulk("replication-offset"), integer(42), bulk("health"), bulk(std::move(health))});
}

}  // namespace

TEST_CASE("cluster: crc16 and key slots match the server's CLUSTER KEYSLOT", "[cluster]") {
    CHECK(crc16("123456789") == 0x31c3);  // the XMODEM check value
    // Each value below is what redis-server 7.0.15 answered to CLUSTER KEYSLOT.
    CHECK(key_slot("foo") == 12182);
    CHECK(key_slot("bar") == 5061);
    CHECK(key_slot("123456789") == 12739);
    CHECK(key_slot("") == 0);
    CHECK(key_slot("{user1000}.following") == 3443);
    CHECK(key_slot("{user1000}.followers") == 3443);
    CHECK(key_slot("foo{}{bar}") == 8363);     // an empty tag: the whole key
    CHECK(key_slot("foo{{bar}}zap") == 4015);  // the tag is "{bar"
    CHECK(key_slot("foo{bar}{zap}") == 5061);  // only the first tag counts
    CHECK(key_slot("{}") == 15257);
    CHECK(key_slot("a{b") == 13340);           // no closing brace: the whole key
    CHECK(key_slot("corolock:{stock:42}") == 2594);
}

TEST_CASE("cluster: every key of a lock is in one slot", "[cluster]") {
    for (std::string name : {"a", "stock:42", "x y", "é", "a:b:c"}) {
        const corolock::detail::lock_keys k(name);
        CAPTURE(name);
        CHECK(key_slot(k.fence()) == key_slot(k.lock()));
        CHECK(key_slot(k.channel()) == key_slot(k.lock()));
    }
    // A valid name has no braces (validate_lock_name), so the tag is the name.
    CHECK(key_slot(corolock::detail::lock_keys("stock:42").lock()) == key_slot("stock:42"));
    // Why braces are refused: "}" would end the tag at once ("corolock:{}}"
    // has an empty tag, so each key hashes whole), splitting the lock.
    const corolock::detail::lock_keys brace("}");
    CHECK(key_slot(brace.fence()) != key_slot(brace.lock()));
}

TEST_CASE("cluster: addresses", "[cluster]") {
    CHECK(parse_address("127.0.0.1:7000") == node_address{"127.0.0.1", 7000});
    CHECK(parse_address("::1:7000") == node_address{"::1", 7000});
    CHECK(parse_address(":7000") == node_address{"", 7000});
    CHECK(parse_address("h:7000,name") == node_address{"h", 7000});
    CHECK_FALSE(parse_address("h"));
    CHECK_FALSE(parse_address("h:0"));
    CHECK_FALSE(parse_address("h:70000"));
    CHECK_FALSE(parse_address("h:7x"));
    CHECK(to_string(node_address{"h", 1}) == "h:1");
}

TEST_CASE("cluster: the slot map from CLUSTER SHARDS", "[cluster]") {
    // Two shards; the first had a failover: its old primary failed.
    const auto shards = arr({
        map({bulk("slots"), arr({integer(0), integer(5460), integer(10923), integer(10925)}), bulk("nodes"),
             arr({shard_node("10.0.0.1", 7000, "master", "failed"),
                  shard_node("10.0.0.4", 7003, "master", "online"),
                  shard_node("10.0.0.5", 7004, "replica", "online")})}),
        map({bulk("slots"), arr({integer(5461), integer(10922)}), bulk("nodes"),
             arr({shard_node("10.0.0.2", 7001, "replica", "online"),
                  shard_node("10.0.0.3", 7002, "master", "online")})}),
        map({bulk("slots"), arr({}), bulk("nodes"),  // serves nothing
             arr({shard_node("10.0.0.9", 7009, "master", "online")})}),
    });
    slot_map m;
    std::string why;
    REQUIRE(slot_map::from_shards(shards, false, "seed", m, why));
    CHECK(*m.primary_of(0) == node_address{"10.0.0.4", 7003});
    CHECK(*m.primary_of(5460) == node_address{"10.0.0.4", 7003});
    CHECK(*m.primary_of(5461) == node_address{"10.0.0.3", 7002});
    CHECK(*m.primary_of(10925) == node_address{"10.0.0.4", 7003});
    CHECK(m.primary_of(10926) == nullptr);
    CHECK_FALSE(m.covers_all());
    CHECK(m.primaries().size() == 2);
    CHECK(m.primary_of_key("foo") == nullptr);  // 12182: unserved

    // MOVED updates one slot.
    m.assign(12182, {"10.0.0.3", 7002});
    CHECK(*m.primary_of_key("foo") == node_address{"10.0.0.3", 7002});
}

TEST_CASE("cluster: CLUSTER SHARDS in RESP2 form, TLS port, unknown endpoint", "[cluster]") {
    auto node = shard_node("", 7000, "master", "online", resp3_type::array);
    node.elements.push_back(bulk("tls-port"));
    node.elements.push_back(integer(8000));
    const auto shards = arr({arr({bulk("slots"), arr({integer(0), integer(16383)}), bulk("nodes"),
                                  arr({node})})});
    slot_map m;
    std::string why;
    REQUIRE(slot_map::from_shards(shards, true, "seed.example", m, why));
    CHECK(*m.primary_of(16383) == node_address{"seed.example", 8000});
    CHECK(m.covers_all());
    REQUIRE(slot_map::from_shards(shards, false, "seed.example", m, why));
    CHECK(*m.primary_of(0) == node_address{"seed.example", 7000});
}

TEST_CASE("cluster: malformed CLUSTER SHARDS replies are refused", "[cluster]") {
    slot_map m;
    m.assign(1, {"keep", 1});
    std::string why;
    CHECK_FALSE(slot_map::from_shards(bulk("x"), false, "", m, why));
    CHECK_FALSE(slot_map::from_shards(arr({map({bulk("slots"), arr({integer(0)})})}), false, "", m, why));
    CHECK_FALSE(slot_map::from_shards(
        arr({map({bulk("slots"), arr({integer(5), integer(1)}), bulk("nodes"),
                  arr({shard_node("h", 1, "master", "online")})})}),
        false, "", m, why));
    CHECK_FALSE(slot_map::from_shards(
        arr({map({bulk("slots"), arr({integer(0), integer(16384)}), bulk("nodes"),
                  arr({shard_node("h", 1, "master", "online")})})}),
        false, "", m, why));
    CHECK_FALSE(why.empty());
    CHECK(*m.primary_of(1) == node_address{"keep", 1});  // untouched on failure
}

TEST_CASE("cluster: the slot map from CLUSTER SLOTS", "[cluster]") {
    const auto slots = arr({
        arr({integer(0), integer(8191), arr({bulk("10.0.0.1"), integer(7000), bulk("id1")}),
             arr({bulk("10.0.0.4"), integer(7003), bulk("id4")})}),
        arr({integer(8192), integer(16383), arr({bulk("?"), integer(7001), bulk("id2")})}),
    });
    slot_map m;
    std::string why;
    REQUIRE(slot_map::from_slots(slots, "seed", m, why));
    CHECK(*m.primary_of(8191) == node_address{"10.0.0.1", 7000});
    CHECK(*m.primary_of(8192) == node_address{"seed", 7001});
    CHECK(m.covers_all());
    CHECK_FALSE(slot_map::from_slots(arr({arr({integer(0), integer(1)})}), "", m, why));
}

TEST_CASE("cluster: redirection errors", "[cluster]") {
    auto r = parse_redirect("MOVED 3999 127.0.0.1:6381");
    CHECK(r.kind == redirect_kind::moved);
    CHECK(r.slot == 3999);
    CHECK(r.target == node_address{"127.0.0.1", 6381});
    r = parse_redirect("ASK 3999 :6381");
    CHECK(r.kind == redirect_kind::ask);
    CHECK(r.target == node_address{"", 6381});
    CHECK(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot").kind ==
          redirect_kind::tryagain);
    CHECK(parse_redirect("CLUSTERDOWN The cluster is down").kind == redirect_kind::clusterdown);
    CHECK(parse_redirect("CLUSTERDOWN Hash slot not served").kind == redirect_kind::clusterdown);
    CHECK(parse_redirect("ERR MOVED 1 h:1").kind == redirect_kind::none);
    CHECK(parse_redirect("MOVED 16384 h:1").kind == redirect_kind::none);
    CHECK(parse_redirect("MOVED x h:1").kind == redirect_kind::none);
    CHECK(parse_redirect("MOVED 1").kind == redirect_kind::none);
    CHECK(parse_redirect("WRONGTYPE x").kind == redirect_kind::none);
    CHECK(parse_redirect("").kind == redirect_kind::none);
}

TEST_CASE("cluster: retry decisions within the command's deadline", "[cluster]") {
    using policy = redirect_policy;
    const auto t0 = policy::clock::time_point() + 1h;
    const node_address from{"10.0.0.1", 7000};

    SECTION("the command's own error is delivered") {
        policy p({t0 + 1s});
        CHECK(p.on_error("WRONGTYPE x", from, t0).action == policy::what::deliver);
    }
    SECTION("MOVED: update the map, retry at the target, refresh") {
        policy p({t0 + 1s});
        const auto d = p.on_error("MOVED 7 :7002", from, t0);
        CHECK(d.action == policy::what::retry_at);
        CHECK(d.update_map);
        CHECK(d.refresh_map);
        CHECK(d.target == node_address{"10.0.0.1", 7002});  // the sender's host
    }
    SECTION("ASK: ask the target once, the map stays") {
        policy p({t0 + 1s});
        const auto d = p.on_error("ASK 7 10.0.0.2:7001", from, t0);
        CHECK(d.action == policy::what::ask_at);
        CHECK_FALSE(d.update_map);
        CHECK(d.target == node_address{"10.0.0.2", 7001});
    }
    SECTION("redirections are bounded") {
        policy p({t0 + 1s, 10ms, 200ms, 3});
        for (int i = 0; i < 3; ++i)
            CHECK(p.on_error("MOVED 7 h:1", from, t0).action == policy::what::retry_at);
        const auto d = p.on_error("MOVED 7 h:1", from, t0);
        CHECK(d.action == policy::what::fail);
        CHECK(d.ec == error::cluster_down);
    }
    SECTION("TRYAGAIN and CLUSTERDOWN back off, doubling, until the deadline") {
        policy p({t0 + 100ms, 10ms, 40ms});
        auto d = p.on_error("TRYAGAIN x", from, t0);
        // Each delay is within the upper half of its step (core/backoff.hpp).
        CHECK(d.action == policy::what::retry_later);
        CHECK((d.delay >= 5ms && d.delay <= 10ms));
        CHECK_FALSE(d.refresh_map);
        d = p.on_error("CLUSTERDOWN The cluster is down", from, t0 + 10ms);
        CHECK(d.action == policy::what::retry_later);
        CHECK((d.delay >= 10ms && d.delay <= 20ms));
        CHECK(d.refresh_map);
        d = p.on_error("CLUSTERDOWN x", from, t0 + 30ms);
        CHECK((d.delay >= 20ms && d.delay <= 40ms));
        d = p.on_error("CLUSTERDOWN x", from, t0 + 70ms);  // 70 + 40 >= 100
        CHECK(d.action == policy::what::fail);
        CHECK(d.ec == error::cluster_down);
        CHECK(p.retries() == 3);
    }
    SECTION("an unreachable node: refresh and retry within the deadline") {
        policy p({t0 + 15ms, 10ms, 40ms});
        auto d = p.on_unreachable(t0);
        CHECK(d.action == policy::what::retry_later);
        CHECK(d.refresh_map);
        CHECK(p.on_unreachable(t0 + 10ms).action == policy::what::fail);
    }
}
