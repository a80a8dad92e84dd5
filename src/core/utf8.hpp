// The one home of UTF-8 well-formedness for corolock's text output:
// printable() escapes around it, the Prometheus rendering replaces what it
// rejects. Not installed: the library's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace corolock::detail {

// Length and code point of the well-formed UTF-8 sequence at bytes[i] (1 for
// ASCII), or 0: a stray continuation byte, a truncated sequence, an overlong
// form, a surrogate or a code point past U+10FFFF. i < bytes.size().
std::size_t utf8_sequence(std::string_view bytes, std::size_t i, std::uint32_t& cp) noexcept;

}  // namespace corolock::detail
