// Fuzz target for core/glob_match.hpp: glob_match(pattern, text) agrees
// with a reference matcher written here from the header's rules (the
// pattern cut into tokens first, then every split tried, memoised), for a
// pattern and a text cut from the input at its first NUL byte.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "core/glob_match.hpp"

#include <bitset>
#include <string_view>
#include <vector>

namespace {

// One token of a glob: a star, or the set of bytes one position may be.
struct token {
    bool star = false;
    std::bitset<256> bytes;
};

// The header's rules: * any run, ? one byte, [abc] [a-z] (either order)
// [^abc] a class (a backslash escapes the next byte; unclosed, it runs to
// the pattern's end), \x the byte x, anything else itself.
std::vector<token> tokens_of(std::string_view p) {
    std::vector<token> out;
    for (std::size_t i = 0; i < p.size();) {
        token t;
        const auto c = static_cast<unsigned char>(p[i]);
        if (c == '*') {
            t.star = true;
            ++i;
        } else if (c == '?') {
            t.bytes.set();
            ++i;
        } else if (c == '\\' && i + 1 < p.size()) {
            t.bytes.set(static_cast<unsigned char>(p[i + 1]));
            i += 2;
        } else if (c == '[') {
            ++i;
            const bool negate = i < p.size() && p[i] == '^';
            if (negate) ++i;
            while (i < p.size() && p[i] != ']') {
                if (p[i] == '\\' && i + 1 < p.size()) {
                    t.bytes.set(static_cast<unsigned char>(p[i + 1]));
                    i += 2;
                } else if (i + 2 < p.size() && p[i + 1] == '-') {
                    unsigned lo = static_cast<unsigned char>(p[i]);
                    unsigned hi = static_cast<unsigned char>(p[i + 2]);
                    if (lo > hi) std::swap(lo, hi);
                    for (unsigned b = lo; b <= hi; ++b) t.bytes.set(b);
                    i += 3;
                } else {
                    t.bytes.set(static_cast<unsigned char>(p[i]));
                    ++i;
                }
            }
            if (i < p.size()) ++i;  // the ']'
            if (negate) t.bytes.flip();
        } else {
            t.bytes.set(c);
            ++i;
        }
        out.push_back(t);
    }
    return out;
}

// Whether the tokens match the whole text: every way a star may end is
// tried, each (token, byte) pair once.
bool reference_match(const std::vector<token>& tokens, std::string_view text) {
    const std::size_t cols = text.size() + 1;
    std::vector<char> memo((tokens.size() + 1) * cols, 2);  // 0 no, 1 yes, 2 unknown
    auto match = [&](auto& self, std::size_t k, std::size_t t) -> bool {
        char& m = memo[k * cols + t];
        if (m != 2) return m == 1;
        bool r = false;
        if (k == tokens.size())
            r = t == text.size();
        else if (tokens[k].star)
            r = self(self, k + 1, t) || (t < text.size() && self(self, k, t + 1));
        else
            r = t < text.size() && tokens[k].bytes.test(static_cast<unsigned char>(text[t])) &&
                self(self, k + 1, t + 1);
        m = r ? 1 : 0;
        return r;
    };
    return match(match, 0, 0);
}

}  // namespace

int corolock_fuzz_glob(const std::uint8_t* data, std::size_t size) {
    corolock::fuzz::input in(data, size);
    // Bounded so that the reference's recursion stays shallow.
    const std::string_view pattern = in.take_until('\0').substr(0, 64);
    const std::string_view text = in.rest().substr(0, 256);
    const bool got = corolock::detail::glob_match(pattern, text);
    FUZZ_REQUIRE(got == reference_match(tokens_of(pattern), text));
    // A pattern matches its own text when it has no special byte.
    if (pattern.find_first_of("*?[\\") == std::string_view::npos)
        FUZZ_REQUIRE(corolock::detail::glob_match(pattern, pattern));
    return 0;
}
