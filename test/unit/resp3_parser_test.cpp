// The RESP3 parser, fed every frame at every split point.
#include <corolock/detail/resp3_parser.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

using corolock::error;
using corolock::error_code;
using corolock::reply;
using corolock::resp3_type;
using corolock::detail::parser_limits;
using corolock::detail::resp3_parser;

namespace {

// Builders for expected values.
reply node(resp3_type t, std::string s = {}, std::vector<reply> el = {}) {
    reply r;
    r.type = t;
    r.str = std::move(s);
    r.elements = std::move(el);
    return r;
}
reply str(std::string s) { return node(resp3_type::bulk_string, std::move(s)); }
reply simple(std::string s) { return node(resp3_type::simple_string, std::move(s)); }
reply integer(std::int64_t v) {
    reply r = node(resp3_type::integer);
    r.integer = v;
    return r;
}
reply boolean(bool b) {
    reply r = node(resp3_type::boolean);
    r.integer = b ? 1 : 0;
    return r;
}
reply dbl(std::string text, double v) {
    reply r = node(resp3_type::double_type, std::move(text));
    r.number = v;
    return r;
}
reply nil() { return node(resp3_type::null); }
reply arr(std::vector<reply> el) { return node(resp3_type::array, {}, std::move(el)); }
reply with_attrs(reply r, std::vector<reply> attrs) {
    r.attributes = std::move(attrs);
    return r;
}

bool same(const reply& a, const reply& b) {
    if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.format != b.format)
        return false;
    if (a.type == resp3_type::double_type) {
        if (std::isnan(a.number) != std::isnan(b.number)) return false;
        if (!std::isnan(a.number) && a.number != b.number) return false;
    }
    if (a.elements.size() != b.elements.size() || a.attributes.size() != b.attributes.size())
        return false;
    for (std::size_t i = 0; i < a.elements.size(); ++i)
        if (!same(a.elements[i], b.elements[i])) return false;
    for (std::size_t i = 0; i < a.attributes.size(); ++i)
        if (!same(a.attributes[i], b.attributes[i])) return false;
    return true;
}

struct frame {
    const char* name;
    std::string bytes;
    reply expected;
};

std::vector<frame> frames() {
    using namespace std::string_literals;
    reply verbatim = node(resp3_type::verbatim_string, "Some string");
    verbatim.format = "txt";
    reply map = node(resp3_type::map, {}, {simple("first"), integer(1), simple("second"), integer(2)});
    reply set = node(resp3_type::set, {}, {simple("a"), integer(7)});
    reply push = node(resp3_type::push, {}, {str("message"), str("ch"), str("payload")});
    return {
        {"simple string", "+OK\r\n", simple("OK")},
        {"empty simple string", "+\r\n", simple("")},
        {"simple error", "-ERR unknown command\r\n", node(resp3_type::simple_error, "ERR unknown command")},
        {"blob error", "!21\r\nSYNTAX invalid syntax\r\n", node(resp3_type::blob_error, "SYNTAX invalid syntax")},
        {"integer", ":1000\r\n", integer(1000)},
        {"negative integer", ":-42\r\n", integer(-42)},
        {"int64 max", ":9223372036854775807\r\n", integer(INT64_MAX)},
        {"bulk string", "$5\r\nhello\r\n", str("hello")},
        {"empty bulk string", "$0\r\n\r\n", str("")},
        {"binary bulk string", "$6\r\na\r\n\0b\n\r\n"s, str("a\r\n\0b\n"s)},
        {"null bulk string", "$-1\r\n", nil()},
        {"null array", "*-1\r\n", nil()},
        {"null", "_\r\n", nil()},
        {"true", "#t\r\n", boolean(true)},
        {"false", "#f\r\n", boolean(false)},
        {"double", ",1.23\r\n", dbl("1.23", 1.23)},
        {"double exponent", ",-1.5e-3\r\n", dbl("-1.5e-3", -1.5e-3)},
        {"double inf", ",inf\r\n", dbl("inf", HUGE_VAL)},
        {"double -inf", ",-inf\r\n", dbl("-inf", -HUGE_VAL)},
        {"double nan", ",nan\r\n", dbl("nan", std::nan(""))},
        {"big number", "(3492890328409238509324850943850943825024385\r\n",
         node(resp3_type::big_number, "3492890328409238509324850943850943825024385")},
        {"negative big number", "(-12345678901234567890\r\n",
         node(resp3_type::big_number, "-12345678901234567890")},
        {"verbatim string", "=15\r\ntxt:Some string\r\n", verbatim},
        {"empty array", "*0\r\n", arr({})},
        {"array", "*3\r\n:1\r\n$3\r\nfoo\r\n_\r\n", arr({integer(1), str("foo"), nil()})},
        {"nested array", "*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n+x\r\n",
         arr({arr({integer(1), integer(2)}), arr({simple("x")})})},
        {"map", "%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n", map},
        {"empty map", "%0\r\n", node(resp3_type::map)},
        {"set", "~2\r\n+a\r\n:7\r\n", set},
        {"push", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$7\r\npayload\r\n", push},
        {"attribute before a value",
         "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2039123\r\n:9543892\r\n",
         with_attrs(arr({integer(2039123), integer(9543892)}),
                    {simple("key-popularity"),
                     node(resp3_type::map, {}, {str("a"), dbl("0.19", 0.19)})})},
        {"attribute inside an aggregate", "*2\r\n|1\r\n+ttl\r\n:3\r\n:10\r\n:20\r\n",
         arr({with_attrs(integer(10), {simple("ttl"), integer(3)}), integer(20)})},
        {"deep mix", "*3\r\n%1\r\n+k\r\n~1\r\n#t\r\n>1\r\n=7\r\nmkd:abc\r\n$-1\r\n",
         arr({node(resp3_type::map, {}, {simple("k"), node(resp3_type::set, {}, {boolean(true)})}),
              node(resp3_type::push, {}, {[] {
                       reply v = node(resp3_type::verbatim_string, "abc");
                       v.format = "mkd";
                       return v;
                   }()}),
              nil()})},
    };
}

// Feeds `bytes` in the chunks `split` chooses, collecting every reply.
std::vector<reply> feed(resp3_parser& p, std::string_view bytes,
                        const std::function<std::size_t(std::size_t)>& next_chunk) {
    std::vector<reply> out;
    std::size_t at = 0;
    while (at < bytes.size()) {
        const std::size_t n = std::min(next_chunk(at), bytes.size() - at);
        error_code ec;
        p.consume(bytes.substr(at, n), ec);
        REQUIRE_FALSE(ec);
        while (p.has_reply()) out.push_back(p.pop());
        at += n;
    }
    return out;
}

}  // namespace

TEST_CASE("resp3: every type parses whole, at every split point and byte by byte",
          "[unit][resp3]") {
    for (const auto& f : frames()) {
        INFO(f.name);
        for (std::size_t split = 0; split <= f.bytes.size(); ++split) {
            INFO("split at " << split);
            resp3_parser p;
            bool first = true;
            auto got = feed(p, f.bytes, [&](std::size_t) {
                if (!first) return f.bytes.size();
                first = false;
                return split == 0 ? f.bytes.size() : split;
            });
            REQUIRE(got.size() == 1);
            CHECK(same(got[0], f.expected));
            CHECK(p.buffered() == 0);
        }
        resp3_parser p;
        auto got = feed(p, f.bytes, [](std::size_t) { return std::size_t(1); });
        REQUIRE(got.size() == 1);
        CHECK(same(got[0], f.expected));
    }
}

TEST_CASE("resp3: a stream of all frames, split everywhere, yields them in order",
          "[unit][resp3]") {
    const auto all = frames();
    std::string stream;
    for (const auto& f : all) stream += f.bytes;
    for (std::size_t split = 1; split < stream.size(); split += 7) {
        INFO("split at " << split);
        resp3_parser p;
        bool first = true;
        auto got = feed(p, stream, [&](std::size_t) {
            const std::size_t n = first ? split : stream.size();
            first = false;
            return n;
        });
        REQUIRE(got.size() == all.size());
        for (std::size_t i = 0; i < all.size(); ++i) {
            INFO(all[i].name);
            CHECK(same(got[i], all[i].expected));
        }
    }
    resp3_parser p;
    auto got = feed(p, stream, [](std::size_t) { return std::size_t(1); });
    REQUIRE(got.size() == all.size());
    for (std::size_t i = 0; i < all.size(); ++i) CHECK(same(got[i], all[i].expected));
}

TEST_CASE("resp3: malformed input is rejected with a diagnostic", "[unit][resp3]") {
    using namespace std::string_literals;
    struct bad {
        std::string bytes;
        const char* mentions;
    };
    const bad rows[] = {
        {"?what\r\n", "unknown RESP3 type byte '?'"},
        {"\x01\r\n"s, "unknown RESP3 type byte 0x01"},
        {"+OK\n", "CRLF"},
        {":12\n", "CRLF"},
        {":\r\n", "invalid integer"},
        {":12a\r\n", "invalid integer"},
        {":+5\r\n", "invalid integer"},
        {":99999999999999999999\r\n", "invalid integer"},
        {"$abc\r\n", "invalid length"},
        {"$-2\r\n", "negative length"},
        {"$3\r\nabcd\r\n", "not followed by CRLF"},
        {"!-1\r\n", "negative length"},
        {"*-2\r\n", "negative element count"},
        {"%-1\r\n", "negative element count"},
        {"*x\r\n", "invalid element count"},
        {"#x\r\n", "invalid boolean"},
        {"_x\r\n", "null with a payload"},
        {",abc\r\n", "invalid double"},
        {",0x1p3\r\n", "invalid double"},
        {"(12a\r\n", "invalid big number"},
        {"(\r\n", "invalid big number"},
        {"=3\r\ntxt\r\n", "verbatim"},
        {"=5\r\ntxt_a\r\n", "verbatim"},
        {"$?\r\n", "streamed"},
        {"*?\r\n", "streamed"},
        {"+a\rb\r\n", "stray CR"},
        {":" + std::string(200, '1'), "longer than"},
    };
    for (const auto& b : rows) {
        INFO(b.bytes);
        resp3_parser p;
        error_code ec;
        p.consume(b.bytes, ec);
        CHECK(ec == error::protocol_error);
        CHECK_THAT(p.diagnostic(), Catch::Contains(b.mentions) && Catch::Contains("at byte"));
        CHECK_FALSE(p.has_reply());
        // Failed stays failed until reset.
        error_code again;
        p.consume("+OK\r\n", again);
        CHECK(again == ec);
        p.reset();
        p.consume("+OK\r\n", again);
        CHECK_FALSE(again);
        REQUIRE(p.has_reply());
        CHECK(p.pop().str == "OK");
    }
}

TEST_CASE("resp3: replies completed before an error stay poppable", "[unit][resp3]") {
    resp3_parser p;
    error_code ec;
    p.consume("+one\r\n:2\r\n?bad\r\n", ec);
    CHECK(ec == error::protocol_error);
    CHECK_THAT(p.diagnostic(), Catch::Contains("at byte 10"));
    REQUIRE(p.has_reply());
    CHECK(p.pop().str == "one");
    REQUIRE(p.has_reply());
    CHECK(p.pop().integer == 2);
    CHECK_FALSE(p.has_reply());
}

TEST_CASE("resp3: limits on bulk length, aggregate size and depth", "[unit][resp3]") {
    parser_limits limits;
    limits.max_bulk_length = 16;
    limits.max_aggregate_size = 4;
    limits.max_nesting_depth = 3;

    auto result = [&](std::string bytes) {
        resp3_parser p(limits);
        error_code ec;
        p.consume(bytes, ec);
        return ec;
    };
    CHECK_FALSE(result("$16\r\n0123456789abcdef\r\n"));
    CHECK(result("$17\r\n") == error::reply_too_large);          // refused before the payload
    CHECK(result("!17\r\n") == error::reply_too_large);
    CHECK(result("+" + std::string(40, 'x')) == error::reply_too_large);  // an unending line
    CHECK_FALSE(result("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n"));
    CHECK(result("*5\r\n") == error::reply_too_large);
    CHECK(result("%3\r\n") == error::reply_too_large);             // 3 pairs = 6 elements
    CHECK(result("*1000000000000\r\n") == error::reply_too_large); // never reserved
    CHECK_FALSE(result("*1\r\n*1\r\n*1\r\n:1\r\n"));
    CHECK(result("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n") == error::nesting_too_deep);

    resp3_parser deep(limits);
    error_code ec;
    deep.consume("*1\r\n*1\r\n*1\r\n*1\r\n", ec);
    CHECK(ec == error::nesting_too_deep);
    CHECK_THAT(deep.diagnostic(), Catch::Contains("deeper than 3"));
}

TEST_CASE("resp3: a large bulk string split in small chunks", "[unit][resp3]") {
    std::string payload(1 << 20, '\0');
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31 + 7);
    const std::string bytes = "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";

    resp3_parser p;
    auto got = feed(p, bytes, [](std::size_t) { return std::size_t(1024); });
    REQUIRE(got.size() == 1);
    CHECK(got[0].str == payload);

    const std::string small_payload = payload.substr(0, 64 * 1024);
    const std::string small = "$" + std::to_string(small_payload.size()) + "\r\n" + small_payload + "\r\n";
    resp3_parser q;
    auto one = feed(q, small, [](std::size_t) { return std::size_t(1); });
    REQUIRE(one.size() == 1);
    CHECK(one[0].str == small_payload);
    CHECK(q.buffered() == 0);
}

TEST_CASE("resp3: diagnostics count bytes across chunks", "[unit][resp3]") {
    resp3_parser p;
    error_code ec;
    p.consume("+first\r\n", ec);
    REQUIRE_FALSE(ec);
    p.pop();
    p.consume(":1\r\n:x\r\n", ec);
    CHECK(ec == error::protocol_error);
    CHECK_THAT(p.diagnostic(), Catch::Contains("at byte 12"));
}
