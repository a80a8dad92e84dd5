// The ZooKeeper backend's decisions without a server: zk:// URLs, the lock
// recipe (lock_recipe.hpp: names, owner, predecessor, token source) and the
// session's lease clock (session_clock.hpp).
#include "core/watchdog_schedule.hpp"
#include "zk/lock_recipe.hpp"
#include "zk/session_clock.hpp"
#include "zk/url.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace std::chrono_literals;
using corolock::error;
using namespace corolock::detail::zk;
using clock_type = std::chrono::steady_clock;

namespace {
// A contender's child name, as the ensemble makes it from node_prefix().
std::string child(const std::string& attempt, int seq) {
    auto digits = std::to_string(seq);
    return node_prefix(attempt) + std::string(10 - digits.size(), '0') + digits;
}
}  // namespace

TEST_CASE("zk url: hosts, root and session timeout", "[zk][unit]") {
    zk_options o;
    std::string why;
    REQUIRE_FALSE(parse_url("zk://127.0.0.1:2181", o, why));
    CHECK(o.hosts == "127.0.0.1:2181");
    CHECK(o.root == "/corolock");
    CHECK(o.session_timeout == 10s);

    REQUIRE_FALSE(parse_url("ZK://a:1,b:2,[::1]:3/apps/locks?session_timeout_ms=2500", o, why));
    CHECK(o.hosts == "a:1,b:2,[::1]:3");
    CHECK(o.root == "/apps/locks");
    CHECK(o.session_timeout == 2500ms);

    REQUIRE_FALSE(parse_url("zk://h:1/", o, why));
    CHECK(o.root == "/corolock");
    REQUIRE_FALSE(parse_url("zk://h:1/x/", o, why));
    CHECK(o.root == "/x");
}

TEST_CASE("zk url: digest credentials in the user part, %-decoded, never echoed", "[zk][unit]") {
    zk_options o;
    std::string why;
    REQUIRE_FALSE(parse_url("zk://127.0.0.1:2181", o, why));
    CHECK_FALSE(o.authenticated());
    REQUIRE_FALSE(parse_url("zk://app:s3%40cr%3Aet@a:1,b:2/locks", o, why));
    CHECK(o.authenticated());
    CHECK(o.user == "app");
    CHECK(o.password == "s3@cr:et");
    CHECK(o.hosts == "a:1,b:2");
    CHECK(o.root == "/locks");
    // An '@' in the password, unescaped: the last '@' ends the user part.
    REQUIRE_FALSE(parse_url("zk://app:p@ss@h:1", o, why));
    CHECK(o.password == "p@ss");
    for (const char* url : {"zk://s3cret@h:1", "zk://app:@h:1", "zk://:s3cret@h:1",
                            "zk://a%3Ab:s3cret@h:1"}) {
        INFO(url);
        CHECK(parse_url(url, o, why) == error::invalid_url);
        CHECK(why.find("s3cret") == std::string::npos);
    }
}

TEST_CASE("zk url: bad ones are invalid_url with a reason", "[zk][unit]") {
    for (const char* url :
         {"zk://", "zk://host", "zk://host:0", "zk://host:70000", "zk://:2181", "zk://h:1,",
          "zk://u@h:1", "zk://:p@h:1", "zk://u:@h:1", "zk://h:1/a//b", "zk://h:1/a/../b", "zk://h:1/zookeeper",
          "zk://h:1/a b", "zk://h:1?session_timeout_ms=5", "zk://h:1?timeout=5",
          "etcd://h:1", "zk://h:1/a%2Fb"}) {
        INFO(url);
        zk_options o;
        std::string why;
        CHECK(parse_url(url, o, why) == error::invalid_url);
        CHECK_FALSE(why.empty());
    }
}

TEST_CASE("zk recipe: a lock name is one escaped node under <root>/locks", "[zk][unit]") {
    CHECK(lock_dir("/corolock", "orders:42") == "/corolock/locks/orders%3A42");
    CHECK(lock_dir("/r", "a/b") == "/r/locks/a%2Fb");
    // '%' itself is escaped, so "a/b" and "a%2Fb" stay two locks.
    CHECK(lock_dir("/r", "a%2Fb") == "/r/locks/a%252Fb");
    CHECK(lock_dir("/r", "..") == "/r/locks/%2E.");
    CHECK(lock_dir("/r", "x.y-z_1") == "/r/locks/x.y-z_1");
    for (const std::string& name : std::vector<std::string>{"orders:42", "a/b", "a%2Fb", "..", std::string("\0\xff z", 4)}) {
        const auto dir = lock_dir("/r", name);
        const auto node = dir.substr(dir.rfind('/') + 1);
        CHECK(node.find('/') == std::string::npos);
        CHECK(unescape_name(node) == name);
    }
    CHECK_FALSE(unescape_name("bad%2"));
    CHECK_FALSE(unescape_name("bad%zz"));
}

TEST_CASE("zk recipe: the owner is the lowest sequence, whatever the attempt ids",
          "[zk][unit]") {
    // Attempt ids sort in the opposite order of the sequences: ordering by
    // the whole name would pick the wrong owner.
    const auto a = child("ffff", 7), b = child("0000", 8), c = child("8888", 12);
    const std::vector<std::string> kids{c, "not-a-contender", b, a};
    CHECK(lowest(kids) == a);
    CHECK(place_in_line(kids, a).what == standing::kind::owner);
    CHECK(sequence_of(a) == 7u);
    CHECK(sequence_of(c) == 12u);
    CHECK_FALSE(sequence_of("not-a-contender"));
    CHECK_FALSE(sequence_of("_c_x-lock-12345678x0"));
    CHECK_FALSE(sequence_of("_c_x-lokk-0000000001"));
}

TEST_CASE("zk recipe: each waiter watches only the contender just before it", "[zk][unit]") {
    const auto a = child("a1", 3), b = child("b1", 5), c = child("c1", 9), d = child("d1", 11);
    const std::vector<std::string> kids{d, b, a, c};
    const auto pb = place_in_line(kids, b), pc = place_in_line(kids, c), pd = place_in_line(kids, d);
    CHECK(pb.what == standing::kind::waiting);
    CHECK(pb.predecessor == a);
    CHECK(pc.predecessor == b);  // not the owner: no herd when the owner goes
    CHECK(pd.predecessor == c);
    // Gone from the list (its session expired): start again.
    CHECK(place_in_line({a, b}, c).what == standing::kind::missing);
    CHECK(place_in_line(kids, "garbage").what == standing::kind::missing);
}

TEST_CASE("zk recipe: a create whose answer was lost is found by its attempt id",
          "[zk][unit]") {
    const auto mine = child("1234abcd", 40);
    const std::vector<std::string> kids{child("99", 39), mine, child("1234abcdef", 41)};
    CHECK(find_attempt(kids, "1234abcd") == mine);
    CHECK(find_attempt(kids, "1234abc") == std::nullopt);  // a prefix of an id is not the id
    CHECK(find_attempt(kids, "777") == std::nullopt);
}

TEST_CASE("zk recipe: a node names its owner and its attempt", "[zk][unit]") {
    const auto id = attempt_id("0123abcd", 7);
    CHECK(id == "0123abcd.7");
    CHECK(owner_of(child(id, 3)) == "0123abcd");
    CHECK(owner_of("stranger") == "");
    // Two attempts of one owner never share a prefix that finds the other.
    const std::vector<std::string> kids{child(attempt_id("0123abcd", 17), 4)};
    CHECK_FALSE(find_attempt(kids, attempt_id("0123abcd", 1)));
}

TEST_CASE("zk recipe: the creation zxid is the token only when the directory did not change "
          "since",
          "[zk][unit]") {
    CHECK(creation_is_token(100, 100));
    // A child came or went after the node: an earlier holder may have minted
    // a later zxid (a re-entry's write) before it left.
    CHECK_FALSE(creation_is_token(100, 104));
}

TEST_CASE("zk session clock: the deadline runs from when the last answered request was sent",
          "[zk][unit]") {
    using corolock::detail::watchdog_schedule;
    session_clock c;
    const auto t0 = clock_type::now();
    CHECK(c.lost(t0));  // nothing answered yet
    c.on_connected(0x51, 3s);
    CHECK(c.connected());
    CHECK(c.lost(t0));
    CHECK(c.heartbeat_interval() == 1s);

    c.on_answered(t0);
    CHECK(c.deadline() == t0 + 3s - watchdog_schedule::drift(3s));
    CHECK(c.deadline() < t0 + 3s);
    // An answer to an older request never moves the deadline back.
    c.on_answered(t0 - 1s);
    CHECK(c.deadline() == t0 + 3s - watchdog_schedule::drift(3s));
    c.on_answered(t0 + 1s);
    CHECK(c.deadline() == t0 + 4s - watchdog_schedule::drift(3s));

    // Suspended: the deadline stays; the session is lost only when it passes.
    c.on_disconnected();
    CHECK_FALSE(c.connected());
    CHECK_FALSE(c.lost(t0 + 3s));
    CHECK(c.lost(t0 + 4s));
    // The same session through another server: the deadline carries on, and
    // a longer timeout offered then is not trusted.
    c.on_connected(0x51, 5s);
    CHECK(c.timeout() == 3s);
    CHECK(c.deadline() == t0 + 4s - watchdog_schedule::drift(3s));

    // Expired: lost at once; a new session starts with no deadline.
    c.on_expired();
    CHECK(c.lost(t0));
    c.on_connected(0x52, 2s);
    CHECK(c.lost(t0 + 1s));
    c.on_answered(t0 + 1s);
    CHECK(c.deadline() == t0 + 3s - watchdog_schedule::drift(2s));
}
