#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <charconv>
#include <limits>

namespace corolock {

namespace {

using namespace std::chrono_literals;

constexpr auto default_connect_timeout = 5s;
constexpr auto default_command_timeout = 3s;
constexpr auto default_health_check_interval = 2s;
constexpr auto default_reconnect_min = 50ms;
constexpr auto default_reconnect_max = 2s;
constexpr std::size_t default_max_bulk_length = 512u * 1024 * 1024;
constexpr std::size_t default_max_nesting_depth = 32;
constexpr std::size_t default_max_aggregate_size = 16u * 1024 * 1024;

// Quotes a URL part for an error message, so that empty and odd values are
// visible.
std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Decodes %XX escapes. `what` names the part for the error message; the
// value itself is never echoed, because it may be a password.
bool percent_decode(std::string_view in, std::string& out, const char* what, std::string& why) {
    out.clear();
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out.push_back(in[i]);
            continue;
        }
        const bool complete = i + 2 < in.size();
        const int hi = complete ? hex_value(in[i + 1]) : -1;
        const int lo = complete ? hex_value(in[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            why = std::string("malformed percent-escape in the URL's ") + what +
                  " (expected %XX with two hex digits)";
            return false;
        }
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return true;
}

template <class Int>
bool parse_decimal(std::string_view s, Int& out) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

// True when `d` is zero, so the default applies.
template <class D>
bool unset(D d) noexcept { return d.count() == 0; }

}  // namespace

error_code config::parse_url(std::string_view url, config& out, std::string& why) {
    why.clear();
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_url);
    };

    for (unsigned char c : url) {
        if (c <= 0x20 || c == 0x7f)
            return fail("the URL contains whitespace or a control character");
    }

    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos)
        return fail("the URL has no scheme: expected redis://host[:port][/db] or rediss://...");
    const std::string_view scheme = url.substr(0, scheme_end);
    bool tls = false;
    if (scheme == "redis") {
        tls = false;
    } else if (scheme == "rediss") {
        tls = true;
    } else {
        return fail("unsupported URL scheme " + quoted(scheme) + ": expected redis or rediss");
    }
    std::string_view rest = url.substr(scheme_end + 3);

    if (rest.find_first_of("?#") != std::string_view::npos)
        return fail("query strings and fragments are not supported in the URL");

    // authority [/db]
    const auto slash = rest.find('/');
    const std::string_view authority = rest.substr(0, slash);
    const std::string_view path =
        slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);

    // userinfo@hostport: the last '@' separates them, since a password may
    // contain '@' only percent-encoded, but be lenient about a raw one.
    std::string username, password;
    std::string_view hostport = authority;
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const std::string_view userinfo = authority.substr(0, at);
        hostport = authority.substr(at + 1);
        const auto colon = userinfo.find(':');
        if (!percent_decode(userinfo.substr(0, colon), username, "user name", why))
            return error::invalid_url;
        if (colon != std::string_view::npos &&
            !percent_decode(userinfo.substr(colon + 1), password, "password", why))
            return error::invalid_url;
        if (colon == std::string_view::npos && !username.empty()) {
            // redis://secret@host: a bare userinfo is a password in the
            // Redis URL convention only with a leading ':'; a lone name
            // without a password cannot authenticate.
            return fail("the URL names user " + quoted(username) +
                        " without a password (use user:password@ or :password@)");
        }
    }

    std::string host;
    std::string_view port_text;
    bool has_port = false;
    if (!hostport.empty() && hostport.front() == '[') {
        const auto close = hostport.find(']');
        if (close == std::string_view::npos)
            return fail("unbalanced '[' in the URL's host (an IPv6 address goes in [brackets])");
        host = std::string(hostport.substr(1, close - 1));
        const std::string_view after = hostport.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':')
                return fail("unexpected " + quoted(after) + " after the bracketed host");
            port_text = after.substr(1);
            has_port = true;
        }
        if (host.empty()) return fail("the URL has an empty host");
    } else {
        if (hostport.find_first_of("[]") != std::string_view::npos)
            return fail("unbalanced bracket in the URL's host");
        const auto colon = hostport.find(':');
        if (colon != std::string_view::npos && hostport.find(':', colon + 1) != std::string_view::npos)
            return fail("an IPv6 host must go in brackets, e.g. redis://[::1]:6379");
        host = std::string(hostport.substr(0, colon));
        if (colon != std::string_view::npos) {
            port_text = hostport.substr(colon + 1);
            has_port = true;
        }
        if (host.empty()) return fail("the URL has an empty host");
    }

    std::uint16_t port = 6379;
    if (has_port) {
        unsigned long value = 0;
        if (port_text.empty()) return fail("empty port after ':' in the URL");
        if (!parse_decimal(port_text, value) || value == 0 || value > 65535)
            return fail("invalid port " + quoted(port_text) + " in the URL: must be 1-65535");
        port = static_cast<std::uint16_t>(value);
    }

    int database = 0;
    if (!path.empty()) {
        if (!parse_decimal(path, database) || database < 0)
            return fail("invalid database " + quoted(path) +
                        " in the URL: must be a non-negative integer");
    }

    out.host = std::move(host);
    out.port = port;
    out.username = std::move(username);
    out.password = std::move(password);
    out.database = database;
    out.tls.enabled = tls;
    return {};
}

config config::from_url(std::string_view url) {
    config cfg;
    std::string why;
    if (auto ec = parse_url(url, cfg, why); ec) throw boost::system::system_error(ec, why);
    return cfg;
}

config config::with_defaults() const {
    config c = *this;
    if (unset(c.connect_timeout)) c.connect_timeout = default_connect_timeout;
    if (unset(c.command_timeout)) c.command_timeout = default_command_timeout;
    if (unset(c.health_check_interval)) c.health_check_interval = default_health_check_interval;
    if (unset(c.reconnect_min)) c.reconnect_min = default_reconnect_min;
    if (unset(c.reconnect_max)) c.reconnect_max = default_reconnect_max;
    if (c.max_bulk_length == 0) c.max_bulk_length = default_max_bulk_length;
    if (c.max_nesting_depth == 0) c.max_nesting_depth = default_max_nesting_depth;
    if (c.max_aggregate_size == 0) c.max_aggregate_size = default_max_aggregate_size;
    return c;
}

error_code config::validate(std::string& why) const {
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_argument);
    };
    if (host.empty()) return fail("config.host is empty");
    if (port == 0) return fail("config.port is 0");
    if (database < 0) return fail("config.database is negative");
    const std::pair<const char*, duration> durations[] = {
        {"connect_timeout", connect_timeout},
        {"command_timeout", command_timeout},
        {"health_check_interval", health_check_interval},
        {"reconnect_min", reconnect_min},
        {"reconnect_max", reconnect_max},
    };
    for (const auto& [name, d] : durations)
        if (d.count() < 0) return fail(std::string("config.") + name + " is negative");
    const config full = with_defaults();
    if (full.reconnect_min > full.reconnect_max)
        return fail("config.reconnect_min is above config.reconnect_max");
    if (tls.cert_file.empty() != tls.key_file.empty())
        return fail("config.tls.cert_file and config.tls.key_file must be given together");
    why.clear();
    return {};
}

}  // namespace corolock
