// The multi-lock's pure logic (include/corolock/multi_lock.hpp): the
// canonical order, the overall wait shared by the members, and an empty
// multi_guard's answers.
#include <corolock/multi_lock.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using corolock::detail::canonical_names;
using corolock::detail::remaining_wait;

TEST_CASE("multi_lock: canonical order is bytewise, duplicates merged", "[unit][multi]") {
    CHECK(canonical_names({"b", "a", "c", "a"}) == std::vector<std::string>{"a", "b", "c"});
    // Bytewise: upper case before lower, a prefix before its extensions,
    // bytes above 0x7f after ASCII whatever char's signedness.
    CHECK(canonical_names({"ab", "a", "B", "\xc3\xa9", "a"}) ==
          std::vector<std::string>{"B", "a", "ab", "\xc3\xa9"});
    // Any order of one set gives one sequence: what makes two multi-locks
    // wait on their shared names in the same order.
    CHECK(canonical_names({"x:2", "x:10", "x:1"}) == canonical_names({"x:1", "x:2", "x:10"}));
    CHECK(canonical_names({}).empty());
}

TEST_CASE("multi_lock: the wait left for a member", "[unit][multi]") {
    const auto now = std::chrono::steady_clock::now();
    CHECK_FALSE(remaining_wait(std::nullopt, now).has_value());  // no bound: until cancelled
    CHECK(remaining_wait(now + 300ms, now + 100ms) == std::optional<std::chrono::steady_clock::duration>(200ms));
    // Spent: zero, which asks the member to try once rather than to wait.
    CHECK(remaining_wait(now + 300ms, now + 300ms) == std::optional<std::chrono::steady_clock::duration>(0ms));
    CHECK(remaining_wait(now + 300ms, now + 1s) == std::optional<std::chrono::steady_clock::duration>(0ms));
}

TEST_CASE("multi_lock: an empty multi_guard holds nothing and says so", "[unit][multi]") {
    corolock::multi_guard g;
    CHECK_FALSE(g.owns_lock());
    CHECK_FALSE(g.lost());
    CHECK(g.tokens().empty());
    CHECK(g.lease_deadline() == std::chrono::steady_clock::time_point::min());
    std::promise<corolock::error_code> released, lost;
    g.async_release([&](corolock::error_code ec) { released.set_value(ec); });
    g.async_until_lost([&](corolock::error_code ec) { lost.set_value(ec); });
    auto r = released.get_future();
    auto l = lost.get_future();
    REQUIRE(r.wait_for(5s) == std::future_status::ready);
    REQUIRE(l.wait_for(5s) == std::future_status::ready);
    CHECK(r.get() == corolock::error::released);
    CHECK(l.get() == corolock::error::released);
}
