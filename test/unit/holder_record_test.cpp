// The holder record (src/core/holder_record.hpp): written by both backends,
// read back by status and list.
#include "core/holder_record.hpp"

#include <corolock/config.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

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

TEST_CASE("holder record: a moment no clock holds is no record, and nothing overflows", "[unit]") {
    // A stored "-9223372036854775808" overflowed the held-for arithmetic,
    // and a moment past the year 2262 the system clock's nanoseconds.
    for (const char* bad : {"-9223372036854775808 1 h l", "-1 1 h l", "9223372036854775807 1 h l",
                            "9223372036854776 1 h l"}) {
        INFO(bad);
        CHECK_FALSE(parse_holder_record(bad, 0).has_value());
        CHECK_FALSE(parse_holder_record(bad, INT64_MIN).has_value());
    }
    // The reader's clock at either end of its range: no overflow either.
    const auto early = parse_holder_record("5000 1 h l", INT64_MIN);
    REQUIRE(early.has_value());
    CHECK(early->held_for == 0ms);
    const auto late = parse_holder_record("0 1 h l", INT64_MAX);
    REQUIRE(late.has_value());
    CHECK(late->held_for == std::chrono::milliseconds(INT64_MAX / 1000));
    const auto latest = parse_holder_record("9223372036854775 1 h l", 9223372036854775);
    REQUIRE(latest.has_value());
    CHECK(latest->held_for == 0ms);
}
