// The one RESP request writer: an array header "*<count>\r\n" and bulk
// strings "$<length>\r\n<bytes>\r\n", the only framing a request uses.
// put_*() store into a buffer the caller sized with the *_bound()s (the
// script path, once per lock command: no allocation, plain stores);
// append_*() grow a std::string (corolock::command).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace corolock::detail::resp_writer {

// Room for any 64-bit number in decimal, a minus sign included.
inline constexpr std::size_t max_decimal = 20;

// Upper bounds of the bytes the writers below produce.
inline constexpr std::size_t array_header_bound = 1 + max_decimal + 2;
constexpr std::size_t bulk_bound(std::size_t length) noexcept {
    return 1 + max_decimal + 2 + length + 2;
}

inline char* put_decimal(char* p, std::size_t n) noexcept {
    return std::to_chars(p, p + max_decimal, n).ptr;
}

inline char* put_crlf(char* p) noexcept {
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

inline char* put_array_header(char* p, std::size_t count) noexcept {
    *p++ = '*';
    return put_crlf(put_decimal(p, count));
}

inline char* put_bulk_header(char* p, std::size_t length) noexcept {
    *p++ = '$';
    return put_crlf(put_decimal(p, length));
}

inline char* put_bulk(char* p, std::string_view a) noexcept {
    p = put_bulk_header(p, a.size());
    if (!a.empty()) std::memcpy(p, a.data(), a.size());
    return put_crlf(p + a.size());
}

inline void append_array_header(std::string& out, std::size_t count) {
    char buf[array_header_bound];
    out.append(buf, static_cast<std::size_t>(put_array_header(buf, count) - buf));
}

inline void append_bulk(std::string& out, std::string_view a) {
    char head[bulk_bound(0)];
    out.append(head, static_cast<std::size_t>(put_bulk_header(head, a.size()) - head));
    out.append(a);
    out.append("\r\n", 2);
}

}  // namespace corolock::detail::resp_writer
