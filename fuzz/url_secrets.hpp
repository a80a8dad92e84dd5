// For the URL targets: the input URL with its credentials replaced by
// markers, so that a target can check that no message of the parser
// echoes them. The user part (before the last '@' of the authority, which
// ends at the first '/', '?' or '#') becomes USER_MARK:PASSWORD_MARK, and
// every value of the query (after the first '?' past the authority)
// VALUE_MARK.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace corolock::fuzz {

inline constexpr std::string_view user_mark = "u5erMARK";
inline constexpr std::string_view password_mark = "pa55MARK";
inline constexpr std::string_view value_mark = "va1ueMARK";

struct planted_url {
    std::string url;
    bool planted = false;  // false: the input held a marker already, or had nothing to replace
};

inline planted_url plant_secrets(std::string_view url) {
    planted_url out;
    for (const auto mark : {user_mark, password_mark, value_mark})
        if (url.find(mark) != std::string_view::npos) return out;
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) return out;
    const std::size_t start = scheme_end + 3;
    const std::size_t authority_end = std::min(url.find_first_of("/?#", start), url.size());
    const std::string_view authority = url.substr(start, authority_end - start);
    out.url = url.substr(0, start);
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        out.url.append(user_mark).append(":").append(password_mark);
        out.url.append(authority.substr(at));
        out.planted = true;
    } else {
        out.url.append(authority);
    }
    const std::string_view tail = url.substr(authority_end);
    const auto q = tail.find('?');
    out.url.append(tail.substr(0, q));
    if (q == std::string_view::npos) return out;
    // key=value&key=value[#fragment]: each value replaced.
    std::string_view query = tail.substr(q);
    const auto hash = query.find('#');
    const std::string_view fragment = hash == std::string_view::npos ? "" : query.substr(hash);
    query = query.substr(0, hash);
    bool in_value = false;
    for (const char c : query) {
        if (c == '&') in_value = false;
        if (!in_value) out.url += c;
        if (c == '=' && !in_value) {
            in_value = true;
            out.url.append(value_mark);
            out.planted = true;
        }
    }
    out.url.append(fragment);
    return out;
}

// Whether a message holds any of the markers.
inline bool echoes_secret(std::string_view message) {
    for (const auto mark : {user_mark, password_mark, value_mark})
        if (message.find(mark) != std::string_view::npos) return true;
    return false;
}

}  // namespace corolock::fuzz
