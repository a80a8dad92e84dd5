#include "schemes.hpp"

#include <cctype>

namespace corolock::detail {

std::string scheme_of(std::string_view url) {
    const auto end = url.find("://");
    if (end == std::string_view::npos || end == 0 || end > 32) return {};
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
