// printable(): bytes made safe for a terminal line.
#include <corolock/printable.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <string>

using corolock::printable;
using corolock::printable_json;
using namespace std::string_literals;

TEST_CASE("printable: plain text and UTF-8 pass through", "[unit][printable]") {
    CHECK(printable("") == "");
    CHECK(printable("deploy-42 job.nightly") == "deploy-42 job.nightly");
    CHECK(printable("d\xc3\xa9ploiement \xe2\x9c\x93") == "d\xc3\xa9ploiement \xe2\x9c\x93");
    CHECK(printable("\xf0\x9f\x94\x92") == "\xf0\x9f\x94\x92");
}

TEST_CASE("printable: line breaks, tabs and backslashes are escaped", "[unit][printable]") {
    CHECK(printable("a\nb") == "a\\nb");
    CHECK(printable("a\rb") == "a\\rb");
    CHECK(printable("a\tb") == "a\\tb");
    CHECK(printable("a\\b") == "a\\\\b");
    // A name that would forge a second output line stays on one line.
    const std::string forged = printable("x\ncorolock: released lock cleanly");
    CHECK(forged.find('\n') == std::string::npos);
    CHECK(forged == "x\\ncorolock: released lock cleanly");
}

TEST_CASE("printable: control bytes, DEL and terminal escapes become \\xNN", "[unit][printable]") {
    CHECK(printable("\x1b[2J\x1b[H") == "\\x1b[2J\\x1b[H");
    CHECK(printable("\x07\x08\x7f") == "\\x07\\x08\\x7f");
    CHECK(printable("a\0b"s) == "a\\x00b");
    CHECK(printable("\x01\x1f") == "\\x01\\x1f");
}

TEST_CASE("printable: malformed UTF-8 bytes become \\xNN", "[unit][printable]") {
    CHECK(printable("\xff") == "\\xff");
    CHECK(printable("\xc3") == "\\xc3");                  // truncated sequence
    CHECK(printable("\xc3(") == "\\xc3(");                // bad continuation
    CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");         // overlong '/'
    CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80"); // a surrogate
    CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80"); // past U+10FFFF
}

TEST_CASE("printable: C1 controls and bidirectional overrides are made visible",
          "[unit][printable]") {
    CHECK(printable("\xc2\x9b" "2J") == "\\u{009b}2J");  // CSI
    CHECK(printable("\xc2\x85") == "\\u{0085}");         // NEL
    CHECK(printable("a\xe2\x80\xae" "b") == "a\\u{202e}b"); // RIGHT-TO-LEFT OVERRIDE
    CHECK(printable("\xe2\x81\xa6") == "\\u{2066}");     // LEFT-TO-RIGHT ISOLATE
    CHECK(printable("\xc2\xa0") == "\xc2\xa0");          // NBSP is ordinary text
}

TEST_CASE("printable: the output is printable and distinct inputs stay distinct",
          "[unit][printable]") {
    std::set<std::string> outputs;
    for (int c = 0; c < 256; ++c) {
        const std::string in(1, static_cast<char>(c));
        const std::string out = printable(in);
        INFO(c);
        for (char o : out) {
            const auto u = static_cast<unsigned char>(o);
            CHECK(u >= 0x20);
            CHECK(u != 0x7f);
        }
        outputs.insert(out);
    }
    CHECK(outputs.size() == 256);
    // The escape text itself cannot be confused with an escaped byte.
    CHECK(printable("\\x1b") != printable("\x1b"));
}

TEST_CASE("printable_json: escapes what could hide or reorder text, and stays valid JSON",
          "[unit][printable]") {
    // Plain text, UTF-8 included, passes through.
    CHECK(printable_json("orders/é") == "\"orders/é\"");
    CHECK(printable_json("a\"b\\c\nd") == R"("a\"b\\c\nd")");
    CHECK(printable_json(std::string("\x01\x7f", 2)) == R"("\u0001\u007f")");
    CHECK(printable_json("\t\r\b\f") == R"("\t\r\b\f")");
    // C1 controls (U+009B is a terminal's CSI) and the bidirectional
    // controls are valid UTF-8, and were written raw before.
    CHECK(printable_json("x\xc2\x9b" "2J") == R"("x\u009b2J")");
    CHECK(printable_json("x\xc2\x85y") == R"("x\u0085y")");
    CHECK(printable_json("user\xe2\x80\xae" "gpj.exe") == R"("user\u202egpj.exe")");
    CHECK(printable_json("\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9") == R"("\u202a\u2066\u2069")");
    // Neighbours of those ranges are ordinary text.
    CHECK(printable_json("\xc2\xa0") == "\"\xc2\xa0\"");          // U+00A0
    CHECK(printable_json("\xe2\x80\xaf") == "\"\xe2\x80\xaf\"");  // U+202F
    // A byte that is not UTF-8 is read as Latin-1.
    CHECK(printable_json("\xff" "a\xc2") == R"("\u00ffa\u00c2")");
}
