// What in a lock service's URL is a credential, for every scheme: the one
// home of the rule that keeps secrets out of messages, logs and the
// environment of a command corolock runs (docs/security.md). Not installed.
#pragma once

#include <charconv>
#include <string>
#include <string_view>

namespace corolock::detail {

// A query key (%-decoded, as the URL's parser reads it) whose value is a
// credential, or names whose credential it is: PostgreSQL's `password` and
// `sslpassword` (the client key's passphrase), Sentinel's `sentinel_user`
// and `sentinel_password`. The user-info part (user:password@) is one too.
inline bool is_credential_query_key(std::string_view key) noexcept {
    return key == "password" || key == "sslpassword" || key == "sentinel_user" ||
           key == "sentinel_password";
}

// %XX escapes decoded; a '%' not followed by two hex digits is kept as is
// (the URL's parser refuses it, or reads it the same way).
inline std::string percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned v = 0;
        if (s[i] == '%' && i + 3 <= s.size() &&
            std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr == s.data() + i + 3) {
            out += static_cast<char>(v);
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Every byte but RFC 3986's unreserved ones (letters, digits, "-._~") as
// %XX: a password put into a URL's user part.
inline std::string percent_encode(std::string_view s) {
    constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                c == '~';
        if (unreserved) {
            out.push_back(ch);
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 0xf]);
        }
    }
    return out;
}

}  // namespace corolock::detail
