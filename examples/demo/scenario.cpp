#include "scenario.hpp"

#include <charconv>
#include <ctime>

namespace demo {

std::string scenario::check() const {
    if (workers < 2 || workers > 32)
        return "--workers must be 2..32 (one is paused; someone else must sell meanwhile)";
    if (tasks < 1 || tasks > 256) return "--tasks must be 1..256";
    if (stock < 1 || stock > 100000) return "--stock must be 1..100000";
    if (victim_lease < milliseconds(100) || victim_lease > milliseconds(10000))
        return "--victim-lease-ms must be 100..10000";
    if (lease < milliseconds(100) || lease > milliseconds(60000)) return "--lease-ms must be 100..60000";
    // The point of the pause is to outlive the lease; shorter shows nothing.
    if (pause <= victim_lease + milliseconds(200) || pause > milliseconds(20000))
        return "--pause-ms must exceed the victim's lease by more than 200 ms, and be at most 20000";
    if (sku.empty() || sku.size() > 64 || sku.find_first_of("{} \t\r\n") != std::string::npos)
        return "--sku must be 1..64 bytes without braces or spaces";
    return {};
}

std::int64_t mono_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
    std::int64_t v = 0;
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc() || p != end || s.empty()) return std::nullopt;
    return v;
}

std::optional<std::int64_t> event::num(std::size_t i) const {
    if (i >= fields.size()) return std::nullopt;
    return parse_int(fields[i]);
}

std::optional<event> parse_event(std::string_view line) {
    event ev;
    std::size_t i = 0;
    // Bounded by the line's length: each pass consumes at least one byte.
    while (i < line.size()) {
        while (i < line.size() && line[i] == ' ') ++i;
        const auto start = i;
        while (i < line.size() && line[i] != ' ') ++i;
        if (i == start) break;
        auto word = std::string(line.substr(start, i - start));
        if (ev.kind.empty())
            ev.kind = std::move(word);
        else
            ev.fields.push_back(std::move(word));
    }
    if (ev.kind.empty()) return std::nullopt;
    return ev;
}

}  // namespace demo
