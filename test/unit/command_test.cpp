// The command serializer: exact bytes, binary safety, and a round trip
// through the parser.
#include <corolock/command.hpp>
#include "redis/resp/resp3_parser.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using corolock::command;
using corolock::error_code;
using corolock::reply;
using corolock::resp3_type;
using namespace std::string_literals;

namespace {

// Parses bytes that must hold exactly one complete reply.
reply parse_one(std::string_view bytes) {
    corolock::detail::resp3_parser p;
    error_code ec;
    p.consume(bytes, ec);
    INFO(p.diagnostic());
    REQUIRE_FALSE(ec);
    REQUIRE(p.has_reply());
    reply r = p.pop();
    CHECK_FALSE(p.has_reply());
    CHECK(p.buffered() == 0);
    return r;
}

}  // namespace

TEST_CASE("command: serializes an array of bulk strings", "[unit][command]") {
    CHECK(command{"PING"}.payload() == "*1\r\n$4\r\nPING\r\n");
    CHECK(command{"SET", "key", "value"}.payload() ==
          "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
    const std::string key = "lock:a";
    const std::string_view token = "t1";
    CHECK(command{"GET", key}.payload() == "*2\r\n$3\r\nGET\r\n$6\r\nlock:a\r\n");
    CHECK(command{"GET", token}.payload() == "*2\r\n$3\r\nGET\r\n$2\r\nt1\r\n");
    CHECK(command{}.empty());
    CHECK(command{}.size() == 0);
    CHECK(command{}.payload() == "*0\r\n");
}

TEST_CASE("command: integers are written in decimal", "[unit][command]") {
    command c{"PEXPIRE", "k"};
    c.arg(std::int64_t{-1500});
    CHECK(c.payload() == "*3\r\n$7\r\nPEXPIRE\r\n$1\r\nk\r\n$5\r\n-1500\r\n");
    CHECK(c.size() == 3);
    CHECK_FALSE(c.empty());

    CHECK(command{"X", 0, 30000, -1}.payload() ==
          "*4\r\n$1\r\nX\r\n$1\r\n0\r\n$5\r\n30000\r\n$2\r\n-1\r\n");
    command extremes;
    extremes.arg(INT64_MIN).arg(INT64_MAX);
    CHECK(extremes.payload() ==
          "*2\r\n$20\r\n-9223372036854775808\r\n$19\r\n9223372036854775807\r\n");
}

TEST_CASE("command: arguments are binary-safe", "[unit][command]") {
    const std::string nul = "a\0b"s;
    command c{"SET", "", nul, "line\r\nbreak"};
    CHECK(c.payload() == "*4\r\n$3\r\nSET\r\n$0\r\n\r\n$3\r\na\0b\r\n$11\r\nline\r\nbreak\r\n"s);
    command only_nul;
    only_nul.arg("\0"s);
    CHECK(only_nul.payload() == "*1\r\n$1\r\n\0\r\n"s);
}

TEST_CASE("command: append_to adds to what the buffer already holds", "[unit][command]") {
    const command ping{"PING"};
    const command get{"GET", "k"};
    std::string out = "prefix";
    ping.append_to(out);
    get.append_to(out);
    CHECK(out == "prefix*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    CHECK(out == "prefix" + ping.payload() + get.payload());

    // Ten or more arguments: a two-digit header.
    command wide{"DEL"};
    for (int i = 0; i < 10; ++i) wide.arg(std::int64_t{i});
    CHECK(wide.payload().substr(0, 5) == "*11\r\n");
}

TEST_CASE("command: name is the upper-cased first argument", "[unit][command]") {
    CHECK(command{"subscribe", "ch"}.name() == "SUBSCRIBE");
    CHECK(command{"EvalSha", "x"}.name() == "EVALSHA");
    CHECK(command{"client", "setname"}.name() == "CLIENT");
    CHECK(command{""}.name().empty());
    CHECK(command{}.name().empty());
    const std::string long_name(300, 'q');
    CHECK(command{long_name}.name() == std::string(300, 'Q'));
    // Only ASCII letters change; other bytes pass through untouched.
    CHECK(command{"a-b_c\xe9\0"s}.name() == "A-B_C\xe9\0"s);
    command numeric;
    numeric.arg(std::int64_t{42});
    CHECK(numeric.name() == "42");
}

TEST_CASE("command: idempotence is opt-in", "[unit][command]") {
    CHECK_FALSE(command{"GET", "k"}.is_idempotent());
    CHECK(command{"GET", "k"}.idempotent().is_idempotent());
    CHECK_FALSE(command{"GET", "k"}.idempotent().idempotent(false).is_idempotent());
}

TEST_CASE("command: parsing the serialized bytes gives the arguments back", "[unit][command]") {
    std::string every_byte;
    for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
    const std::vector<std::string> args{"EVAL", "return 1", "0", "", "\r\n", "\0\0"s, "$3\r\n*1",
                                        every_byte, std::string(100000, 'x')};
    command c;
    for (const auto& a : args) c.arg(a);
    REQUIRE(c.size() == args.size());

    const reply r = parse_one(c.payload());
    REQUIRE(r.type == resp3_type::array);
    REQUIRE(r.elements.size() == args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
        INFO("argument " << i);
        CHECK(r.elements[i].type == resp3_type::bulk_string);
        CHECK(r.elements[i].str == args[i]);
        CHECK(r.elements[i].attributes.empty());
    }

    // Pipelined: several commands in one buffer come back one by one.
    std::string pipeline;
    command{"MULTI"}.append_to(pipeline);
    command{"SET", "k", every_byte}.append_to(pipeline);
    command{"EXEC"}.append_to(pipeline);
    corolock::detail::resp3_parser p;
    error_code ec;
    p.consume(pipeline, ec);
    REQUIRE_FALSE(ec);
    std::vector<reply> got;
    while (p.has_reply()) got.push_back(p.pop());
    REQUIRE(got.size() == 3);
    CHECK(got[0].elements.at(0).str == "MULTI");
    REQUIRE(got[1].elements.size() == 3);
    CHECK(got[1].elements[2].str == every_byte);
    CHECK(got[2].elements.at(0).str == "EXEC");
}

TEST_CASE("command: integers are written in decimal, chars and bools are refused",
          "[unit][command]") {
    const std::uint64_t token = 42;
    CHECK(command("SET", "fence", token).payload() ==
          "*3\r\n$3\r\nSET\r\n$5\r\nfence\r\n$2\r\n42\r\n");
    static_assert(corolock::command_argument<int>);
    static_assert(corolock::command_argument<const std::string&>);
    static_assert(!corolock::command_argument<char>);
    static_assert(!corolock::command_argument<bool>);
}
