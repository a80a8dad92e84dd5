// The text rules every URL parser shares (Redis, Sentinel, Cluster,
// RedLock, etcd, ZooKeeper, PostgreSQL): ASCII case-insensitive comparison
// of schemes and keywords, and %XX decoding and encoding. Not installed.
#pragma once

#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>

namespace corolock::detail {

// ASCII only, whatever the C locale says.
inline bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

// The value of %XX at s[i] ('%' there), or -1 when two hex digits do not
// follow.
inline int percent_escape_at(std::string_view s, std::size_t i) noexcept {
    unsigned v = 0;
    if (i + 3 > s.size()) return -1;
    const auto r = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    return r.ec == std::errc() && r.ptr == s.data() + i + 3 ? static_cast<int>(v) : -1;
}

// %XX escapes decoded; false (and `out` unspecified) at a '%' that two hex
// digits do not follow: what a parser refuses.
inline bool percent_decode_strict(std::string_view s, std::string& out) {
    out.clear();
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        const int v = percent_escape_at(s, i);
        if (v < 0) return false;
        out += static_cast<char>(v);
        i += 2;
    }
    return true;
}

// %XX escapes decoded; a '%' not followed by two hex digits is kept as is
// (for text a parser already accepted, or that it refuses anyway).
inline std::string percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const int v = s[i] == '%' ? percent_escape_at(s, i) : -1;
        if (v >= 0) {
            out += static_cast<char>(v);
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Every byte but RFC 3986's unreserved ones (letters, digits, "-._~") as
// %XX: a password put into a URL's user part.
inline std::string percent_encode(std::string_view s) {
    constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                c == '~';
        if (unreserved) {
            out.push_back(ch);
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 0xf]);
        }
    }
    return out;
}

// A URL part in double quotes for a message, so that empty and odd values
// are visible. Only for parts that cannot hold a password.
inline std::string quoted(std::string_view s) {
    // Appended: g++ 12 at -O3 reports a false -Wrestrict for "\"" + string.
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    out.append(s);
    out.push_back('"');
    return out;
}

}  // namespace corolock::detail
