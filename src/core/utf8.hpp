// The one home of UTF-8 well-formedness for corolock's text output:
// printable() and printable_json() (the tool's --json), the Prometheus
// rendering replaces what it rejects. Not installed: the library's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace corolock::detail {

// Length and code point of the well-formed UTF-8 sequence at bytes[i] (1 for
// ASCII), or 0: a stray continuation byte, a truncated sequence, an overlong
// form, a surrogate or a code point past U+10FFFF. i < bytes.size().
std::size_t utf8_sequence(std::string_view bytes, std::size_t i, std::uint32_t& cp) noexcept;

// A code point that hides or reorders text on a terminal, though valid: the
// C1 controls (U+0080-U+009F; U+009B is an escape sequence's CSI on many
// terminals) and the bidirectional embeddings, overrides and isolates
// (U+202A-U+202E, U+2066-U+2069). Every text output escapes them.
constexpr bool hidden_code_point(std::uint32_t cp) noexcept {
    return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace corolock::detail
