#include "schemes.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace corolock::detail {

std::string scheme_of(std::string_view url) {
    auto end = url.find("://");
    if (end == std::string_view::npos) {
        // "redis:/host" (a '/' lost): a scheme of the table, so that its own
        // parser says what is wrong; other text is never taken for one.
        const auto colon = url.find(':');
        if (colon == std::string_view::npos || url.substr(colon + 1, 1) != "/") return {};
        std::string lower;
        for (char c : url.substr(0, colon))
            lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (std::none_of(std::begin(schemes), std::end(schemes),
                         [&](const scheme_entry& e) { return e.name == lower; }))
            return {};
        end = colon;
    }
    if (end == 0 || end > 32) return {};
    const auto s = url.substr(0, end);
    if (!std::isalpha(static_cast<unsigned char>(s[0]))) return {};
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (!std::isalnum(u) && c != '+' && c != '-' && c != '.') return {};
        out += static_cast<char>(std::tolower(u));
    }
    return out;
}

scheme_family family_of(std::string_view url) {
    const auto scheme = scheme_of(url);
    if (scheme.empty()) return scheme_family::redis;
    for (const auto& e : schemes)
        if (e.name == scheme) return e.family;
    return scheme_family::unknown;
}

std::string accepted_schemes() {
    std::string out;
    for (const auto& e : schemes) {
        if (!out.empty()) out += ", ";
        out += e.name;
    }
    return out;
}

}  // namespace corolock::detail
