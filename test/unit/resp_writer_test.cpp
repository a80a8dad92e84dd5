// The one RESP request writer (src/redis/resp/resp_writer.hpp): exact bytes,
// its bounds, and the same framing from corolock::command and the script
// path for the same arguments.
#include "redis/lock/script_call.hpp"
#include "redis/resp/resp_writer.hpp"
#include "redis/lock/scripts.hpp"
#include <corolock/command.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace rw = corolock::detail::resp_writer;
using corolock::command;
using corolock::detail::script_args;
using namespace std::string_literals;

namespace {

std::string put_header(std::size_t count) {
    std::vector<char> buf(rw::array_header_bound);
    return std::string(buf.data(),
                       static_cast<std::size_t>(rw::put_array_header(buf.data(), count) - buf.data()));
}

std::string put_bulk(std::string_view a) {
    std::vector<char> buf(rw::bulk_bound(a.size()));
    return std::string(buf.data(), static_cast<std::size_t>(rw::put_bulk(buf.data(), a) - buf.data()));
}

std::string append_bulk(std::string_view a) {
    std::string out;
    rw::append_bulk(out, a);
    return out;
}

}  // namespace

TEST_CASE("resp writer: array headers and bulk strings, exact bytes", "[resp_writer]") {
    CHECK(put_header(0) == "*0\r\n");
    CHECK(put_header(3) == "*3\r\n");
    CHECK(put_bulk("") == "$0\r\n\r\n");
    CHECK(put_bulk("GET") == "$3\r\nGET\r\n");
    // Binary-safe: NUL, CR and LF are bytes like any other.
    const auto binary = "a\0\r\nb"s;
    CHECK(put_bulk(binary) == "$5\r\n" + binary + "\r\n");

    std::string out = "x";
    rw::append_array_header(out, 12);
    rw::append_bulk(out, binary);
    CHECK(out == "x*12\r\n$5\r\n" + binary + "\r\n");
}

TEST_CASE("resp writer: the buffer and the string writers agree, within the bounds",
          "[resp_writer]") {
    constexpr auto big = std::numeric_limits<std::size_t>::max();
    const auto header = put_header(big);
    CHECK(header == "*" + std::to_string(big) + "\r\n");
    CHECK(header.size() == rw::array_header_bound);
    std::string appended;
    rw::append_array_header(appended, big);
    CHECK(appended == header);

    for (const auto& a : {""s, "k"s, std::string(1000, 'v'), "a\0b"s}) {
        CHECK(put_bulk(a) == append_bulk(a));
        CHECK(put_bulk(a).size() <= rw::bulk_bound(a.size()));
    }
}

TEST_CASE("resp writer: a command and a script call frame the same arguments identically",
          "[resp_writer]") {
    const auto& s = corolock::detail::acquire_script();
    const std::string key = "corolock:{orders:42}";
    const std::string fence = "corolock:{orders:42}:fence";
    const auto binary = "own\0er\r\n"s;
    script_args a;
    a.key(key);
    a.key(fence);
    a.arg(std::string_view(binary));
    a.arg(std::int64_t{30000});
    a.arg(std::int64_t{-7});
    a.arg(std::string_view());

    std::string by_script;
    corolock::detail::append_script_command(by_script, s, true, a);
    const command cmd{"EVALSHA", s.sha1, 2, key, fence, binary, 30000, -7, ""};
    CHECK(by_script == cmd.payload());

    std::string eval;
    corolock::detail::append_script_command(eval, s, false, a);
    CHECK(eval == command{"EVAL", s.source, 2, key, fence, binary, 30000, -7, ""}.payload());
}
