// The per-channel fairness decisions (src/redis/lock/handoff.hpp), on made-up
// times: no server, no timer.
#include "redis/lock/handoff.hpp"

#include <catch2/catch.hpp>

using corolock::detail::handoff_table;
using namespace std::chrono_literals;

namespace {
const auto epoch = handoff_table::clock::time_point() + 1h;
constexpr auto never = handoff_table::clock::time_point::min();
}  // namespace

TEST_CASE("handoff: a message with no release of ours in flight wakes at once", "[handoff]") {
    handoff_table h;
    CHECK(h.wake_on_message("c"));
    CHECK(h.yield_until("c", epoch) == never);
    CHECK(h.empty());
}

TEST_CASE("handoff: with no other process waiting, the held wake-up comes with the reply",
          "[handoff]") {
    handoff_table h;
    h.on_release_sent("c");
    CHECK_FALSE(h.wake_on_message("c"));  // our own message, just before the reply
    // One receiver: our own connection, since this process waits.
    const auto d = h.on_release_reply("c", true, 1, true, epoch, epoch + 100us, true);
    CHECK(d.wake_now);
    CHECK(d.arm_at == never);
    CHECK(h.empty());
}

TEST_CASE("handoff: another process waiting: our waiter yields a few round trips", "[handoff]") {
    handoff_table h;
    h.on_release_sent("c");
    CHECK_FALSE(h.wake_on_message("c"));
    const auto now = epoch + 100us;
    const auto d = h.on_release_reply("c", true, 2, true, epoch, now, true);
    CHECK_FALSE(d.wake_now);
    CHECK(d.arm_at == now + 400us);  // four round trips, within the bounds
    CHECK(h.yield_until("c", now) == now + 400us);

    // A second release's message while the first is held joins it.
    h.on_release_sent("c");
    CHECK_FALSE(h.wake_on_message("c"));
    CHECK(h.on_release_reply("c", true, 2, true, epoch, now, true).arm_at == never);
    CHECK(h.on_timer("c") == 2);
    h.erase_if_idle("c", now + 400us);
    CHECK(h.empty());
}

TEST_CASE("handoff: the yield is bounded", "[handoff]") {
    handoff_table h;
    CHECK(h.on_release_reply("c", false, 1, false, epoch, epoch + 1us, true).arm_at == never);
    CHECK(h.yield_until("c", epoch + 1us) == epoch + 1us + handoff_table::min_yield);
    CHECK(h.yield_until("c", epoch + 1s) == never);
    CHECK(h.empty());
    h.on_release_reply("c", false, 1, false, epoch, epoch + 1s, true);
    CHECK(h.yield_until("c", epoch + 1s) == epoch + 1s + handoff_table::max_yield);
}

TEST_CASE("handoff: a stopped client wakes at once instead of arming", "[handoff]") {
    handoff_table h;
    h.on_release_sent("c");
    CHECK_FALSE(h.wake_on_message("c"));
    const auto d = h.on_release_reply("c", true, 2, true, epoch, epoch + 100us, false);
    CHECK(d.wake_now);
    CHECK(d.arm_at == never);
}

TEST_CASE("handoff: a failed release still releases the held wake-up", "[handoff]") {
    handoff_table h;
    h.on_release_sent("c");
    CHECK_FALSE(h.wake_on_message("c"));
    CHECK(h.on_release_reply("c", true, -1, true, epoch, epoch + 100us, true).wake_now);
    CHECK(h.empty());
}
