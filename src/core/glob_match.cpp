#include "core/glob_match.hpp"

#include <utility>

namespace corolock::detail {

namespace {

// One non-star token of a glob at pattern[p] against the byte c; next gets
// the index after the token. An unclosed class runs to the pattern's end.
bool token_matches(std::string_view pattern, std::size_t p, char c, std::size_t& next) noexcept {
    const auto n = pattern.size();
    if (pattern[p] == '?') {
        next = p + 1;
        return true;
    }
    if (pattern[p] == '\\' && p + 1 < n) {
        next = p + 2;
        return pattern[p + 1] == c;
    }
    if (pattern[p] != '[') {
        next = p + 1;
        return pattern[p] == c;
    }
    std::size_t i = p + 1;
    const bool negate = i < n && pattern[i] == '^';
    if (negate) ++i;
    bool hit = false;
    const auto byte = static_cast<unsigned char>(c);
    while (i < n && pattern[i] != ']') {
        if (pattern[i] == '\\' && i + 1 < n) {
            hit = hit || pattern[i + 1] == c;
            i += 2;
        } else if (i + 2 < n && pattern[i + 1] == '-') {
            auto lo = static_cast<unsigned char>(pattern[i]);
            auto hi = static_cast<unsigned char>(pattern[i + 2]);
            if (lo > hi) std::swap(lo, hi);
            hit = hit || (byte >= lo && byte <= hi);
            i += 3;
        } else {
            hit = hit || pattern[i] == c;
            ++i;
        }
    }
    next = i < n ? i + 1 : i;
    return hit != negate;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) noexcept {
    // Each token but * matches one byte, so on a mismatch only the last *
    // needs to take one byte more: no deeper backtracking.
    constexpr auto none = std::string_view::npos;
    std::size_t p = 0, t = 0, star_p = none, star_t = 0;
    while (t < text.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            while (p < pattern.size() && pattern[p] == '*') ++p;
            if (p == pattern.size()) return true;
            star_p = p;
            star_t = t;
            continue;
        }
        std::size_t next = 0;
        if (p < pattern.size() && token_matches(pattern, p, text[t], next)) {
            p = next;
            ++t;
        } else if (star_p != none) {
            p = star_p;
            t = ++star_t;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

}  // namespace corolock::detail
