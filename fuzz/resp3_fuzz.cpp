// libFuzzer target for the RESP3 parser (src/redis/resp/resp3_parser.hpp).
//
// Every input is parsed under three sets of limits (the defaults, small
// fixed ones, and tiny ones drawn from the input's hash), and under each set
// in four ways: whole, in two pieces split at a position derived from the
// input, in chunks of 1 to 16 bytes whose sizes are derived from the input,
// and byte by byte. The four must agree exactly: the same replies, field by
// field, the same error and diagnostic, and the same buffered() count. The
// replies must respect the limits (each string, each aggregate, the
// nesting, and the whole reply's memory: sizeof(reply) per value plus its
// text), an error must stick until reset(), and a reset parser must work
// again.
//
// A fourth set of limits comes from the input's first four bytes (the rest
// is the stream), and that run is also held against a parser without
// limits: it must give the same replies up to the first one over a limit,
// and then stop with a limit error (reply_too_large or nesting_too_deep),
// never with a reply over the limit nor with another error.
//
// Any disagreement aborts: libFuzzer saves the input as a crash. Run it
// through scripts/fuzz.sh; the seed corpus is fuzz/corpus/resp3/.
#include "targets.hpp"

#include "redis/resp/resp3_parser.hpp"

#include "support/reply_equal.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace {

using corolock::error_code;
using corolock::reply;
using corolock::resp3_type;
using corolock::detail::parser_limits;
using corolock::detail::resp3_parser;

[[noreturn]] void fail(const char* what, const char* mode) {
    std::fprintf(stderr, "resp3 fuzz: %s (%s)\n", what, mode);
    std::abort();
}
#define FUZZ_CHECK(cond, mode) \
    do {                       \
        if (!(cond)) fail(#cond, mode); \
    } while (0)

using corolock::test::same_reply;

// Levels of open aggregates the parser needed for r: an aggregate is one,
// and so is the attribute map its attributes came from.
std::size_t levels(const reply& r) {
    std::size_t deepest = 0;
    if (r.is_aggregate()) {
        std::size_t inner = 0;
        for (const auto& e : r.elements) inner = std::max(inner, levels(e));
        deepest = 1 + inner;
    }
    if (!r.attributes.empty()) {
        std::size_t inner = 0;
        for (const auto& a : r.attributes) inner = std::max(inner, levels(a));
        deepest = std::max(deepest, 1 + inner);
    }
    return deepest;
}

// What r holds in memory as the parser charges it: sizeof(reply) per value
// plus the text it keeps (a verbatim string's "fmt:" included). Attribute
// maps themselves are charged too, but are not in the reply.
std::size_t reply_cost(const reply& r) {
    std::size_t cost = sizeof(reply) + r.str.size();
    if (r.type == resp3_type::verbatim_string) cost += r.format.size() + 1;
    for (const auto& e : r.elements) cost += reply_cost(e);
    for (const auto& a : r.attributes) cost += reply_cost(a);
    return cost;
}

bool has_attributes(const reply& r) {
    if (!r.attributes.empty()) return true;
    for (const auto& e : r.elements)
        if (has_attributes(e)) return true;
    return false;
}

// The limits as the parser resolves them (zero: the default).
parser_limits resolved(parser_limits lim) {
    if (lim.max_bulk_length == 0) lim.max_bulk_length = 512u * 1024 * 1024;
    if (lim.max_nesting_depth == 0) lim.max_nesting_depth = 32;
    if (lim.max_aggregate_size == 0) lim.max_aggregate_size = 16u * 1024 * 1024;
    if (lim.max_reply_size == 0) lim.max_reply_size = 64u * 1024 * 1024;
    return lim;
}

// Whether one value of r (not counting the whole's memory) is over a limit.
bool value_over(const reply& r, const parser_limits& lim) {
    std::size_t payload = r.str.size();
    if (r.type == resp3_type::verbatim_string) payload += r.format.size() + 1;
    if (r.type != resp3_type::double_type && payload > lim.max_bulk_length) return true;
    if (r.elements.size() > lim.max_aggregate_size) return true;
    for (const auto& e : r.elements)
        if (value_over(e, lim)) return true;
    return false;
}

// Whether a parser with these limits must refuse r.
bool over_limits(const reply& r, const parser_limits& lim) {
    return value_over(r, lim) || levels(r) > lim.max_nesting_depth ||
           reply_cost(r) > lim.max_reply_size;
}

// Nothing a parser with these limits returns may exceed them.
void check_limits(const reply& r, const parser_limits& lim, const char* mode) {
    // A double's text is a header line (at most 128 bytes, whatever the
    // limits); every other string is bounded by the bulk limit.
    if (r.type != resp3_type::double_type) FUZZ_CHECK(r.str.size() <= lim.max_bulk_length, mode);
    FUZZ_CHECK(r.elements.size() <= lim.max_aggregate_size, mode);
    if (r.type == resp3_type::map) FUZZ_CHECK(r.elements.size() % 2 == 0, mode);
    if (r.type == resp3_type::verbatim_string) FUZZ_CHECK(r.format.size() == 3, mode);
    if (r.type == resp3_type::boolean) FUZZ_CHECK(r.integer == 0 || r.integer == 1, mode);
    if (!r.is_aggregate()) FUZZ_CHECK(r.elements.empty(), mode);
    for (const auto& e : r.elements) check_limits(e, lim, mode);
    for (const auto& a : r.attributes) check_limits(a, lim, mode);
}

struct outcome {
    std::vector<reply> replies;
    error_code ec;
    std::string diagnostic;
    std::size_t buffered = 0;
};

// Feeds bytes in the chunk sizes next() returns, popping replies as they
// come, and checks that an error sticks.
template <class Next>
outcome feed(const parser_limits& lim, std::string_view bytes, Next next, const char* mode) {
    resp3_parser p(lim);
    outcome out;
    std::size_t at = 0;
    do {
        const std::size_t n = std::min(next(), bytes.size() - at);
        p.consume(bytes.substr(at, n), out.ec);
        while (p.has_reply()) out.replies.push_back(p.pop());
        at += n;
    } while (at < bytes.size() && !out.ec);
    out.diagnostic = p.diagnostic();
    out.buffered = p.buffered();
    FUZZ_CHECK(out.ec.failed() != out.diagnostic.empty(), mode);
    if (out.ec) {
        // Sticky: more input changes nothing until reset().
        error_code again;
        p.consume(":1\r\n", again);
        FUZZ_CHECK(again == out.ec, mode);
        FUZZ_CHECK(!p.has_reply(), mode);
        FUZZ_CHECK(p.diagnostic() == out.diagnostic, mode);
    }
    // After reset() the parser is as new. (An integer: its line is not
    // bounded by the bulk limit, which may be 1 here; a reply limit below
    // one value's memory refuses even that.)
    p.reset();
    FUZZ_CHECK(p.buffered() == 0 && !p.has_reply() && p.diagnostic().empty(), mode);
    error_code fresh;
    p.consume(":42\r\n", fresh);
    if (resolved(lim).max_reply_size < sizeof(reply)) {
        FUZZ_CHECK(fresh == corolock::error::reply_too_large && !p.has_reply(), mode);
        return out;
    }
    FUZZ_CHECK(!fresh && p.has_reply(), mode);
    const reply ok = p.pop();
    FUZZ_CHECK(ok.type == resp3_type::integer && ok.integer == 42 && !p.has_reply(), mode);
    return out;
}

void agree(const outcome& want, const outcome& got, const char* mode) {
    FUZZ_CHECK(got.ec == want.ec, mode);
    FUZZ_CHECK(got.diagnostic == want.diagnostic, mode);
    FUZZ_CHECK(got.replies.size() == want.replies.size(), mode);
    for (std::size_t i = 0; i < want.replies.size(); ++i)
        FUZZ_CHECK(same_reply(got.replies[i], want.replies[i]), mode);
    if (!want.ec) FUZZ_CHECK(got.buffered == want.buffered, mode);
}

std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

outcome run(const parser_limits& lim, std::string_view bytes, std::uint64_t h) {
    const outcome whole = feed(lim, bytes, [&] { return bytes.size(); }, "whole");
    for (const auto& r : whole.replies) {
        check_limits(r, lim, "whole");
        FUZZ_CHECK(levels(r) <= lim.max_nesting_depth, "whole");
        FUZZ_CHECK(reply_cost(r) <= resolved(lim).max_reply_size, "whole");
        // Rendering for logs is bounded however large the reply is.
        FUZZ_CHECK(to_string(r).size() <= 515, "to_string");
    }
    // Nothing parsed from n bytes holds more than n bytes of payload, and
    // the partial frame is never more than was fed.
    FUZZ_CHECK(whole.buffered <= bytes.size(), "whole");

    const std::size_t split = bytes.empty() ? 0 : h % (bytes.size() + 1);
    bool first = true;
    agree(whole, feed(lim, bytes, [&] {
              const std::size_t n = first ? split : bytes.size();
              first = false;
              return n;
          }, "split"), "split");

    std::uint64_t state = h | 1;
    agree(whole, feed(lim, bytes, [&] {
              state ^= state << 13;
              state ^= state >> 7;
              state ^= state << 17;
              return static_cast<std::size_t>(1 + state % 16);
          }, "chunks"), "chunks");

    agree(whole, feed(lim, bytes, [] { return std::size_t(1); }, "bytewise"), "bytewise");
    return whole;
}

// The replies under `lim` against those of a parser without limits.
void check_against_unlimited(const outcome& got, const parser_limits& lim, std::string_view bytes) {
    constexpr std::size_t huge = std::size_t(1) << 40;
    const parser_limits none{huge, huge, huge, std::numeric_limits<std::size_t>::max() / 2};
    const outcome all = feed(none, bytes, [&] { return bytes.size(); }, "unlimited");
    const char* mode = "against unlimited";
    FUZZ_CHECK(got.replies.size() <= all.replies.size(), mode);
    for (std::size_t i = 0; i < got.replies.size(); ++i)
        FUZZ_CHECK(same_reply(got.replies[i], all.replies[i]), mode);
    if (got.replies.size() == all.replies.size()) return;
    // The next reply parsed without limits was refused: for a limit.
    FUZZ_CHECK(got.ec == corolock::error::reply_too_large ||
                   got.ec == corolock::error::nesting_too_deep, mode);
    // Attribute maps are charged but not kept, so the check is exact only
    // without them.
    const reply& refused = all.replies[got.replies.size()];
    if (!has_attributes(refused)) FUZZ_CHECK(over_limits(refused, resolved(lim)), mode);
}

}  // namespace

int corolock_fuzz_resp3(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const std::uint64_t h = fnv1a(bytes);
    // The defaults (as resolved by the parser: 512 MiB, depth 32, 16 Mi).
    run(parser_limits{512u * 1024 * 1024, 32, 16u * 1024 * 1024}, bytes, h);
    // Small limits, as in the unit tests.
    run(parser_limits{16, 3, 6}, bytes, h);
    // Tiny limits from the input's hash, so every boundary gets hit: bulk
    // 1..31 (0 would mean the default), depth 1..4, size 1..8, and a reply
    // of 1 to 16 values' worth of memory.
    run(parser_limits{1 + (h >> 8) % 31, 1 + (h >> 16) % 4, 1 + (h >> 24) % 8,
                      sizeof(reply) * (1 + (h >> 32) % 16) + (h >> 36) % 64},
        bytes, h >> 32);
    // Limits from the first four bytes, the rest the stream: bulk 1..64,
    // depth 1..8, size 1..16, reply 1..2041 bytes of memory.
    if (bytes.size() >= 4) {
        const auto b = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
        const parser_limits lim{1 + b(0) % 64u, 1 + b(1) % 8u, 1 + b(2) % 16u, 1 + b(3) * 8u};
        const std::string_view stream = bytes.substr(4);
        check_against_unlimited(run(lim, stream, h), lim, stream);
    }
    return 0;
}
