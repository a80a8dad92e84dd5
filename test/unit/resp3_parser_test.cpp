// The RESP3 parser: every type fed at every split point and byte by byte,
// malformed input, limits, recovery, and the rendering of replies for logs.
#include "redis/resp/resp3_parser.hpp"

#include "support/reply_build.hpp"
#include "support/reply_equal.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>

using corolock::error;
using corolock::error_code;
using corolock::reply;
using corolock::resp3_type;
using corolock::detail::parser_limits;
using corolock::detail::resp3_parser;
using namespace corolock::test::replies;
using namespace std::string_literals;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

bool same(const reply& a, const reply& b) { return corolock::test::same_reply(a, b); }

// The error of `bytes` parsed whole, after checking that fed byte by byte
// they give the same error and diagnostic: a limit is enforced on what
// has arrived, not on how it was split.
error_code whole_and_bytewise(const parser_limits& limits, const std::string& bytes) {
    resp3_parser whole(limits);
    error_code ec;
    whole.consume(bytes, ec);
    resp3_parser bytewise(limits);
    error_code bec;
    for (std::size_t i = 0; i < bytes.size() && !bec; ++i)
        bytewise.consume(std::string_view(bytes).substr(i, 1), bec);
    CHECK(bec == ec);
    CHECK(bytewise.diagnostic() == whole.diagnostic());
    return ec;
}

struct frame {
    const char* name;
    std::string bytes;
    reply expected;
};

std::vector<frame> frames() {
    return {
        {"simple string", "+OK\r\n", simple("OK")},
        {"empty simple string", "+\r\n", simple("")},
        {"simple error", "-ERR unknown command\r\n", node(resp3_type::simple_error, "ERR unknown command")},
        {"blob error", "!21\r\nSYNTAX invalid syntax\r\n", node(resp3_type::blob_error, "SYNTAX invalid syntax")},
        {"empty blob error", "!0\r\n\r\n", node(resp3_type::blob_error, "")},
        {"integer", ":1000\r\n", integer(1000)},
        {"negative integer", ":-42\r\n", integer(-42)},
        {"integer with a plus sign", ":+7\r\n", integer(7)},
        {"int64 max", ":9223372036854775807\r\n", integer(INT64_MAX)},
        {"int64 min", ":-9223372036854775808\r\n", integer(INT64_MIN)},
        {"bulk string", "$5\r\nhello\r\n", bulk("hello")},
        {"empty bulk string", "$0\r\n\r\n", bulk("")},
        {"bulk string with CRLF and NUL", "$6\r\na\r\n\0b\n\r\n"s, bulk("a\r\n\0b\n"s)},
        {"bulk string that looks like frames", "$7\r\n+OK\r\n:1\r\n", bulk("+OK\r\n:1")},
        {"null bulk string", "$-1\r\n", nil()},
        {"null array", "*-1\r\n", nil()},
        {"null", "_\r\n", nil()},
        {"true", "#t\r\n", boolean(true)},
        {"false", "#f\r\n", boolean(false)},
        {"double", ",1.23\r\n", dbl("1.23", 1.23)},
        {"integral double", ",10\r\n", dbl("10", 10.0)},
        {"double exponent", ",-1.5e-3\r\n", dbl("-1.5e-3", -1.5e-3)},
        {"double upper-case exponent", ",2E+10\r\n", dbl("2E+10", 2e10)},
        {"double with a plus sign", ",+0.5\r\n", dbl("+0.5", 0.5)},
        {"double negative zero", ",-0.0\r\n", dbl("-0.0", -0.0)},
        {"double inf", ",inf\r\n", dbl("inf", inf)},
        {"double -inf", ",-inf\r\n", dbl("-inf", -inf)},
        {"double nan", ",nan\r\n", dbl("nan", std::nan(""))},
        {"double beyond range", ",1e999\r\n", dbl("1e999", inf)},
        {"double negative beyond range", ",-12.5e400\r\n", dbl("-12.5e400", -inf)},
        {"double below range", ",1e-400\r\n", dbl("1e-400", 0.0)},
        {"double below range with a fraction", ",0.00123e-400\r\n", dbl("0.00123e-400", 0.0)},
        {"double beyond range with a fraction", ",999.9e306\r\n", dbl("999.9e306", inf)},
        {"double beyond range from a small mantissa", ",0.001e330\r\n", dbl("0.001e330", inf)},
        {"big number", "(3492890328409238509324850943850943825024385\r\n",
         node(resp3_type::big_number, "3492890328409238509324850943850943825024385")},
        {"negative big number", "(-12345678901234567890\r\n",
         node(resp3_type::big_number, "-12345678901234567890")},
        {"verbatim string", "=15\r\ntxt:Some string\r\n", verbatim("txt", "Some string")},
        {"empty verbatim string", "=4\r\nmkd:\r\n", verbatim("mkd", "")},
        {"verbatim string with CRLF", "=10\r\ntxt:a\r\nb\r\n\r\n", verbatim("txt", "a\r\nb\r\n")},
        {"empty array", "*0\r\n", arr({})},
        {"array", "*3\r\n:1\r\n$3\r\nfoo\r\n_\r\n", arr({integer(1), bulk("foo"), nil()})},
        {"nested array", "*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n+x\r\n",
         arr({arr({integer(1), integer(2)}), arr({simple("x")})})},
        {"array of empty aggregates", "*4\r\n*0\r\n%0\r\n~0\r\n>0\r\n",
         arr({arr({}), map({}), set({}), push({})})},
        {"array ending in nested closers", "*2\r\n:0\r\n*1\r\n*1\r\n*1\r\n$0\r\n\r\n",
         arr({integer(0), arr({arr({arr({bulk("")})})})})},
        {"map", "%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n",
         map({simple("first"), integer(1), simple("second"), integer(2)})},
        {"map with aggregate keys and values", "%1\r\n*1\r\n:1\r\n%1\r\n+a\r\n_\r\n",
         map({arr({integer(1)}), map({simple("a"), nil()})})},
        {"empty map", "%0\r\n", map({})},
        {"set", "~2\r\n+a\r\n:7\r\n", set({simple("a"), integer(7)})},
        {"empty set", "~0\r\n", set({})},
        {"push", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$7\r\npayload\r\n",
         push({bulk("message"), bulk("ch"), bulk("payload")})},
        {"attribute before a value",
         "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2039123\r\n:9543892\r\n",
         with_attrs(arr({integer(2039123), integer(9543892)}),
                    {simple("key-popularity"), map({bulk("a"), dbl("0.19", 0.19)})})},
        {"attribute before a simple value", "|1\r\n+ttl\r\n:3\r\n+OK\r\n",
         with_attrs(simple("OK"), {simple("ttl"), integer(3)})},
        {"attribute before a null", "|1\r\n+a\r\n+b\r\n$-1\r\n", with_attrs(nil(), {simple("a"), simple("b")})},
        {"attribute inside an array", "*2\r\n|1\r\n+ttl\r\n:3\r\n:10\r\n:20\r\n",
         arr({with_attrs(integer(10), {simple("ttl"), integer(3)}), integer(20)})},
        {"attribute before the last element", "*2\r\n:10\r\n|1\r\n+a\r\n+b\r\n*0\r\n",
         arr({integer(10), with_attrs(arr({}), {simple("a"), simple("b")})})},
        {"attribute before a map value", "%1\r\n+k\r\n|1\r\n+a\r\n+b\r\n+v\r\n",
         map({simple("k"), with_attrs(simple("v"), {simple("a"), simple("b")})})},
        {"two attributes in a row annotate the same value",
         "|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n+OK\r\n",
         with_attrs(simple("OK"), {simple("a"), simple("b"), simple("c"), simple("d")})},
        {"attribute inside an attribute", "|1\r\n+k\r\n|1\r\n+x\r\n+y\r\n+v\r\n:1\r\n",
         with_attrs(integer(1), {simple("k"), with_attrs(simple("v"), {simple("x"), simple("y")})})},
        {"empty attribute", "|0\r\n:5\r\n", integer(5)},
        {"deep mix", "*3\r\n%1\r\n+k\r\n~1\r\n#t\r\n>1\r\n=7\r\nmkd:abc\r\n$-1\r\n",
         arr({map({simple("k"), set({boolean(true)})}), push({verbatim("mkd", "abc")}), nil()})},
    };
}

// Feeds bytes in the chunk sizes next_chunk chooses, collecting every reply.
std::vector<reply> feed(resp3_parser& p, std::string_view bytes,
                        const std::function<std::size_t()>& next_chunk) {
    std::vector<reply> out;
    std::size_t at = 0;
    while (at < bytes.size()) {
        const std::size_t n = std::min(next_chunk(), bytes.size() - at);
        error_code ec;
        p.consume(bytes.substr(at, n), ec);
        INFO(p.diagnostic());
        REQUIRE_FALSE(ec);
        while (p.has_reply()) out.push_back(p.pop());
        at += n;
    }
    return out;
}

// Two chunks: [0, split) and the rest.
std::vector<reply> feed_split(resp3_parser& p, std::string_view bytes, std::size_t split) {
    bool first = true;
    return feed(p, bytes, [&] {
        const std::size_t n = first ? split : bytes.size();
        first = false;
        return n;
    });
}

std::vector<reply> feed_bytewise(resp3_parser& p, std::string_view bytes) {
    return feed(p, bytes, [] { return std::size_t(1); });
}

void check_all(const std::vector<reply>& got, const std::vector<frame>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO(want[i].name << ": got " << to_string(got[i]) << ", want "
                          << to_string(want[i].expected));
        CHECK(same(got[i], want[i].expected));
    }
}

}  // namespace

TEST_CASE("resp3: the equality helper sees every field", "[unit][resp3]") {
    // Otherwise the table below could pass with a broken parser.
    const reply base = with_attrs(arr({dbl("1", 1.0)}), {simple("a"), simple("b")});
    CHECK(same(base, base));
    auto changed = [&](auto edit) {
        reply r = base;
        edit(r);
        return !same(r, base) && !same(base, r);
    };
    CHECK(changed([](reply& r) { r.type = resp3_type::set; }));
    CHECK(changed([](reply& r) { r.str = "x"; }));
    CHECK(changed([](reply& r) { r.integer = 1; }));
    CHECK(changed([](reply& r) { r.number = -0.0; }));
    CHECK(changed([](reply& r) { r.format = "txt"; }));
    CHECK(changed([](reply& r) { r.elements[0].number = 2.0; }));
    CHECK(changed([](reply& r) { r.elements[0].number = std::nan(""); }));
    CHECK(changed([](reply& r) { r.elements.pop_back(); }));
    CHECK(changed([](reply& r) { r.attributes[1].str = "c"; }));
    CHECK(changed([](reply& r) { r.attributes.clear(); }));
}

TEST_CASE("resp3: every frame parses whole, at every split point and byte by byte",
          "[unit][resp3]") {
    for (const auto& f : frames()) {
        INFO(f.name);
        for (std::size_t split = 1; split <= f.bytes.size(); ++split) {
            INFO("split at " << split);
            resp3_parser p;
            check_all(feed_split(p, f.bytes, split), {f});
            CHECK(p.buffered() == 0);
        }
        resp3_parser p;
        check_all(feed_bytewise(p, f.bytes), {f});
        CHECK(p.buffered() == 0);
    }
}

TEST_CASE("resp3: a stream of every frame, split at every point, yields them in order",
          "[unit][resp3]") {
    const auto all = frames();
    std::string stream;
    for (const auto& f : all) stream += f.bytes;
    for (std::size_t split = 1; split <= stream.size(); ++split) {
        INFO("split at " << split);
        resp3_parser p;
        check_all(feed_split(p, stream, split), all);
        CHECK(p.buffered() == 0);
    }
    resp3_parser p;
    check_all(feed_bytewise(p, stream), all);

    // Uneven chunk sizes that drift across every frame boundary.
    std::size_t n = 0;
    resp3_parser q;
    check_all(feed(q, stream, [&] { return ++n % 13 + 1; }), all);
}

TEST_CASE("resp3: corrupted streams give the same result however they are split",
          "[unit][resp3]") {
    // Valid frames with random edits, parsed whole and in random chunks: the
    // replies, the error and its diagnostic must not depend on the split.
    // Small limits in half the runs so the limit checks are reached too.
    const auto all = frames();
    const std::string alphabet = "+-:$*_,#(!=%~>|?\r\n\r\n0123456789tfe.";
    std::mt19937 rng(20240601);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    for (int run = 0; run < 4000; ++run) {
        std::string bytes;
        for (std::size_t n = 1 + pick(4); n > 0; --n) bytes += all[pick(all.size())].bytes;
        for (std::size_t edits = pick(4); edits > 0; --edits) {
            const std::size_t at = pick(bytes.size() + 1);
            const char c = alphabet[pick(alphabet.size())];
            switch (pick(3)) {
            case 0: if (at < bytes.size()) bytes[at] = c; break;
            case 1: bytes.insert(at, 1, c); break;
            default: if (at < bytes.size()) bytes.erase(at, 1); break;
            }
        }
        const parser_limits limits = run % 2 ? parser_limits{} : parser_limits{24, 3, 5};
        INFO("run " << run << ": " << bytes.size() << " bytes");

        resp3_parser whole(limits);
        error_code whole_ec;
        whole.consume(bytes, whole_ec);
        std::vector<reply> expected;
        while (whole.has_reply()) expected.push_back(whole.pop());

        resp3_parser split(limits);
        error_code split_ec;
        std::vector<reply> got;
        for (std::size_t at = 0; at < bytes.size() && !split_ec;) {
            const std::size_t n = std::min(1 + pick(9), bytes.size() - at);
            split.consume(std::string_view(bytes).substr(at, n), split_ec);
            while (split.has_reply()) got.push_back(split.pop());
            at += n;
        }
        REQUIRE(split_ec == whole_ec);
        REQUIRE(split.diagnostic() == whole.diagnostic());
        CHECK(whole_ec.failed() != whole.diagnostic().empty());
        REQUIRE(got.size() == expected.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(same(got[i], expected[i]));
        if (!whole_ec) CHECK(split.buffered() == whole.buffered());
    }
}

TEST_CASE("resp3: buffered() counts the bytes of the partial frame", "[unit][resp3]") {
    resp3_parser p;
    error_code ec;
    p.consume("+OK\r\n$10\r\n0123", ec);
    REQUIRE_FALSE(ec);
    CHECK(p.buffered() == 9);
    REQUIRE(p.has_reply());
    CHECK(p.pop().str == "OK");
    CHECK_FALSE(p.has_reply());
    p.consume("456789\r", ec);
    CHECK(p.buffered() == 16);
    CHECK_FALSE(p.has_reply());
    p.consume("\n:", ec);
    CHECK(p.buffered() == 1);
    REQUIRE(p.has_reply());
    CHECK(p.pop().str == "0123456789");
}

TEST_CASE("resp3: malformed input is rejected with a diagnostic", "[unit][resp3]") {
    struct bad {
        std::string bytes;
        const char* mentions;
    };
    const bad rows[] = {
        {"?what\r\n", "unknown RESP3 type byte '?'"},
        {"\x01\r\n"s, "unknown RESP3 type byte 0x01"},
        {" +OK\r\n", "unknown RESP3 type byte 0x20"},
        {"\r\n", "unknown RESP3 type byte 0x0d"},
        {";3\r\nabc\r\n", "unknown RESP3 type byte ';'"},  // a streamed-string chunk
        {"+OK\n", "LF without CR"},
        {":12\n", "LF without CR"},
        {"*1\r\n:1\n", "LF without CR"},
        {"+a\rb\r\n", "CR not followed by LF"},
        {":1\r\r\n", "CR not followed by LF"},
        {":\r\n", "invalid integer \"\""},
        {":12a\r\n", "invalid integer \"12a\" in ':' header"},
        {": 1\r\n", "invalid integer"},
        {":-\r\n", "invalid integer"},
        {":+\r\n", "invalid integer"},
        {":+-5\r\n", "invalid integer"},
        {":--5\r\n", "invalid integer"},
        {":1.5\r\n", "invalid integer"},
        {":9223372036854775808\r\n", "invalid integer"},
        {":99999999999999999999\r\n", "invalid integer"},
        {"$\r\n", "invalid length \"\""},
        {"$abc\r\n", "invalid length \"abc\" in '$' header"},
        {"$+5\r\nhello\r\n", "invalid length"},
        {"$ 5\r\nhello\r\n", "invalid length"},
        {"$99999999999999999999\r\n", "invalid length"},
        {"$-2\r\n", "negative length -2"},
        {"!-1\r\n", "negative length -1 in '!' header"},
        {"=-1\r\n", "negative length"},
        {"$3\r\nabcd\r\n", "not followed by CRLF"},
        {"$3\r\nabc\nX", "not followed by CRLF"},
        {"$3\r\nabc\r\r", "not followed by CRLF"},
        {"$0\r\nX\r\n", "not followed by CRLF"},
        {"*x\r\n", "invalid element count \"x\" in '*' header"},
        {"*\r\n", "invalid element count"},
        {"*-2\r\n", "negative element count"},
        {"%-1\r\n", "negative element count -1 in '%' header"},
        {"~-1\r\n", "negative element count"},
        {">-1\r\n", "negative element count"},
        {"|-1\r\n", "negative element count"},
        {"#\r\n", "invalid boolean"},
        {"#x\r\n", "invalid boolean \"x\""},
        {"#tt\r\n", "invalid boolean"},
        {"#T\r\n", "invalid boolean"},
        {"_x\r\n", "null with a payload"},
        {",\r\n", "invalid double"},
        {",abc\r\n", "invalid double \"abc\""},
        {",0x1p3\r\n", "invalid double"},
        {",infinity\r\n", "invalid double"},
        {",.5\r\n", "invalid double"},
        {",1.\r\n", "invalid double"},
        {",1e\r\n", "invalid double"},
        {",1e+\r\n", "invalid double"},
        {",1.5.2\r\n", "invalid double"},
        {",--1\r\n", "invalid double"},
        {",1 \r\n", "invalid double"},
        {"(12a\r\n", "invalid big number \"12a\""},
        {"(\r\n", "invalid big number"},
        {"(-\r\n", "invalid big number"},
        {"(1.5\r\n", "invalid big number"},
        {"=3\r\ntxt\r\n", "verbatim string without a \"fmt:\" prefix"},
        {"=5\r\ntxt_a\r\n", "verbatim"},
        {"=0\r\n\r\n", "verbatim"},
        {"$?\r\n", "streamed string"},
        {"!?\r\n", "streamed string"},
        {"*?\r\n", "streamed aggregate"},
        {"%?\r\n", "streamed aggregate"},
        {":" + std::string(200, '1'), "line longer than 128 bytes in ':' header"},
        {"$" + std::string(200, '9'), "line longer than"},
        {"*1\r\n*" + std::string(200, '0'), "line longer than"},
    };
    for (const auto& b : rows) {
        INFO(b.bytes);
        resp3_parser p;
        error_code ec;
        p.consume(b.bytes, ec);
        CHECK(ec == error::protocol_error);
        CHECK_THAT(p.diagnostic(), Catch::Contains(b.mentions) && Catch::Contains(" at byte "));
        CHECK_FALSE(p.has_reply());

        // Fed byte by byte, the same error is found at the same offset.
        resp3_parser q;
        error_code qec;
        for (std::size_t i = 0; i < b.bytes.size() && !qec; ++i)
            q.consume(std::string_view(b.bytes).substr(i, 1), qec);
        CHECK(qec == ec);
        CHECK(q.diagnostic() == p.diagnostic());

        // Failed stays failed until reset.
        error_code again;
        p.consume("+OK\r\n", again);
        CHECK(again == ec);
        CHECK_FALSE(p.has_reply());
        p.reset();
        CHECK(p.diagnostic().empty());
        CHECK(p.buffered() == 0);
        p.consume("+OK\r\n", again);
        CHECK_FALSE(again);
        REQUIRE(p.has_reply());
        CHECK(p.pop().str == "OK");
    }
}

TEST_CASE("resp3: diagnostics name the problem and the stream offset", "[unit][resp3]") {
    resp3_parser p;
    error_code ec;
    p.consume("+first\r\n", ec);
    REQUIRE_FALSE(ec);
    p.pop();
    // Offsets count from the start of the stream, across chunks.
    p.consume(":1\r\n:12a\r\n", ec);
    CHECK(ec == error::protocol_error);
    CHECK(p.diagnostic() == "invalid integer \"12a\" in ':' header at byte 12");

    // Raw server bytes never reach a log line.
    resp3_parser q;
    q.consume(":\x01\x7f\xff\"\r\n"s, ec);
    CHECK(q.diagnostic() == "invalid integer \"\\x01\\x7f\\xff\\x22\" in ':' header at byte 0");
    resp3_parser r;
    r.consume("#" + std::string(100, 'x') + "\r\n", ec);
    CHECK(r.diagnostic() == "invalid boolean \"" + std::string(32, 'x') + "\"... in '#' header at byte 0");
}

TEST_CASE("resp3: replies completed before an error stay poppable", "[unit][resp3]") {
    resp3_parser p;
    error_code ec;
    p.consume("+one\r\n*2\r\n:2\r\n:3\r\n?bad\r\n+never\r\n", ec);
    CHECK(ec == error::protocol_error);
    CHECK(p.diagnostic() == "unknown RESP3 type byte '?' at byte 18");
    REQUIRE(p.has_reply());
    CHECK(same(p.pop(), simple("one")));
    REQUIRE(p.has_reply());
    CHECK(same(p.pop(), arr({integer(2), integer(3)})));
    CHECK_FALSE(p.has_reply());

    // A partial aggregate at the moment of the error is dropped, not delivered.
    resp3_parser q;
    q.consume("*2\r\n:1\r\n#x\r\n", ec);
    CHECK(ec == error::protocol_error);
    CHECK_FALSE(q.has_reply());
}

TEST_CASE("resp3: reset() recovers from a failure mid-frame", "[unit][resp3]") {
    resp3_parser p;
    error_code ec;
    p.consume("*3\r\n$5\r\nab", ec);
    REQUIRE_FALSE(ec);
    p.consume("cdeXY", ec);
    REQUIRE(ec == error::protocol_error);
    p.reset();
    // Nothing of the old frame survives: no open aggregate, no offset.
    p.consume("|1\r\n+a\r\n+b\r\n", ec);
    p.reset();
    p.consume(":5\r\n:x\r\n", ec);
    CHECK(ec == error::protocol_error);
    CHECK(p.diagnostic() == "invalid integer \"x\" in ':' header at byte 4");
    REQUIRE(p.has_reply());
    CHECK(same(p.pop(), integer(5)));  // no attributes left over either

    // Unread replies are dropped by reset() too.
    p.reset();
    p.consume("+a\r\n+b\r\n", ec);
    p.reset();
    CHECK_FALSE(p.has_reply());
}

TEST_CASE("resp3: limits on bulk length, aggregate size and depth", "[unit][resp3]") {
    parser_limits limits;
    limits.max_bulk_length = 16;
    limits.max_aggregate_size = 4;
    limits.max_nesting_depth = 3;

    // Checked whole and byte by byte: limits are enforced on the header
    // alone, before any payload or element arrives.
    auto result = [&](const std::string& bytes) { return whole_and_bytewise(limits, bytes); };
    CHECK_FALSE(result("$16\r\n0123456789abcdef\r\n"));
    CHECK(result("$17\r\n") == error::reply_too_large);
    CHECK(result("!17\r\n") == error::reply_too_large);
    CHECK(result("=17\r\n") == error::reply_too_large);
    CHECK(result("$9223372036854775807\r\n") == error::reply_too_large);
    CHECK_FALSE(result("+" + std::string(16, 'x') + "\r\n"));
    CHECK(result("+" + std::string(17, 'x') + "\r\n") == error::reply_too_large);
    CHECK(result("-" + std::string(40, 'x')) == error::reply_too_large);  // an unending line
    CHECK(result("(" + std::string(40, '1')) == error::reply_too_large);
    CHECK_FALSE(result("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n"));
    CHECK(result("*5\r\n") == error::reply_too_large);
    CHECK(result("~5\r\n") == error::reply_too_large);
    CHECK(result(">5\r\n") == error::reply_too_large);
    CHECK_FALSE(result("%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n"));
    CHECK(result("%3\r\n") == error::reply_too_large);  // 3 pairs = 6 elements
    CHECK(result("|3\r\n") == error::reply_too_large);
    CHECK(result("*1000000000000\r\n") == error::reply_too_large);  // never reserved
    CHECK(result("%9223372036854775807\r\n") == error::reply_too_large);
    CHECK_FALSE(result("*1\r\n*1\r\n*1\r\n:1\r\n"));
    CHECK(result("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n") == error::nesting_too_deep);
    CHECK(result("*1\r\n%1\r\n~1\r\n*0\r\n") == error::nesting_too_deep);
    // An attribute map is a level of nesting too.
    CHECK(result("*1\r\n*1\r\n|1\r\n*0\r\n") == error::nesting_too_deep);

    resp3_parser deep(limits);
    error_code ec;
    deep.consume("*1\r\n*1\r\n*1\r\n*1\r\n", ec);
    CHECK(ec == error::nesting_too_deep);
    CHECK(deep.diagnostic() == "aggregates nested deeper than 3 at byte 12");

    resp3_parser big(limits);
    big.consume("*5\r\n", ec);
    CHECK(big.diagnostic() ==
          "aggregate of 5 elements in '*' header exceeds the limit of 4 elements at byte 0");
}

TEST_CASE("resp3: zero limits mean the documented defaults", "[unit][resp3]") {
    auto result = [](const std::string& bytes) {
        resp3_parser p;
        error_code ec;
        p.consume(bytes, ec);
        return ec;
    };
    // The bulk limit, with the reply limit out of the way.
    auto unbounded_reply = [](const std::string& bytes) {
        resp3_parser p(parser_limits{0, 0, 0, std::numeric_limits<std::size_t>::max()});
        error_code ec;
        p.consume(bytes, ec);
        return ec;
    };
    CHECK_FALSE(unbounded_reply("$536870912\r\n"));  // 512 MiB: waits for the payload
    CHECK(unbounded_reply("$536870913\r\n") == error::reply_too_large);
    // The reply limit, 64 MiB including the reply node.
    const std::size_t reply_cap = 64u * 1024 * 1024;
    CHECK_FALSE(result("$" + std::to_string(reply_cap - sizeof(reply)) + "\r\n"));
    CHECK(result("$" + std::to_string(reply_cap - sizeof(reply) + 1) + "\r\n") ==
          error::reply_too_large);
    CHECK_FALSE(result("*16777216\r\n"));
    CHECK(result("*16777217\r\n") == error::reply_too_large);
    CHECK_FALSE(result("%8388608\r\n"));
    CHECK(result("%8388609\r\n") == error::reply_too_large);
    std::string nested;
    for (int i = 0; i < 32; ++i) nested += "*1\r\n";
    CHECK_FALSE(result(nested));
    CHECK(result(nested + "*1\r\n") == error::nesting_too_deep);
}

TEST_CASE("resp3: a large bulk string split in small chunks", "[unit][resp3]") {
    std::string payload(1 << 20, '\0');
    for (std::size_t i = 0; i < payload.size(); ++i)
        payload[i] = static_cast<char>((i * 31 + 7) & 0xff);  // includes CR, LF and NUL
    auto framed = [](const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; };

    SECTION("1 MiB in 1 KiB chunks, inside an array") {
        const std::string bytes = "*2\r\n" + framed(payload) + ":1\r\n";
        resp3_parser p;
        const auto got = feed(p, bytes, [] { return std::size_t(1024); });
        REQUIRE(got.size() == 1);
        CHECK(same(got[0], arr({bulk(payload), integer(1)})));
        CHECK(p.buffered() == 0);
    }
    SECTION("64 KiB one byte at a time, the partial payload held as it grows") {
        const std::string small = payload.substr(0, 64 * 1024);
        const std::string bytes = framed(small);
        resp3_parser p;
        error_code ec;
        for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
            p.consume(std::string_view(bytes).substr(i, 1), ec);
            REQUIRE_FALSE(ec);
            REQUIRE(p.buffered() == i + 1);
        }
        REQUIRE_FALSE(p.has_reply());
        p.consume(std::string_view(bytes).substr(bytes.size() - 1), ec);
        REQUIRE_FALSE(ec);
        REQUIRE(p.has_reply());
        CHECK(p.pop().str == small);
        CHECK(p.buffered() == 0);
    }
}

TEST_CASE("resp3: a long pipelined stream keeps only the partial frame", "[unit][resp3]") {
    // Many replies split at awkward points: each chunk leaves a partial
    // frame behind, so the buffer must drop consumed bytes as it goes.
    std::string stream;
    for (int i = 0; i < 20000; ++i)
        stream += "*2\r\n$5\r\nvalue\r\n:" + std::to_string(i) + "\r\n";
    resp3_parser p;
    error_code ec;
    std::size_t max_buffered = 0;
    int next = 0;
    for (std::size_t at = 0; at < stream.size(); at += 7) {
        p.consume(std::string_view(stream).substr(at, 7), ec);
        REQUIRE_FALSE(ec);
        max_buffered = std::max(max_buffered, p.buffered());
        while (p.has_reply()) {
            const reply r = p.pop();
            REQUIRE(r.elements.size() == 2);
            REQUIRE(r.elements[1].integer == next++);
        }
    }
    CHECK(next == 20000);
    CHECK(max_buffered < 30);
}

TEST_CASE("resp3: to_string renders replies for logs", "[unit][resp3]") {
    CHECK(to_string(simple("OK")) == "\"OK\"");
    CHECK(to_string(bulk("a\"b\\c\r\n\t\0\x7f\xff"s)) == "\"a\\\"b\\\\c\\r\\n\\t\\x00\\x7f\\xff\"");
    CHECK(to_string(node(resp3_type::simple_error, "ERR x")) == "(error) ERR x");
    CHECK(to_string(node(resp3_type::blob_error, "E\x1b[2J"s)) == "(error) E\\x1b[2J");
    CHECK(to_string(integer(-5)) == "(integer) -5");
    CHECK(to_string(nil()) == "(nil)");
    CHECK(to_string(boolean(true)) == "(true)");
    CHECK(to_string(boolean(false)) == "(false)");
    CHECK(to_string(dbl("1.5e3", 1500)) == "(double) 1.5e3");
    CHECK(to_string(dbl("", 0.25)) == "(double) 0.25");
    CHECK(to_string(node(resp3_type::big_number, "-123")) == "(big number) -123");
    CHECK(to_string(verbatim("txt", "hi")) == "\"hi\"");
    CHECK(to_string(arr({})) == "[]");
    CHECK(to_string(arr({bulk("a"), bulk("b")})) == "[\"a\", \"b\"]");
    CHECK(to_string(map({simple("k"), integer(1), simple("j"), nil()})) ==
          "{\"k\": (integer) 1, \"j\": (nil)}");
    CHECK(to_string(set({integer(1)})) == "(set) [(integer) 1]");
    CHECK(to_string(push({bulk("message")})) == "(push) [\"message\"]");
    CHECK(to_string(with_attrs(integer(1), {simple("ttl"), integer(3)})) ==
          "(attributes {\"ttl\": (integer) 3}) (integer) 1");

    // Long output is cut, with a marker, however large the reply is.
    const std::string huge = to_string(bulk(std::string(1 << 20, 'x')));
    CHECK(huge.size() == 515);
    CHECK(huge.substr(0, 4) == "\"xxx");
    CHECK(huge.substr(512) == "...");
    std::vector<reply> many(100000, integer(7));
    const std::string wide = to_string(arr(std::move(many)));
    CHECK(wide.size() == 515);
    CHECK(wide.substr(0, 25) == "[(integer) 7, (integer) 7");
    CHECK(wide.substr(512) == "...");
}

TEST_CASE("resp3: one reply's memory is bounded, not only each string and aggregate",
          "[unit][resp3]") {
    // Many small elements: each costs a reply node in memory, far more than
    // its four bytes on the wire. Under the per-aggregate limit, over the
    // per-reply one.
    constexpr std::size_t cap = 64 * 1024;
    const std::size_t fits = cap / sizeof(reply) - 2;  // the array's own node and slack
    auto array_of_ones = [](std::size_t n) {
        std::string s = "*" + std::to_string(n) + "\r\n";
        for (std::size_t i = 0; i < n; ++i) s += ":1\r\n";
        return s;
    };
    {
        resp3_parser p(parser_limits{0, 0, 0, cap});
        error_code ec;
        p.consume(array_of_ones(fits), ec);
        CHECK(!ec);
        REQUIRE(p.has_reply());
        CHECK(p.pop().elements.size() == fits);
        // The next reply starts from zero again.
        p.consume(array_of_ones(fits), ec);
        CHECK(!ec);
        CHECK(p.has_reply());
    }
    {
        resp3_parser p(parser_limits{0, 0, 0, cap});
        error_code ec;
        p.consume(array_of_ones(2 * fits), ec);
        CHECK(ec == error::reply_too_large);
        CHECK_THAT(p.diagnostic(), Catch::Contains("reply would hold more than 65536 bytes"));
        CHECK(!p.has_reply());
    }
    {
        // A bulk string under the bulk limit but over the reply limit fails
        // at its header, before its payload is buffered.
        resp3_parser p(parser_limits{0, 0, 0, cap});
        error_code ec;
        p.consume("$100000\r\nabc", ec);
        CHECK(ec == error::reply_too_large);
        CHECK(p.buffered() < 100);
    }
    {
        // Nested: the inner aggregates' elements count towards the outer reply.
        resp3_parser p(parser_limits{0, 0, 0, cap});
        std::string s = "*4\r\n";
        for (int i = 0; i < 4; ++i) s += array_of_ones(fits / 3);
        error_code ec;
        p.consume(s, ec);
        CHECK(ec == error::reply_too_large);
    }
}

TEST_CASE("resp3: a simple string, error or big number is charged to the reply as it arrives",
          "[unit][resp3]") {
    // Such a line carries its value, so only the bulk limit (512 MiB by
    // default) capped it, and it was charged to the reply only once its CRLF
    // came: an unending line could make the client buffer 512 MiB under a
    // 64 KiB reply limit. Now it may be no longer than the reply has room.
    constexpr std::size_t cap = 64 * 1024;
    const parser_limits limits{0, 0, 0, cap};
    for (const char type : {'+', '-', '('}) {
        CAPTURE(type);
        resp3_parser p(limits);
        error_code ec;
        p.consume(std::string(1, type), ec);
        const std::string chunk(4096, type == '(' ? '1' : 'x');
        std::size_t sent = 1;
        while (!ec && sent < 16 * cap) {
            p.consume(chunk, ec);
            sent += chunk.size();
        }
        CHECK(ec == error::reply_too_large);
        CHECK(sent <= cap + chunk.size());
        CHECK_THAT(p.diagnostic(), Catch::Contains("the reply would hold more than 65536 bytes"));
    }
    // The room is what the reply has left: the value's own node, and what
    // the values before it in the same reply hold. Whole and byte by byte.
    auto result = [&](const std::string& bytes) { return whole_and_bytewise(limits, bytes); };
    const std::size_t alone = cap - sizeof(reply);
    CHECK_FALSE(result("+" + std::string(alone, 'x') + "\r\n"));
    CHECK(result("+" + std::string(alone + 1, 'x') + "\r\n") == error::reply_too_large);
    const std::size_t third = cap - 3 * sizeof(reply);  // after "*2" and ":1"
    CHECK_FALSE(result("*2\r\n:1\r\n-" + std::string(third, 'x') + "\r\n"));
    CHECK(result("*2\r\n:1\r\n-" + std::string(third + 1, 'x') + "\r\n") ==
          error::reply_too_large);
    // The next reply has the whole room again.
    CHECK_FALSE(result("+" + std::string(alone, 'x') + "\r\n+" + std::string(alone, 'x') + "\r\n"));
}

TEST_CASE("resp3: the default reply limit stops 12 MB of small elements early",
          "[unit][resp3]") {
    // The hostile-server case from issue 21: an array announcing 16 Mi
    // elements (the aggregate limit) and 12 MB of ":1" elements made the
    // client hold 566 MB. With the default 64 MiB reply limit the parser
    // fails after about 64 MiB / sizeof(reply) elements.
    resp3_parser p;
    error_code ec;
    p.consume("*16777216\r\n", ec);
    REQUIRE(!ec);
    std::string chunk;
    for (int i = 0; i < 16 * 1024; ++i) chunk += ":1\r\n";  // 64 KiB
    std::size_t sent = 0;
    while (!ec && sent < 12u * 1000 * 1000) {
        p.consume(chunk, ec);
        sent += chunk.size();
    }
    CHECK(ec == error::reply_too_large);
    CHECK(sent <= 4 * (64u * 1024 * 1024 / sizeof(reply)) + chunk.size());
}
