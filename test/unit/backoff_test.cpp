// core/backoff.hpp: the one rule of every reconnect and retry loop, on
// given seeds.
#include "core/backoff.hpp"

#include <catch2/catch.hpp>

#include <set>

using corolock::detail::backoff;
using namespace std::chrono_literals;

TEST_CASE("backoff: steps double from min to max, each delay in the step's upper half",
          "[backoff]") {
    backoff b(10ms, 80ms, 7);
    CHECK(b.step() == 0ms);
    const std::chrono::milliseconds steps[] = {10ms, 20ms, 40ms, 80ms, 80ms, 80ms};
    for (const auto step : steps) {
        const auto d = b.next();
        CHECK(b.step() == step);
        CHECK(d >= step - step / 2);
        CHECK(d <= step);
    }
    b.reset();
    CHECK(b.step() == 0ms);
    const auto d = b.next();
    CHECK(b.step() == 10ms);
    CHECK((d >= 5ms && d <= 10ms));
}

TEST_CASE("backoff: delays are spread, never all alike, and differ between seeds", "[backoff]") {
    // Clients that lost one server together must not come back in step.
    std::set<backoff::duration::rep> firsts, capped;
    for (std::uint32_t seed = 1; seed <= 50; ++seed) {
        backoff b(100ms, 1s, seed);
        firsts.insert(b.next().count());
        for (int i = 0; i < 10; ++i) b.next();
        capped.insert(b.next().count());
    }
    CHECK(firsts.size() > 25);
    CHECK(capped.size() > 25);
    // Unseeded: a different sequence per object.
    backoff a(100ms, 1s), c(100ms, 1s);
    bool differ = false;
    for (int i = 0; i < 8 && !differ; ++i) differ = a.next() != c.next();
    CHECK(differ);
}

TEST_CASE("backoff: a zero or inverted range never spins", "[backoff]") {
    backoff zero(0ms, 0ms, 3);
    for (int i = 0; i < 5; ++i) {
        const auto d = zero.next();
        CHECK(d >= 500us);  // half of the 1 ms floor
        CHECK(d <= 1ms);
    }
    backoff inverted(50ms, 10ms, 3);
    for (int i = 0; i < 5; ++i) {
        inverted.next();
        CHECK(inverted.step() == 50ms);
    }
}
