#include "core/url.hpp"

#include <corolock/printable.hpp>

#include <boost/asio/ip/address_v6.hpp>

#include <algorithm>
#include <charconv>

namespace corolock::detail {

namespace {

// Names one character for a message: printable ones as 'c', others by code.
std::string char_name(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f) return std::string("'") + c + "'";
    static constexpr char digits[] = "0123456789ABCDEF";
    return std::string("byte 0x") + digits[u >> 4] + digits[u & 0xf];
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

bool all_digits(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// A host name as DNS and /etc/hosts know it: letters, digits, '-', '.', and
// '_' (container and service-discovery names use it). Anything else, such as
// a stray '%' or '!', is more likely a typo than a name.
bool is_host_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' ||
           c == '.' || c == '_';
}

bool fail(std::string& why, std::string reason) {
    why = std::move(reason);
    return false;
}

// Strict %-decoding; the message names the part, never its text.
bool decode(std::string_view in, std::string& out, const char* what, std::string& why) {
    if (percent_decode_strict(in, out)) return true;
    return fail(why, std::string("malformed percent-escape in the URL's ") + what +
                         " (expected %XX with two hex digits)");
}

}  // namespace

bool is_url_scheme(std::string_view s) noexcept {
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (s.empty() || !alpha(s.front())) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) {
        return alpha(c) || is_digit(c) || c == '+' || c == '-' || c == '.';
    });
}

bool split_url(std::string_view url, std::string_view expected, url_parts& out, std::string& why) {
    const std::string hint = " (expected " + std::string(expected) + ")";
    if (url.empty()) return fail(why, "the URL is empty" + hint);
    for (std::size_t i = 0; i < url.size(); ++i) {
        const auto c = static_cast<unsigned char>(url[i]);
        if (c <= 0x20 || c == 0x7f)
            return fail(why, "the URL contains whitespace or a control character at offset " +
                                 std::to_string(i));
    }
    const auto scheme_end = url.find("://");
    // "redis:/host": a scheme that lost a '/', said as what it is. Nothing
    // of the URL is repeated (what follows the ':' may be a password).
    if (const auto colon = url.find(':');
        scheme_end == std::string_view::npos && colon != std::string_view::npos &&
        is_url_scheme(url.substr(0, colon)) && url.substr(colon + 1, 1) == "/")
        return fail(why, "the scheme is followed by ':/' instead of '://'" + hint);
    // Text such as "user:secret@host/x://" has a "://" that is no scheme's;
    // what precedes it may hold a password, so it is not echoed.
    if (scheme_end == std::string_view::npos || !is_url_scheme(url.substr(0, scheme_end)))
        return fail(why, "the URL has no scheme" + hint);
    url_parts p;
    p.scheme = url.substr(0, scheme_end);
    url_authority a;
    if (!split_authority(url.substr(scheme_end + 3), a))
        return fail(why, std::string(misplaced_at_message));
    if (a.tail.find('#') != std::string_view::npos)
        return fail(why, "fragments ('#') are not supported in the URL (a '#' in a path or value "
                         "is written %23)");
    const auto question = a.tail.find('?');
    p.path = a.tail.substr(0, question);
    p.query = question == std::string_view::npos ? std::string_view() : a.tail.substr(question + 1);
    // userinfo@hosts. The last '@' separates them: a host cannot hold '@',
    // so a raw '@' in the password is unambiguous and tolerated.
    const auto at = a.authority.rfind('@');
    p.has_userinfo = at != std::string_view::npos;
    p.userinfo = p.has_userinfo ? a.authority.substr(0, at) : std::string_view();
    p.hosts = p.has_userinfo ? a.authority.substr(at + 1) : a.authority;
    out = p;
    return true;
}

bool decode_userinfo(std::string_view userinfo, url_credentials& out, std::string& why) {
    url_credentials c;
    const auto colon = userinfo.find(':');
    if (!decode(userinfo.substr(0, colon), c.user, "user name", why)) return false;
    c.has_password = colon != std::string_view::npos;
    if (c.has_password && !decode(userinfo.substr(colon + 1), c.password, "password", why))
        return false;
    out = std::move(c);
    return true;
}

bool parse_url_host(std::string_view text, std::optional<std::uint16_t> fallback,
                    std::string_view example, url_host& out, std::string& why) {
    std::string host;
    std::string_view port_text;
    bool has_port = false;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string_view::npos)
            return fail(why, "unbalanced '[' in the URL's host (an IPv6 address goes in "
                             "[brackets])");
        host = std::string(text.substr(1, close - 1));
        const std::string_view after = text.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':')
                return fail(why, "unexpected " + quoted(after) + " after the bracketed host");
            port_text = after.substr(1);
            has_port = true;
        }
        if (host.empty()) return fail(why, "the URL has an empty host");
        // Brackets are for IPv6 literals only (RFC 3986, 3.2.2); a name or an
        // IPv4 address in them is a mistake worth reporting, not guessing at.
        boost::system::error_code aec;
        (void)boost::asio::ip::make_address_v6(host, aec);
        if (aec)
            return fail(why, "the URL's bracketed host " + quoted(host) +
                                 " is not an IPv6 address (write host names and IPv4 addresses "
                                 "without brackets)");
    } else {
        if (text.find_first_of("[]") != std::string_view::npos)
            return fail(why, "unbalanced bracket in the URL's host");
        const auto colon = text.find(':');
        if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos)
            return fail(why, "an IPv6 host must go in brackets, e.g. [::1]:port");
        host = std::string(text.substr(0, colon));
        if (colon != std::string_view::npos) {
            port_text = text.substr(colon + 1);
            has_port = true;
        }
        if (host.empty()) return fail(why, "the URL has an empty host");
        for (char c : host)
            if (!is_host_char(c))
                return fail(why, "invalid character " + char_name(c) + " in the URL's host");
    }

    std::uint16_t port = fallback.value_or(0);
    if (has_port) {
        if (port_text.empty()) return fail(why, "empty port after ':' in the URL");
        // A port that is not a number is echoed only as "not a number":
        // "redis://user:secret" (the "@host" forgotten) reads as host "user"
        // with port "secret", and that is a password.
        if (!all_digits(port_text))
            return fail(why, "invalid port in the URL: not a decimal number (expected 1-65535)");
        unsigned long value = 0;
        const auto [end, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
            value > 65535)
            return fail(why, "invalid port " + quoted(port_text) + " in the URL: must be 1-65535");
        port = static_cast<std::uint16_t>(value);
    } else if (!fallback) {
        return fail(why, "each host needs a port: " + std::string(example));
    }
    out.host = std::move(host);
    out.port = port;
    out.text = text;
    return true;
}

bool parse_url_hosts(std::string_view hosts, std::optional<std::uint16_t> fallback,
                     std::string_view example, std::vector<url_host>& out, std::string& why) {
    std::vector<url_host> list;
    const bool several = hosts.find(',') != std::string_view::npos;
    for (bool more = true; more;) {
        const auto comma = hosts.find(',');
        more = comma != std::string_view::npos;
        url_host h;
        if (!parse_url_host(hosts.substr(0, comma), fallback, example, h, why)) {
            // In a list, which host: "host 3 of the URL's host list: ...".
            if (several)
                why = "host " + std::to_string(list.size() + 1) + " of the URL's host list: " + why;
            return false;
        }
        list.push_back(std::move(h));
        if (more) hosts.remove_prefix(comma + 1);
    }
    out = std::move(list);
    return true;
}

bool parse_url_query(std::string_view query, std::vector<url_param>& out, std::string& why) {
    std::vector<url_param> params;
    for (bool more = !query.empty(); more;) {
        const auto amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        more = amp != std::string_view::npos;
        if (more) query.remove_prefix(amp + 1);
        if (item.empty())
            return fail(why, "empty parameter in the URL's query (expected key=value&key=value)");
        const auto eq = item.find('=');
        url_param p;
        p.text = item;
        if (!decode(item.substr(0, eq), p.key, "query", why)) return false;
        if (eq == std::string_view::npos)
            return fail(why, "parameter " + quoted(printable(p.key)) +
                                 " in the URL's query has no value (expected key=value)");
        if (!decode(item.substr(eq + 1), p.value, "query", why)) return false;
        if (std::any_of(params.begin(), params.end(),
                        [&](const url_param& q) { return q.key == p.key; }))
            return fail(why, "parameter " + quoted(printable(p.key)) +
                                 " is given twice in the URL's query");
        params.push_back(std::move(p));
    }
    out = std::move(params);
    return true;
}

bool parse_url_milliseconds(const url_param& p, std::chrono::milliseconds min,
                            std::chrono::milliseconds max, std::chrono::milliseconds& out,
                            std::string& why) {
    long long ms = 0;
    const auto& v = p.value;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || ms < min.count() ||
        ms > max.count())
        return fail(why, quoted(printable(p.key)) + " must be a whole number of milliseconds from " +
                             std::to_string(min.count()) + " to " + std::to_string(max.count()));
    out = std::chrono::milliseconds(ms);
    return true;
}

std::string unknown_url_option(std::string_view key, std::string_view known) {
    return "unknown URL option " + quoted(printable(key.substr(0, 32))) + " (known: " +
           std::string(known) + ")";
}

}  // namespace corolock::detail
