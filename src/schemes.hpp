// Which backend a URL's scheme names: the one table that src/connect.cpp
// (the library's entry point) and the corolock tool both read. Not
// installed.
#pragma once

#include <string>
#include <string_view>

namespace corolock::detail {

enum class scheme_family { redis, etcd, zk, postgresql, redlock, unknown };

struct scheme_entry {
    std::string_view name;  // lower case, as compared
    scheme_family family;
};

inline constexpr scheme_entry schemes[] = {
    {"redis", scheme_family::redis},
    {"rediss", scheme_family::redis},
    {"redis+sentinel", scheme_family::redis},
    {"rediss+sentinel", scheme_family::redis},
    {"redis+cluster", scheme_family::redis},
    {"rediss+cluster", scheme_family::redis},
    {"redlock", scheme_family::redlock},
    {"redlock+redis", scheme_family::redlock},
    {"redlock+rediss", scheme_family::redlock},
    {"etcd", scheme_family::etcd},
    {"etcds", scheme_family::etcd},
    {"zk", scheme_family::zk},
    {"postgresql", scheme_family::postgresql},
    {"postgres", scheme_family::postgresql},
};

// The URL's scheme in lower case, when it is one (RFC 3986, 3.1); empty
// when the URL has none. Text before a "://" that is no scheme may hold a
// password, so it is never echoed. A scheme of the table followed by ':/'
// ("redis:/host") counts: its parser reports the lost '/'.
std::string scheme_of(std::string_view url);

// The family of a URL: no scheme is Redis (host:port, the Redis parser
// explains what is wrong); a scheme not in the table is unknown.
scheme_family family_of(std::string_view url);

// For messages: "redis, rediss, ..., postgres", in the table's order.
std::string accepted_schemes();

}  // namespace corolock::detail
