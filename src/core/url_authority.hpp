// Splitting a URL after its "://" into the authority and the tail: where
// the authority ends, for core/url.hpp's split_url (every URL parser) and
// for the corolock tool's rewrites of a URL.
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

// A URL cut around its user information, for code that rewrites it (the
// corolock tool puts a password in, or takes every credential out):
// head + [userinfo + '@'] + hosts + tail.
struct url_pieces {
    std::string_view head;      // "scheme://"
    std::string_view userinfo;  // before the authority's last '@' (without it)
    bool has_userinfo = false;  // an '@' was there (userinfo may still be empty)
    std::string_view hosts;     // after that '@', to the end of the authority
    std::string_view tail;      // "", or from the first '/', '?' or '#' on
};

// Nothing without "://".
inline bool split_url_pieces(std::string_view url, url_pieces& out) noexcept {
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) return false;
    out = {};
    out.head = url.substr(0, scheme_end + 3);
    url_authority a;
    (void)split_authority(url.substr(scheme_end + 3), a);
    out.tail = a.tail;
    const auto at = a.authority.rfind('@');
    out.has_userinfo = at != std::string_view::npos;
    out.userinfo = out.has_userinfo ? a.authority.substr(0, at) : std::string_view();
    out.hosts = out.has_userinfo ? a.authority.substr(at + 1) : a.authority;
    return true;
}

inline constexpr std::string_view misplaced_at_message =
    "unexpected '@' after the URL's host: percent-encode '/', '?' and '#' in the user name and "
    "password (as %2F, %3F and %23)";

}  // namespace corolock::detail
