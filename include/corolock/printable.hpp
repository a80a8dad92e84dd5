// printable(): bytes made safe to print on a terminal or in a log line.
//
// Lock names, owner ids and server error text are binary-safe and come from
// other people: printed raw, a newline forges an extra output line and an
// escape sequence drives the terminal. printable() keeps text readable and
// makes every such byte visible instead:
//
//   \n \r \t \\           for newline, carriage return, tab and backslash
//   \xNN                  for every other C0 control byte, DEL, and each byte
//                         that is not part of well-formed UTF-8
//   \u{NNNN}              for the C1 controls (U+0080-U+009F) and the
//                         bidirectional overrides and isolates (U+202A-U+202E,
//                         U+2066-U+2069), which reorder or hide text
//
// Printable ASCII (other than '\\') and other well-formed UTF-8 pass through
// unchanged, so the output is one line, and distinct inputs stay distinct.
#pragma once

#include <corolock/export.hpp>

#include <string>
#include <string_view>

namespace corolock {

COROLOCK_API std::string printable(std::string_view bytes);

// The same bytes as a JSON string literal, quotes included, for tools that
// print a lock's names and holders as JSON (the corolock tool's --json).
// printable()'s rule, in JSON's own escapes: the control characters (C0,
// DEL and C1) and the bidirectional controls above become \uXXXX, quotes
// and backslashes are escaped (\n \r \t \b \f for those five controls),
// other well-formed UTF-8 passes through, and a byte that is not part of
// well-formed UTF-8 is written as \u00XX (read as Latin-1). The output is
// always valid JSON, and a reader that prints a value to a terminal gets
// nothing that hides or reorders text.
COROLOCK_API std::string printable_json(std::string_view bytes);

}  // namespace corolock
