// Field-by-field equality of two replies, recursively: a parser bug in any
// field must show. Header-only, so that the fuzz target (which compiles the
// parser on its own, without the test support library) shares it with the
// unit tests.
#pragma once

#include <corolock/reply.hpp>

#include <cmath>
#include <cstddef>

namespace corolock::test {

// NaN equals NaN, and 0.0 differs from -0.0.
inline bool same_number(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
}

inline bool same_reply(const reply& a, const reply& b) {
    if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.format != b.format ||
        !same_number(a.number, b.number) || a.elements.size() != b.elements.size() ||
        a.attributes.size() != b.attributes.size())
        return false;
    for (std::size_t i = 0; i < a.elements.size(); ++i)
        if (!same_reply(a.elements[i], b.elements[i])) return false;
    for (std::size_t i = 0; i < a.attributes.size(); ++i)
        if (!same_reply(a.attributes[i], b.attributes[i])) return false;
    return true;
}

}  // namespace corolock::test
