// What `corolock list` over etcd matches and how it reads keys
// (src/etcd/etcd_admin.hpp), without a server: the glob is Redis's (SCAN
// MATCH, src/core/glob_match.hpp), matched by the client because etcd (and
// ZooKeeper) match no patterns.
#include "core/glob_match.hpp"
#include "etcd/etcd_admin.hpp"
#include "etcd/etcd_backend.hpp"

#include <catch2/catch.hpp>

#include <string>

using corolock::detail::glob_match;
using corolock::detail::etcd::lock_prefix;
using corolock::detail::etcd::split_lock_key;

TEST_CASE("etcd list: the glob matches as Redis's MATCH does", "[etcd][unit]") {
    struct row {
        const char* pattern;
        const char* text;
        bool match;
    };
    const row rows[] = {
        {"*", "", true},
        {"*", "anything", true},
        {"", "", true},
        {"", "a", false},
        {"db-*", "db-migrate", true},
        {"db-*", "db", false},
        {"db-*", "xdb-1", false},
        {"*-job", "nightly-job", true},
        {"*-job", "nightly-job2", false},
        {"a*b*c", "aXXbYYc", true},
        {"a*b*c", "aXXbYY", false},
        {"a*a*a", "aaaa", true},
        {"?", "x", true},
        {"?", "", false},
        {"?", "xy", false},
        {"n?de", "node", true},
        {"[abc]x", "bx", true},
        {"[abc]x", "dx", false},
        {"[^abc]x", "dx", true},
        {"[^abc]x", "ax", false},
        {"[a-c]", "b", true},
        {"[c-a]", "b", true},  // a reversed range is swapped, as in Redis
        {"[a-c]", "d", false},
        {"[\\]]", "]", true},
        {"\\*", "*", true},
        {"\\*", "x", false},
        {"\\?", "?", true},
        {"a\\", "a\\", true},  // a trailing backslash is itself
        {"[ab", "a", true},    // an unclosed class runs to the end
        {"list?a*", "list/a/b", true},
        {"list?a*", "list-b", false},
        {"Deploy", "deploy", false},  // bytes, not case
        {"caf\xc3\xa9*", "caf\xc3\xa9-1", true},
    };
    for (const auto& r : rows) {
        INFO("pattern '" << r.pattern << "', text '" << r.text << "'");
        CHECK(glob_match(r.pattern, r.text) == r.match);
    }
}

TEST_CASE("etcd list: a long run of stars and a near miss stay cheap", "[etcd][unit]") {
    const std::string pattern = std::string(50, '*') + std::string(30, 'a') + "b";
    const std::string text(2000, 'a');
    CHECK_FALSE(glob_match(pattern, text));  // bounded: |pattern| * |text| steps
    CHECK(glob_match(pattern, text + "b"));
}

TEST_CASE("etcd list: a key's tail splits into the lock name and the owner", "[etcd][unit]") {
    std::string_view name, owner;
    const std::string prefix = "corolock/";
    for (const std::string& n :
         {std::string("a"), std::string("a/b"), std::string("list:1"), std::string(300, 'x')}) {
        const auto key = lock_prefix(prefix, n) + "0123abcd";
        REQUIRE(split_lock_key(key, prefix, name, owner));
        CHECK(name == n);
        CHECK(owner == "0123abcd");
    }
    for (const char* bad : {"not-a-lock", ":a/o", "01:a/o", "1:a", "1:a/", "2:a/o", "x:a/o",
                            "1:ab/o", "99999999999999999999:a/o"}) {
        INFO(bad);
        CHECK_FALSE(split_lock_key(prefix + bad, prefix, name, owner));
    }
    // A key outside the prefix (a hostile gateway's answer), shorter than
    // it too: no lock, and no exception (list() skips it).
    for (const char* outside : {"", "c", "corolock", "corolocK/1:a/o", "other/1:a/o"}) {
        INFO(outside);
        CHECK_FALSE(split_lock_key(outside, prefix, name, owner));
    }
}
