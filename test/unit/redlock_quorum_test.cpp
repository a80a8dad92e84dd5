// RedLock's quorum decisions (detail::redlock_quorum) on a made-up clock: no
// server, no sockets, no timers.
#include "redlock/quorum.hpp"

#include "core/watchdog_schedule.hpp"

#include <catch2/catch.hpp>

#include <random>

using corolock::detail::redlock_quorum;
using corolock::detail::watchdog_schedule;
using namespace std::chrono_literals;
using outcome = redlock_quorum::outcome;
using node_state = redlock_quorum::node_state;
using time_point = redlock_quorum::clock::time_point;

namespace {

const time_point t0 = time_point{} + 1000s;
constexpr auto lease = 10s;
// 1 % of the lease + 2 ms, as docs/redlock.md states it.
constexpr auto drift = 102ms;

}  // namespace

TEST_CASE("redlock quorum: a majority of the nodes", "[redlock]") {
    CHECK(redlock_quorum::majority_of(1) == 1);
    CHECK(redlock_quorum::majority_of(3) == 2);
    CHECK(redlock_quorum::majority_of(4) == 3);
    CHECK(redlock_quorum::majority_of(5) == 3);
    CHECK(watchdog_schedule::drift(lease) == drift);
}

TEST_CASE("redlock quorum: granted by a majority within the validity", "[redlock]") {
    redlock_quorum q(5);
    q.begin_round(t0, lease);
    CHECK(q.decide(t0) == outcome::pending);
    q.on_granted(0, 11);
    q.on_granted(3, 13);
    CHECK(q.decide(t0 + 5ms) == outcome::pending);
    CHECK(q.deadline() == time_point::min());  // two of five hold nothing
    q.on_failed(1);
    q.on_granted(4, 12);
    CHECK(q.decide(t0 + 20ms) == outcome::granted);
    // validity = lease - elapsed - drift
    CHECK(q.validity(t0 + 20ms) == lease - 20ms - drift);
    CHECK(q.deadline() == t0 + lease - drift);
    CHECK(q.held_at(t0 + 20ms) == 3);
    CHECK(q.max_token() == 13);
}

TEST_CASE("redlock quorum: fails as soon as a majority is out of reach", "[redlock]") {
    redlock_quorum q(5);
    q.begin_round(t0, lease);
    q.on_refused(0);
    q.on_failed(1);
    q.on_granted(2, 1);
    CHECK(q.decide(t0 + 1ms) == outcome::pending);  // 1 held + 2 pending: 3 possible
    q.on_refused(3);
    CHECK(q.decide(t0 + 1ms) == outcome::failed);  // 1 held + 1 pending < 3
    CHECK(q.count(node_state::held) == 1);          // the backend releases everywhere
}

TEST_CASE("redlock quorum: a majority granted too late is a failure", "[redlock]") {
    redlock_quorum q(3);
    q.begin_round(t0, lease);
    q.on_granted(0, 1);
    q.on_granted(1, 2);
    CHECK(q.decide(t0 + lease - drift - 1ms) == outcome::granted);
    CHECK(q.decide(t0 + lease - drift) == outcome::failed);
    CHECK(q.decide(t0 + lease) == outcome::failed);
}

TEST_CASE("redlock quorum: answers to a decided node are ignored", "[redlock]") {
    redlock_quorum q(3);
    q.begin_round(t0, lease);
    q.on_failed(0);
    q.on_granted(0, 7);  // a late reply after the per-node timeout
    CHECK(q.state(0) == node_state::failed);
    CHECK(q.max_token() == 0);
    q.begin_round(t0 + 1s, lease);  // a new round forgets the last
    CHECK(q.count(node_state::pending) == 3);
}

TEST_CASE("redlock quorum: the hold lasts while a majority is confirmed", "[redlock]") {
    redlock_quorum q(5);
    q.begin_round(t0, lease);
    for (std::size_t i = 0; i < 5; ++i) q.on_granted(i, i + 1);
    REQUIRE(q.decide(t0 + 10ms) == outcome::granted);
    const time_point first = t0 + lease - drift;
    CHECK(q.deadline() == first);

    // Renewals confirmed on two nodes only: a majority still ends at `first`.
    const time_point r = t0 + 3s;
    q.on_renewed(0, r, lease);
    q.on_renewed(1, r, lease);
    q.on_renew_failed(2);
    q.on_renew_failed(3);
    q.on_renew_failed(4);
    CHECK(q.deadline() == first);
    CHECK_FALSE(q.lost(first - 1ms));
    CHECK(q.lost(first));

    // A third confirmed node carries the majority forward.
    q.on_renewed(4, r + 5ms, lease);
    CHECK(q.deadline() == r + lease - drift);

    // Keys gone on three nodes (restarts without persistence): lost at once,
    // whatever the deadlines say.
    q.on_renew_refused(0);
    q.on_renew_refused(1);
    CHECK(q.deadline() == first);  // nodes 2, 3 (old), 4 (renewed): third latest
    q.on_renew_refused(4);
    CHECK(q.deadline() == time_point::min());
    CHECK(q.lost(r));
}

TEST_CASE("redlock quorum: a renewal confirms a node that timed out", "[redlock]") {
    redlock_quorum q(3);
    q.begin_round(t0, lease);
    q.on_granted(0, 1);
    q.on_failed(1);
    q.on_refused(2);
    REQUIRE(q.decide(t0 + 1ms) == outcome::failed);  // 1 held, none pending
    // In a hold (a round granted by nodes 0 and 2, say), a timed-out node's
    // grant that came late is found by the watchdog's owner-checked renewal.
    q.on_granted(1, 2);
    CHECK(q.state(1) == node_state::failed);
    q.on_renewed(1, t0 + 2s, lease);
    CHECK(q.state(1) == node_state::held);
    CHECK(q.deadline() == t0 + lease - drift);  // node 0's, the earlier
    q.on_renewed(2, t0 + 2s, lease);            // refused stays refused
    CHECK(q.state(2) == node_state::refused);
}

TEST_CASE("redlock quorum: the deadline is when a majority could expire", "[redlock]") {
    // Property, on random states: just before deadline() a majority holds,
    // at deadline() one fewer than a majority does.
    std::mt19937 rng(25);
    for (int round = 0; round < 2000; ++round) {
        const std::size_t n = 1 + rng() % 7;
        redlock_quorum q(n);
        q.begin_round(t0, lease);
        for (std::size_t i = 0; i < n; ++i) {
            switch (rng() % 4) {
                case 0: q.on_refused(i); break;
                case 1: q.on_failed(i); break;
                default: q.on_granted(i, rng()); break;
            }
            if (q.state(i) != node_state::refused && rng() % 2)
                q.on_renewed(i, t0 + std::chrono::milliseconds(rng() % 5000), lease);
        }
        const time_point d = q.deadline();
        if (q.count(node_state::held) < q.majority()) {
            CHECK(d == time_point::min());
            continue;
        }
        CHECK(q.held_at(d - 1ns) >= q.majority());
        CHECK(q.held_at(d) < q.majority());
    }
}
