// The lock-delay rule (core/lock_delay.hpp): when a name is in lock-delay
// and for how much longer, what the scripts are asked for, and a re-entry
// keeping the tenure's delay.
#include "core/backend.hpp"
#include "core/lock_delay.hpp"

#include <catch2/catch.hpp>

#include <memory>

using namespace corolock::detail;
using namespace std::chrono_literals;

namespace {
struct bare_state final : lock_state {
    using lock_state::lock_state;
};
}  // namespace

TEST_CASE("lock-delay: in lock-delay once no more than the delay is left of the record",
          "[lock-delay]") {
    // No delay recorded: never in lock-delay.
    CHECK(delayed_for(0ms, 0ms) == 0ms);
    CHECK(delayed_for(500ms, 0ms) == 0ms);
    // The lease still runs: more than the delay is left.
    CHECK(delayed_for(2001ms, 2000ms) == 0ms);
    CHECK(delayed_for(2999ms, 2000ms) == 0ms);
    // The lease ended: the rest of the record is the delay left.
    CHECK(delayed_for(2000ms, 2000ms) == 2000ms);
    CHECK(delayed_for(1500ms, 2000ms) == 1500ms);
    CHECK(delayed_for(0ms, 2000ms) == 0ms);
    // PTTL's -1 (no TTL: not corolock's record) and -2 (no key).
    CHECK(delayed_for(-1ms, 2000ms) == 0ms);
    CHECK(delayed_for(-2ms, 2000ms) == 0ms);
}

TEST_CASE("lock-delay: the scripts keep the lease plus the delay, and record the delay",
          "[lock-delay]") {
    const lease_terms none{1s, 300ms};
    CHECK(server_hold_ms(none) == 1000);
    CHECK(lock_delay_ms(none) == 0);  // no delay argument, no field: as without lock-delay
    const lease_terms delayed{1s, 300ms, 2s};
    CHECK(server_hold_ms(delayed) == 3000);
    CHECK(lock_delay_ms(delayed) == 2000);
    // The holder's own deadline stays at the lease: the delay is the server's.
    CHECK(delayed.lease == 1s);
}

TEST_CASE("lock-delay: a re-entry keeps the tenure's delay", "[lock-delay]") {
    auto st = std::make_shared<bare_state>(nullptr, "name", "owner");
    const auto now = std::chrono::steady_clock::now();
    auto first = begin_or_join(*st, 1, lease_terms{1s, 300ms, 2s}, reentry_terms::renewal_only,
                               now + 1s);
    CHECK(first.began);
    CHECK(first.t->terms.lock_delay == 2s);
    // A re-entry that asks for none (or less) does not take it away.
    auto second =
        begin_or_join(*st, 2, lease_terms{1s, 300ms}, reentry_terms::renewal_only, now + 1s);
    CHECK_FALSE(second.began);
    CHECK(second.t == first.t);
    CHECK(second.t->terms.lock_delay == 2s);
    CHECK(second.t->terms.server_hold() == 3s);
}
