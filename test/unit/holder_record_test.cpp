// The holder record (src/core/holder_record.hpp): written by both backends,
// read back by status and list.
#include "core/holder_record.hpp"

#include <corolock/config.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>

using namespace corolock::detail;
using namespace std::chrono_literals;

TEST_CASE("holder record: written and read back, the label keeping its spaces", "[unit]") {
    const auto argument = holder_argument("make deploy  --all");
    CHECK(argument.rfind(std::to_string(::getpid()) + " ", 0) == 0);
    const auto record = holder_record(1'700'000'000'000'000, argument);
    const auto h = parse_holder_record(record, 1'700'000'002'500'000);
    REQUIRE(h.has_value());
    CHECK(h->pid == ::getpid());
    CHECK_FALSE(h->host.empty());
    CHECK(h->host.find(' ') == std::string::npos);
    CHECK(h->label == "make deploy  --all");
    CHECK(h->since.time_since_epoch() == 1'700'000'000'000'000us);
    CHECK(h->held_for == 2500ms);
}

TEST_CASE("holder record: an empty label, a long one cut, a clock behind", "[unit]") {
    const auto empty = parse_holder_record(holder_record(5, holder_argument("")), 5);
    REQUIRE(empty.has_value());
    CHECK(empty->label.empty());
    const auto cut = parse_holder_record(
        holder_record(5, holder_argument(std::string(corolock::max_holder_label_length + 9, 'x'))), 5);
    REQUIRE(cut.has_value());
    CHECK(cut->label.size() == corolock::max_holder_label_length);
    // The reader's clock behind the writer's: held for 0, never negative.
    const auto behind = parse_holder_record(holder_record(10'000'000, "1 h l"), 1'000'000);
    REQUIRE(behind.has_value());
    CHECK(behind->held_for == 0ms);
}

TEST_CASE("holder record: other shapes are no record", "[unit]") {
    for (const char* bad : {"", "0123456789abcdef0123456789abcdef", "12 34", "12 34 ", "x 34 h l",
                            "12 y h l", "12  h l"}) {
        INFO(bad);
        CHECK_FALSE(parse_holder_record(bad, 0).has_value());
    }
}
