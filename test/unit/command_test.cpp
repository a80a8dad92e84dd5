// The command serializer: exact bytes, binary safety, and a round trip
// through the parser.
#include <corolock/command.hpp>
#include <corolock/detail/resp3_parser.hpp>

#include <catch2/catch.hpp>

using corolock::command;
using namespace std::string_literals;

TEST_CASE("command: serializes an array of bulk strings", "[unit][command]") {
    CHECK(command{"PING"}.payload() == "*1\r\n$4\r\nPING\r\n");
    CHECK(command{"SET", "key", "value"}.payload() ==
          "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
    command c{"PEXPIRE", "k"};
    c.arg(std::int64_t{-1500});
    CHECK(c.payload() == "*3\r\n$7\r\nPEXPIRE\r\n$1\r\nk\r\n$5\r\n-1500\r\n");
    CHECK(c.size() == 3);
    CHECK(command{}.empty());
    CHECK(command{}.payload() == "*0\r\n");
}

TEST_CASE("command: arguments are binary-safe", "[unit][command]") {
    const std::string nul = "a\0b"s;
    command c{"SET", "", nul, "line\r\nbreak"};
    CHECK(c.payload() == "*4\r\n$3\r\nSET\r\n$0\r\n\r\n$3\r\na\0b\r\n$11\r\nline\r\nbreak\r\n"s);
    std::string appended = "prefix";
    c.append_to(appended);
    CHECK(appended == "prefix" + c.payload());
}

TEST_CASE("command: name is the upper-cased first argument", "[unit][command]") {
    CHECK(command{"subscribe", "ch"}.name() == "SUBSCRIBE");
    CHECK(command{"EvalSha", "x"}.name() == "EVALSHA");
    CHECK(command{}.name().empty());
    CHECK_FALSE(command{"GET", "k"}.is_idempotent());
    CHECK(command{"GET", "k"}.idempotent().is_idempotent());
}

TEST_CASE("command: parsing the serialized bytes gives the arguments back", "[unit][command]") {
    const std::vector<std::string> args{"EVAL", "return 1", "0", "", "\r\n", "\0\0"s,
                                        std::string(300, 'x')};
    command c;
    for (const auto& a : args) c.arg(a);
    corolock::detail::resp3_parser p;
    corolock::error_code ec;
    p.consume(c.payload(), ec);
    REQUIRE_FALSE(ec);
    REQUIRE(p.has_reply());
    const auto r = p.pop();
    REQUIRE(r.type == corolock::resp3_type::array);
    REQUIRE(r.elements.size() == args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
        CHECK(r.elements[i].type == corolock::resp3_type::bulk_string);
        CHECK(r.elements[i].str == args[i]);
    }
}
