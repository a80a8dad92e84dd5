// Splitting a URL after its "://" into the authority and the tail, shared
// by the URL parsers whose user part may hold a password (config.cpp,
// redlock_url.cpp).
#pragma once

#include <string_view>

namespace corolock::detail {

struct url_authority {
    std::string_view authority;  // [userinfo@]hosts
    std::string_view tail;       // "", or from the first '/', '?' or '#' on
};

// The authority ends at the first '/', '?' or '#' (RFC 3986, 3.2). An '@'
// after that point means a user name or password holds one of those
// characters unencoded; splitting there would mistake part of the password
// for a host, port or database (and echo it): false then, and the caller
// refuses with misplaced_at_message.
inline bool split_authority(std::string_view rest, url_authority& out) noexcept {
    const auto end = rest.find_first_of("/?#");
    out.authority = rest.substr(0, end);
    out.tail = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    return out.tail.find('@') == std::string_view::npos;
}

inline constexpr std::string_view misplaced_at_message =
    "unexpected '@' after the URL's host: percent-encode '/', '?' and '#' in the user name and "
    "password (as %2F, %3F and %23)";

}  // namespace corolock::detail
