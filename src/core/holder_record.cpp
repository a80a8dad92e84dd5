#include "core/holder_record.hpp"

#include <corolock/lock_holder.hpp>  // max_holder_label_length

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>

namespace corolock::detail {

std::int64_t wall_clock_us() noexcept {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return std::chrono::duration_cast<std::chrono::microseconds>(now).count();
}

std::string holder_argument(std::string_view label) {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    std::string out = std::to_string(::getpid());
    out.push_back(' ');
    const std::size_t host_at = out.size();
    out.append(host.data());
    if (out.size() == host_at) out.push_back('?');
    // The host is one word, so that the label may hold anything.
    for (std::size_t i = host_at; i < out.size(); ++i) {
        const auto c = static_cast<unsigned char>(out[i]);
        if (c <= 0x20 || c == 0x7f) out[i] = '?';
    }
    out.push_back(' ');
    out.append(label.substr(0, max_holder_label_length));
    return out;
}

std::string holder_record(std::int64_t since_us, std::string_view argument) {
    std::string out = std::to_string(since_us);
    out.push_back(' ');
    out.append(argument);
    return out;
}

namespace {
// The next space-delimited word of text, consumed.
std::string_view next_word(std::string_view& text) noexcept {
    const auto end = text.find(' ');
    if (end == std::string_view::npos) return {};
    const auto word = text.substr(0, end);
    text.remove_prefix(end + 1);
    return word;
}
bool parse_int(std::string_view text, std::int64_t& out) noexcept {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && ptr == text.data() + text.size() && !text.empty();
}
}  // namespace

std::optional<lock_holder> parse_holder_record(std::string_view record, std::int64_t now_us) {
    std::int64_t since_us = 0, pid = 0;
    if (!parse_int(next_word(record), since_us) || !parse_int(next_word(record), pid))
        return std::nullopt;
    // The server's text is not trusted: a moment before the epoch, or past
    // what the system clock's duration holds (the year 2262 for
    // nanoseconds), is no record, so nothing below can overflow.
    constexpr std::int64_t latest_us =
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::duration::max())
            .count();
    if (since_us < 0 || since_us > latest_us) return std::nullopt;
    const auto host = next_word(record);
    if (host.empty()) return std::nullopt;
    lock_holder h;
    h.host = host;
    h.pid = pid;
    h.label = record;
    h.since = std::chrono::system_clock::time_point(std::chrono::microseconds(since_us));
    // A reader's clock behind the writer's: held for 0, never negative.
    h.held_for = std::chrono::milliseconds(now_us > since_us ? (now_us - since_us) / 1000 : 0);
    return h;
}

}  // namespace corolock::detail
