// Builders of expected replies for the tests that parse or route RESP3
// without a server (the parser, the request queue, the cluster slot map).
// Header-only, like reply_equal.hpp, for the same reason: the unit tests
// link no support code of their own for it.
#pragma once

#include <corolock/reply.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace corolock::test::replies {

inline reply node(resp3_type t, std::string s = {}, std::vector<reply> el = {}) {
    reply r;
    r.type = t;
    r.str = std::move(s);
    r.elements = std::move(el);
    return r;
}
inline reply bulk(std::string s) { return node(resp3_type::bulk_string, std::move(s)); }
inline reply simple(std::string s) { return node(resp3_type::simple_string, std::move(s)); }
inline reply integer(std::int64_t v) {
    reply r = node(resp3_type::integer);
    r.integer = v;
    return r;
}
inline reply boolean(bool b) {
    reply r = node(resp3_type::boolean);
    r.integer = b ? 1 : 0;
    return r;
}
inline reply dbl(std::string text, double v) {
    reply r = node(resp3_type::double_type, std::move(text));
    r.number = v;
    return r;
}
inline reply verbatim(std::string format, std::string text) {
    reply r = node(resp3_type::verbatim_string, std::move(text));
    r.format = std::move(format);
    return r;
}
inline reply nil() { return node(resp3_type::null); }
inline reply arr(std::vector<reply> el) { return node(resp3_type::array, {}, std::move(el)); }
inline reply map(std::vector<reply> kv) { return node(resp3_type::map, {}, std::move(kv)); }
inline reply set(std::vector<reply> el) { return node(resp3_type::set, {}, std::move(el)); }
inline reply push(std::vector<reply> el) { return node(resp3_type::push, {}, std::move(el)); }
inline reply with_attrs(reply r, std::vector<reply> attrs) {
    r.attributes = std::move(attrs);
    return r;
}

}  // namespace corolock::test::replies
