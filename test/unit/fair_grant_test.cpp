// The fair mutex's pieces that need no server: the handoff message's parser
// and the queue keys (src/redis/lock/fair_scripts.hpp, scripts.hpp).
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/scripts.hpp"

#include <catch2/catch.hpp>

using namespace corolock::detail;
using namespace std::chrono_literals;

TEST_CASE("fair grant: the handoff message is parsed, anything else is refused",
          "[fair][unit]") {
    const auto g = parse_fair_grant(">0123abcd 7 1732620000000001 -42");
    REQUIRE(g);
    CHECK(g->owner == "0123abcd");
    CHECK(g->level == 7);
    CHECK(g->token == 1732620000000001ULL);
    CHECK(g->seq == -42);
    for (const char* bad : {"", "0123abcd", ">", ">owner", ">owner 7 8", ">owner 7 8 9 10",
                            ">owner x 8 9", ">owner 7 8 9x", "> 7 8 9", ">owner  7 8 9",
                            "*owner 7 8 9"})
        CHECK_FALSE(parse_fair_grant(bad));
}

TEST_CASE("fair grant: a fair lock's keys share the hash tag, a mutex's have no queue",
          "[fair][unit]") {
    const lock_keys fair("jobs", extra_keys::queue);
    CHECK(fair.lock() == "corolock:{jobs}");
    CHECK(fair.fence() == "corolock:{jobs}:fence");
    CHECK(fair.channel() == "corolock:{jobs}:unlock");
    CHECK(fair.queue() == "corolock:{jobs}:queue");
    CHECK(fair.entries() == "corolock:{jobs}:entries");
    const lock_keys plain("jobs");
    CHECK(plain.channel() == "corolock:{jobs}:unlock");
    CHECK(plain.queue().empty());
    CHECK(plain.entries().empty());
    CHECK(fair_entry_lease(30s) == 2s);
    CHECK(fair_entry_lease(500ms) == 500ms);
}
