// json_string(): see cli.hpp. In the parsing library, so that the unit tests
// can check it (test/cli/cli_defaults_test.cpp).
#include "cli.hpp"

#include "core/utf8.hpp"

#include <cstdint>

namespace corolock::cli {

std::string json_string(std::string_view bytes) {
    // Valid UTF-8 passes through, except what printable() also escapes for a
    // terminal: control characters (C0, DEL and C1) and the bidirectional
    // controls (detail::hidden_code_point), written as \uXXXX; quotes and
    // backslashes are escaped. A byte that is not part of valid UTF-8 (names
    // and owner ids are binary-safe) is written as \u00XX, i.e. read as
    // Latin-1, so the output is always valid JSON, and a JSON reader that
    // prints a value to a terminal gets nothing that hides or reorders text.
    std::string out = "\"";
    constexpr char hex[] = "0123456789abcdef";
    auto escape = [&](std::uint32_t unit) {
        out += "\\u";
        for (int shift = 12; shift >= 0; shift -= 4) out.push_back(hex[(unit >> shift) & 0xf]);
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

}  // namespace corolock::cli
