// The etcd backend's lease pool (src/etcd/lease_pool.hpp) without a server:
// one lease per duration, one grant for every acquire asking meanwhile, one
// keep-alive timetable per lease, the deadline from the keep-alive's send
// time, every holder handed back when the lease is lost, and the idle grace.
#include "etcd/lease_pool.hpp"

#include "core/watchdog_schedule.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

// Named, not anonymous: the unity build joins this file with others.
namespace lease_pool_unit {

using corolock::detail::watchdog_schedule;
using corolock::detail::etcd::lease_pool;
using namespace std::chrono_literals;
using clock_type = lease_pool::clock;
using action = lease_pool::action;
using reserved = lease_pool::reserved;

const auto t0 = clock_type::time_point(1000s);

// A pool with one granted lease (id 7) of `d`, granted at t0 with `ttl` s,
// used by one acquire.
lease_pool granted_pool(clock_type::duration d, std::int64_t ttl) {
    lease_pool p;
    std::int64_t id = -1;
    REQUIRE(p.reserve(d, t0, id) == reserved::grant);
    p.on_granted(d, 7, ttl, t0);
    return p;
}

TEST_CASE("etcd lease pool: one lease per duration, one grant for every acquire meanwhile",
          "[etcd][unit]") {
    lease_pool p;
    std::int64_t id = -1;
    CHECK(p.reserve(30s, t0, id) == reserved::grant);
    CHECK(id == 0);
    CHECK(p.reserve(30s, t0, id) == reserved::wait);  // the grant is on its way
    CHECK(p.reserve(5s, t0, id) == reserved::grant);  // another duration, another lease
    CHECK(p.size() == 2);
    p.on_granted(30s, 11, 30, t0);
    p.on_granted(5s, 12, 5, t0);
    CHECK(p.reserve(30s, t0 + 1s, id) == reserved::ready);
    CHECK(id == 11);
    CHECK(p.reserve(5s, t0 + 1s, id) == reserved::ready);
    CHECK(id == 12);
    REQUIRE(p.find(11));
    CHECK(p.find(11)->users == 3);
    CHECK(p.find(12)->users == 2);

    // A failed grant forgets the lease; the next acquire grants again.
    CHECK(p.reserve(1s, t0, id) == reserved::grant);
    p.on_grant_failed(1s);
    CHECK(p.reserve(1s, t0, id) == reserved::grant);
}

TEST_CASE("etcd lease pool: the deadline counts from the send time, for the shorter of the "
          "duration and the TTL",
          "[etcd][unit]") {
    auto p = granted_pool(2500ms, 3);  // etcd rounds up to whole seconds
    CHECK(lease_pool::ttl_seconds(2500ms) == 3);
    CHECK(lease_pool::ttl_seconds(1ms) == 1);
    REQUIRE(p.find(7));
    CHECK(p.find(7)->deadline == watchdog_schedule::deadline_for(t0, 2500ms));
    CHECK(p.alive(7, t0 + 2s));
    CHECK_FALSE(p.alive(7, p.find(7)->deadline));

    // A keep-alive sent at t0 + 1 s and answered at t0 + 2 s moves the
    // deadline from the sending, not the answer.
    CHECK(p.due(7, t0 + 1s) == action::renew);
    CHECK(p.due(7, t0 + 1s) == action::none);  // one on its way at a time
    CHECK(p.on_keepalive(7, t0 + 1s, 3, t0 + 2s));
    CHECK(p.find(7)->deadline == watchdog_schedule::deadline_for(t0 + 1s, 2500ms));
    // A late answer to an earlier send never moves it back.
    const auto deadline = p.find(7)->deadline;
    CHECK(p.on_keepalive(7, t0 + 500ms, 3, t0 + 2100ms));
    CHECK(p.find(7)->deadline == deadline);
}

TEST_CASE("etcd lease pool: keep-alives every third of the duration, one timer's timetable",
          "[etcd][unit]") {
    auto p = granted_pool(30s, 30);
    CHECK(p.next_wake(7) == t0 + 10s);
    CHECK(p.due(7, t0 + 9s) == action::none);
    CHECK(p.due(7, t0 + 10s) == action::renew);
    // While it is on its way the timer waits for the deadline only.
    CHECK(p.next_wake(7) == p.find(7)->deadline);
    // A failed keep-alive is tried again after a quarter of the interval;
    // the deadline stays.
    const auto deadline = p.find(7)->deadline;
    p.on_keepalive_failed(7, t0 + 11s);
    CHECK(p.find(7)->deadline == deadline);
    CHECK(p.next_wake(7) == t0 + 11s + 2500ms);
    CHECK(p.due(7, t0 + 13500ms) == action::renew);
    CHECK(p.on_keepalive(7, t0 + 13500ms, 30, t0 + 14s));
    CHECK(p.next_wake(7) == t0 + 23500ms);
}

TEST_CASE("etcd lease pool: a lease is lost past its deadline, or when etcd says it is gone, "
          "with every holder under it",
          "[etcd][unit]") {
    SECTION("the deadline passes unconfirmed") {
        auto p = granted_pool(3s, 3);
        std::int64_t id = 0;
        CHECK(p.reserve(3s, t0, id) == reserved::ready);
        p.add_holder(7, 100);
        p.add_holder(7, 200);
        const auto deadline = p.find(7)->deadline;
        CHECK(p.due(7, t0 + 1s) == action::renew);
        CHECK(p.due(7, deadline) == action::lose);
        // Never handed out past its deadline: the caller loses it first.
        CHECK(p.reserve(3s, deadline, id) == reserved::stale);
        CHECK(id == 7);
        // A keep-alive answered after the deadline does not save it.
        CHECK_FALSE(p.on_keepalive(7, t0 + 1s, 3, deadline));
        auto gone = p.remove(7);
        REQUIRE(gone);
        std::sort(gone->holders.begin(), gone->holders.end());
        CHECK(gone->holders == std::vector<std::uint64_t>{100, 200});
        CHECK_FALSE(p.alive(7, t0));
        CHECK(p.reserve(3s, deadline, id) == reserved::grant);  // a fresh lease
    }
    SECTION("etcd answers a keep-alive with no TTL") {
        auto p = granted_pool(3s, 3);
        p.add_holder(7, 100);
        CHECK(p.due(7, t0 + 1s) == action::renew);
        CHECK_FALSE(p.on_keepalive(7, t0 + 1s, 0, t0 + 1100ms));
        auto gone = p.remove(7);
        REQUIRE(gone);
        CHECK(gone->holders == std::vector<std::uint64_t>{100});
    }
    SECTION("uses of a lease lost since are ignored") {
        auto p = granted_pool(3s, 3);
        p.remove(7);
        p.release(7, t0);
        p.add_holder(7, 1);
        p.remove_holder(7, 1);
        CHECK(p.size() == 0);
        CHECK(p.due(7, t0) == action::none);
    }
}

TEST_CASE("etcd lease pool: a lease nobody uses is revoked after an idle grace of its duration",
          "[etcd][unit]") {
    auto p = granted_pool(6s, 6);
    p.add_holder(7, 1);
    CHECK(p.due(7, t0 + 2s) == action::renew);
    CHECK(p.on_keepalive(7, t0 + 2s, 6, t0 + 2100ms));
    p.remove_holder(7, 1);
    p.release(7, t0 + 3s);  // the last use: idle from here
    CHECK(p.next_wake(7) == t0 + 4s);  // the keep-alive comes first
    CHECK(p.due(7, t0 + 4s) == action::renew);
    CHECK(p.on_keepalive(7, t0 + 4s, 6, t0 + 4100ms));
    CHECK(p.next_wake(7) == std::min(t0 + 6s, t0 + 9s));
    CHECK(p.due(7, t0 + 6s) == action::renew);
    CHECK(p.on_keepalive(7, t0 + 6s, 6, t0 + 6100ms));
    CHECK(p.next_wake(7) == t0 + 8s);
    CHECK(p.due(7, t0 + 8s) == action::renew);
    CHECK(p.on_keepalive(7, t0 + 8s, 6, t0 + 8100ms));
    CHECK(p.next_wake(7) == t0 + 9s);  // the grace ends before the next keep-alive
    CHECK(p.due(7, t0 + 9s) == action::revoke);

    // A use within the grace keeps it.
    auto q = granted_pool(6s, 6);
    q.release(7, t0 + 1s);
    CHECK(q.due(7, t0 + 2s) == action::renew);
    CHECK(q.on_keepalive(7, t0 + 2s, 6, t0 + 2100ms));
    std::int64_t id = 0;
    CHECK(q.reserve(6s, t0 + 5s, id) == reserved::ready);
    CHECK(q.due(7, t0 + 7500ms) == action::renew);  // not revoke: used again
    CHECK(q.on_keepalive(7, t0 + 7500ms, 6, t0 + 7600ms));
    CHECK(q.due(7, t0 + 8s) == action::none);
}

}  // namespace lease_pool_unit
