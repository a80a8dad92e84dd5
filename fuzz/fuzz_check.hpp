// What the fuzz targets share: a check that aborts (libFuzzer keeps the
// input as a crash; the replay test's process dies, naming the input) and
// a reader that cuts an input into fields.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace corolock::fuzz {

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
    std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", what, file, line);
    std::abort();
}

// Cuts an input into fields: each take_* consumes from the front, and an
// exhausted input gives zeros and empty strings.
class input {
public:
    input(const std::uint8_t* data, std::size_t size)
        : rest_(reinterpret_cast<const char*>(data), size) {}

    std::uint8_t take_byte() noexcept {
        if (rest_.empty()) return 0;
        const auto b = static_cast<std::uint8_t>(rest_.front());
        rest_.remove_prefix(1);
        return b;
    }
    std::uint64_t take_u64() noexcept {
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = v << 8 | take_byte();
        return v;
    }
    // Up to the next `sep` (consumed, not returned), or the rest.
    std::string_view take_until(char sep) noexcept {
        const auto at = rest_.find(sep);
        const auto field = rest_.substr(0, at);
        rest_.remove_prefix(at == std::string_view::npos ? rest_.size() : at + 1);
        return field;
    }
    std::string_view take(std::size_t n) noexcept {
        const auto field = rest_.substr(0, n);
        rest_.remove_prefix(field.size());
        return field;
    }
    std::string_view rest() const noexcept { return rest_; }
    bool empty() const noexcept { return rest_.empty(); }

private:
    std::string_view rest_;
};

inline bool contains(std::string_view text, std::string_view part) {
    return !part.empty() && text.find(part) != std::string_view::npos;
}

}  // namespace corolock::fuzz

#define FUZZ_REQUIRE(cond) \
    do {                   \
        if (!(cond)) ::corolock::fuzz::fail(#cond, __FILE__, __LINE__); \
    } while (0)
