// election::async_observe's filter (core/leader_filter.hpp): which readings
// of a name's leader are reported, without any server.
#include "core/leader_filter.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using corolock::leader_info;
using corolock::leader_state;
using corolock::detail::leader_filter;

namespace {

leader_state leader_at(std::uint64_t epoch, std::string value = "v") {
    leader_info l;
    l.epoch = epoch;
    l.value = std::move(value);
    return l;
}

// The readings the filter lets through, as "epoch:value" or "none".
std::vector<std::string> filtered(const std::vector<leader_state>& readings) {
    leader_filter f;
    std::vector<std::string> out;
    for (const auto& r : readings)
        if (f.accept(r)) out.push_back(r ? std::to_string(r->epoch) + ":" + r->value : "none");
    return out;
}

}  // namespace

TEST_CASE("leader_filter: the first reading is reported, leader or none", "[election][unit]") {
    CHECK(filtered({leader_at(7)}) == std::vector<std::string>{"7:v"});
    CHECK(filtered({std::nullopt}) == std::vector<std::string>{"none"});
}

TEST_CASE("leader_filter: repeats are not reported, newer terms are", "[election][unit]") {
    CHECK(filtered({leader_at(3), leader_at(3), leader_at(5), leader_at(5), leader_at(9)}) ==
          std::vector<std::string>{"3:v", "5:v", "9:v"});
}

TEST_CASE("leader_filter: an older epoch is never reported after a newer one",
          "[election][unit]") {
    // A reading from a stale replica, or one that overtook another.
    CHECK(filtered({leader_at(5), leader_at(3), leader_at(4), leader_at(6)}) ==
          std::vector<std::string>{"5:v", "6:v"});
    // Nor after the newer term ended: a term seen to end does not come back.
    CHECK(filtered({leader_at(5), std::nullopt, leader_at(4), leader_at(5), leader_at(8)}) ==
          std::vector<std::string>{"5:v", "none", "8:v"});
}

TEST_CASE("leader_filter: no leader is reported once after a leader", "[election][unit]") {
    CHECK(filtered({std::nullopt, std::nullopt, leader_at(2), std::nullopt, std::nullopt}) ==
          std::vector<std::string>{"none", "2:v", "none"});
}

TEST_CASE("leader_filter: a new value in the reported term is a change", "[election][unit]") {
    CHECK(filtered({leader_at(4, "a"), leader_at(4, "b"), leader_at(4, "b"), leader_at(3, "c")}) ==
          std::vector<std::string>{"4:a", "4:b"});
    leader_filter f;
    CHECK(f.accept(leader_at(4, "a")));
    CHECK(f.last_epoch() == 4);
}
