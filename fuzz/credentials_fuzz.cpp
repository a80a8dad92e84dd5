// Fuzz target for core/credentials.hpp: percent_decode undoes
// percent_encode for any bytes; percent_encode writes only RFC 3986's
// unreserved bytes and upper-case %XX; percent_decode agrees with a
// reference decoder (a '%' with two hex digits is one byte, anything else
// is kept) and never lengthens its input; is_credential_query_key names
// exactly the four credential keys.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "core/credentials.hpp"

#include <string>
#include <string_view>

namespace {

using corolock::detail::is_credential_query_key;
using corolock::detail::percent_decode;
using corolock::detail::percent_encode;

bool unreserved(char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string reference_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 &&
            hex_digit(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

}  // namespace

int corolock_fuzz_credentials(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);

    const std::string encoded = percent_encode(bytes);
    FUZZ_REQUIRE(percent_decode(encoded) == bytes);
    for (std::size_t i = 0; i < encoded.size(); ++i) {
        if (unreserved(encoded[i])) continue;
        FUZZ_REQUIRE(encoded[i] == '%' && i + 2 < encoded.size());
        for (const char h : {encoded[i + 1], encoded[i + 2]})
            FUZZ_REQUIRE(hex_digit(h) >= 0 && !(h >= 'a' && h <= 'f'));
        i += 2;
    }

    const std::string decoded = percent_decode(bytes);
    FUZZ_REQUIRE(decoded == reference_decode(bytes));
    FUZZ_REQUIRE(decoded.size() <= bytes.size());

    const bool credential = bytes == "password" || bytes == "sslpassword" ||
                            bytes == "sentinel_user" || bytes == "sentinel_password";
    FUZZ_REQUIRE(is_credential_query_key(bytes) == credential);
    return 0;
}
