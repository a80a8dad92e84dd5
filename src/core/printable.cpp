// printable() and printable_json(): see include/corolock/printable.hpp.
#include <corolock/printable.hpp>
#include "core/utf8.hpp"

#include <cstdint>

namespace corolock {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

void append_byte_escape(std::string& out, unsigned char c) {
    out += "\\x";
    out.push_back(hex_digits[c >> 4]);
    out.push_back(hex_digits[c & 0xf]);
}

void append_code_point_escape(std::string& out, std::uint32_t cp) {
    out += "\\u{";
    for (int shift = 12; shift >= 0; shift -= 4) out.push_back(hex_digits[(cp >> shift) & 0xf]);
    out.push_back('}');
}


}  // namespace

std::string printable(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    std::size_t i = 0;
    while (i < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c < 0x80) {
            switch (c) {
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\\': out += "\\\\"; break;
            default:
                if (c < 0x20 || c == 0x7f) append_byte_escape(out, c);
                else out.push_back(static_cast<char>(c));
            }
            ++i;
            continue;
        }
        std::uint32_t cp = 0;
        const std::size_t len = detail::utf8_sequence(bytes, i, cp);
        if (len == 0) {
            append_byte_escape(out, c);
            ++i;
        } else if (detail::hidden_code_point(cp)) {
            append_code_point_escape(out, cp);
            i += len;
        } else {
            out.append(bytes.substr(i, len));
            i += len;
        }
    }
    return out;
}

std::string printable_json(std::string_view bytes) {
    std::string out = "\"";
    out.reserve(bytes.size() + 2);
    auto escape = [&out](std::uint32_t unit) {
        out += "\\u";
        for (int shift = 12; shift >= 0; shift -= 4) out.push_back(hex_digits[(unit >> shift) & 0xf]);
    };
    std::size_t i = 0;
    while (i < bytes.size()) {
        std::uint32_t cp = 0;
        const std::size_t len = detail::utf8_sequence(bytes, i, cp);
        if (len == 0) {
            escape(static_cast<unsigned char>(bytes[i]));  // not UTF-8: as Latin-1
            ++i;
            continue;
        }
        switch (cp) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (cp < 0x20 || cp == 0x7f || detail::hidden_code_point(cp)) escape(cp);
            else out.append(bytes.substr(i, len));
        }
        i += len;
    }
    out.push_back('"');
    return out;
}

}  // namespace corolock

namespace corolock::detail {

std::size_t utf8_sequence(std::string_view bytes, std::size_t i, std::uint32_t& cp) noexcept {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
        cp = c;
        return 1;
    }
    std::size_t len = 0;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (i + len > bytes.size()) return 0;
    for (std::size_t k = 1; k < len; ++k) {
        const auto cc = static_cast<unsigned char>(bytes[i + k]);
        if ((cc & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

}  // namespace corolock::detail
