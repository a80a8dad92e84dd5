// config: URL parsing, defaults and validation.
//
// The URL grammar is redis[s]://[user[:password]@]host[:port][/db][?query],
// and for Sentinel and Cluster redis[s]+sentinel://[userinfo@]hosts/SERVICE[/db]
// and redis[s]+cluster://[userinfo@]hosts, hosts being host[:port] separated
// by commas (config.hpp). The parser is strict (anything it does not understand is an error naming the
// problem) because a half-understood URL would connect somewhere else, or as
// someone else, than the caller meant. Error messages never contain the
// password, nor any text that may be a password.
#include <corolock/config.hpp>
#include <corolock/printable.hpp>

#include "core/url_authority.hpp"
#include "core/url_text.hpp"

#include <boost/asio/ip/address_v6.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

namespace corolock {

namespace {

using detail::iequals;
using detail::percent_decode_strict;

// Quotes a URL part for an error message, so that empty and odd values are
// visible. Only for parts that cannot hold a password.
std::string quoted(std::string_view s) {
    // Appended: g++ 12 at -O3 reports a false -Wrestrict for "\"" + string.
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    out.append(s);
    out.push_back('"');
    return out;
}

// Names one character for a message: printable ones as 'c', others by code
// (the callers have already refused control characters, but be safe).
std::string char_name(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f) return std::string("'") + c + "'";
    static constexpr char digits[] = "0123456789ABCDEF";
    return std::string("byte 0x") + digits[u >> 4] + digits[u & 0xf];
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

bool all_digits(std::string_view s) noexcept {
    for (char c : s)
        if (!is_digit(c)) return false;
    return !s.empty();
}

// scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), RFC 3986, 3.1.
bool is_scheme(std::string_view s) noexcept {
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (s.empty() || !alpha(s.front())) return false;
    for (char c : s)
        if (!alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return false;
    return true;
}

// Decodes %XX escapes. `what` names the part for the error message; the
// value itself is never echoed, because it may be a password.
bool percent_decode(std::string_view in, std::string& out, const char* what, std::string& why) {
    if (percent_decode_strict(in, out)) return true;
    why = std::string("malformed percent-escape in the URL's ") + what +
          " (expected %XX with two hex digits)";
    return false;
}

// A host name as DNS and /etc/hosts know it: letters, digits, '-', '.', and
// '_' (container and service-discovery names use it). Anything else, such as
// a stray '%' or '!', is more likely a typo than a name.
bool is_host_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' ||
           c == '.' || c == '_';
}

// What a URL's query may set besides TLS options.
struct query_extras {
    bool sentinel = false;  // sentinel_user and sentinel_password are allowed
    std::string sentinel_username;
    std::string sentinel_password;
};

// The query's key=value pairs ("a=1&b=2"), decoded, into tls and extras.
// Unknown keys and bad values are errors naming the key; values are never
// echoed.
bool apply_query(std::string_view query, bool tls_scheme, tls_config& tls, query_extras& extras,
                 std::string& why) {
    std::vector<std::string> seen;
    for (bool more = !query.empty(); more;) {
        const auto amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        more = amp != std::string_view::npos;
        if (more) query.remove_prefix(amp + 1);
        if (item.empty()) {
            why = "empty parameter in the URL's query (expected key=value&key=value)";
            return false;
        }
        const auto eq = item.find('=');
        std::string key, value;
        if (!percent_decode(item.substr(0, eq), key, "query", why)) return false;
        if (eq == std::string_view::npos) {
            why = "parameter " + quoted(printable(key)) +
                  " in the URL's query has no value (expected key=value)";
            return false;
        }
        if (!percent_decode(item.substr(eq + 1), value, "query", why)) return false;
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
            why = "parameter " + quoted(printable(key)) + " is given twice in the URL's query";
            return false;
        }
        seen.push_back(key);
        if (key == "sentinel_tls_server_name" && !extras.sentinel) {
            why = "parameter " + quoted(key) + " in the URL's query is for rediss+sentinel:// URLs";
            return false;
        }
        if (!tls_scheme && (key.rfind("tls_", 0) == 0 || key == "sentinel_tls_server_name")) {
            why = "TLS parameter " + quoted(printable(key)) +
                  " in a redis:// URL: use rediss:// for TLS";
            return false;
        }
        if (key == "sentinel_user" || key == "sentinel_password") {
            if (!extras.sentinel) {
                why = "parameter " + quoted(key) + " in the URL's query is for redis+sentinel:// URLs";
                return false;
            }
            if (value.empty()) {
                why = quoted(key) + " has an empty value (in the URL's query)";
                return false;
            }
            (key == "sentinel_user" ? extras.sentinel_username : extras.sentinel_password) =
                std::move(value);
            continue;
        }
        if (tls.set(key, value, why)) {
            why += " (in the URL's query)";
            return false;
        }
    }
    return true;
}

// One host[:port] of the URL's host list into out; `fallback` is the port
// of a host without one. On failure returns false with the reason in why.
bool parse_host(std::string_view hostport, std::uint16_t fallback, endpoint& out,
                std::string& why) {
    auto fail_host = [&](std::string reason) {
        why = std::move(reason);
        return false;
    };
    std::string host;
    std::string_view port_text;
    bool has_port = false;
    if (!hostport.empty() && hostport.front() == '[') {
        const auto close = hostport.find(']');
        if (close == std::string_view::npos)
            return fail_host("unbalanced '[' in the URL's host (an IPv6 address goes in [brackets])");
        host = std::string(hostport.substr(1, close - 1));
        const std::string_view after = hostport.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':')
                return fail_host("unexpected " + quoted(after) + " after the bracketed host");
            port_text = after.substr(1);
            has_port = true;
        }
        if (host.empty()) return fail_host("the URL has an empty host");
        // Brackets are for IPv6 literals only (RFC 3986, 3.2.2); a name or an
        // IPv4 address in them is a mistake worth reporting, not guessing at.
        boost::system::error_code aec;
        (void)boost::asio::ip::make_address_v6(host, aec);
        if (aec)
            return fail_host("the URL's bracketed host " + quoted(host) +
                        " is not an IPv6 address (write host names and IPv4 addresses "
                        "without brackets)");
    } else {
        if (hostport.find_first_of("[]") != std::string_view::npos)
            return fail_host("unbalanced bracket in the URL's host");
        const auto colon = hostport.find(':');
        if (colon != std::string_view::npos && hostport.find(':', colon + 1) != std::string_view::npos)
            return fail_host("an IPv6 host must go in brackets, e.g. redis://[::1]:6379");
        host = std::string(hostport.substr(0, colon));
        if (colon != std::string_view::npos) {
            port_text = hostport.substr(colon + 1);
            has_port = true;
        }
        if (host.empty()) return fail_host("the URL has an empty host");
        for (char c : host)
            if (!is_host_char(c)) return fail_host("invalid character " + char_name(c) + " in the URL's host");
    }

    std::uint16_t port = fallback;
    if (has_port) {
        if (port_text.empty()) return fail_host("empty port after ':' in the URL");
        // A port that is not a number is echoed only as "not a number":
        // "redis://user:secret" (the "@host" forgotten) parses as host "user"
        // with port "secret", and that is a password.
        if (!all_digits(port_text))
            return fail_host("invalid port in the URL: not a decimal number (expected 1-65535)");
        unsigned long value = 0;
        const auto [end, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
            value > 65535)
            return fail_host("invalid port " + quoted(port_text) + " in the URL: must be 1-65535");
        port = static_cast<std::uint16_t>(value);
    }

    out.host = std::move(host);
    out.port = port;
    return true;
}

}  // namespace

std::string tls_config::expected_name(peer to, std::string_view host) const {
    if (to == peer::sentinel && !sentinel_server_name.empty()) return sentinel_server_name;
    if (!server_name.empty()) return server_name;
    return std::string(host);
}

error_code tls_config::set(std::string_view key, std::string_view value, std::string& why) {
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_argument);
    };
    std::string* field = key == "tls_ca"                     ? &ca_file
                         : key == "tls_cert"                 ? &cert_file
                         : key == "tls_key"                  ? &key_file
                         : key == "tls_server_name"          ? &server_name
                         : key == "sentinel_tls_server_name" ? &sentinel_server_name
                                                             : nullptr;
    if (field != nullptr) {
        if (value.empty()) return fail(quoted(printable(key)) + " has an empty value");
        *field = std::string(value);
    } else if (key == "tls_verify") {
        if (value == "yes") verify_peer = true;
        else if (value == "no") verify_peer = false;
        else return fail("\"tls_verify\" must be yes or no");
    } else {
        // Only the key is echoed: a value may be a secret put in the wrong place.
        return fail("unknown parameter " + quoted(printable(key)) +
                    " (known: tls_ca, tls_cert, tls_key, tls_server_name, "
                    "sentinel_tls_server_name, tls_verify)");
    }
    why.clear();
    return {};
}

error_code config::parse_url(std::string_view url, config& out, std::string& why) {
    why.clear();
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_url);
    };

    // Everything is parsed into locals and copied into `out` only at the end,
    // so a failure leaves `out` as it was.
    if (url.empty()) return fail("the URL is empty: expected redis://host[:port][/db] or rediss://...");
    for (std::size_t i = 0; i < url.size(); ++i) {
        const auto c = static_cast<unsigned char>(url[i]);
        if (c <= 0x20 || c == 0x7f)
            return fail("the URL contains whitespace or a control character at offset " +
                        std::to_string(i));
    }

    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos)
        return fail("the URL has no scheme: expected redis://host[:port][/db] or rediss://...");
    const std::string_view scheme = url.substr(0, scheme_end);
    bool tls = false;
    topology mode = topology::single;
    // Schemes are case-insensitive (RFC 3986, 3.1).
    static constexpr std::pair<const char*, topology> topologies[] = {
        {"", topology::single}, {"+sentinel", topology::sentinel}, {"+cluster", topology::cluster}};
    bool known = false;
    for (const auto& [suffix, m] : topologies) {
        for (const bool t : {false, true}) {
            std::string name = t ? "rediss" : "redis";
            name += suffix;
            if (iequals(scheme, name)) {
                known = true;
                tls = t;
                mode = m;
            }
        }
    }
    if (!known) {
        // Text such as "user:secret@host/x://" has a "://" that is no
        // scheme's; what precedes it may hold a password, so it is not echoed.
        if (!is_scheme(scheme))
            return fail("the URL has no scheme: expected redis://host[:port][/db] or rediss://...");
        return fail("unsupported URL scheme " + quoted(scheme) +
                    ": expected redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or "
                    "rediss+cluster");
    }
    const std::string_view rest = url.substr(scheme_end + 3);

    detail::url_authority parts;
    if (!detail::split_authority(rest, parts)) return fail(std::string(detail::misplaced_at_message));
    const std::string_view authority = parts.authority;
    const std::string_view tail = parts.tail;
    if (tail.find('#') != std::string_view::npos)
        return fail("fragments ('#') are not supported in the URL");
    // The tail is empty, "/db", "?query" or "/db?query".
    const auto question = tail.find('?');
    const std::string_view path_part = tail.substr(0, question);
    const std::string_view query =
        question == std::string_view::npos ? std::string_view() : tail.substr(question + 1);
    const std::string_view path = path_part.empty() ? path_part : path_part.substr(1);
    tls_config tls_options = out.tls;
    query_extras extras;
    extras.sentinel = mode == topology::sentinel;
    if (!apply_query(query, tls, tls_options, extras, why)) return error::invalid_url;

    // userinfo@hostport. The last '@' separates them: a host cannot contain
    // '@', so a raw '@' in the password is unambiguous and tolerated.
    std::string username, password;
    std::string_view hostport = authority;  // the host list
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const std::string_view userinfo = authority.substr(0, at);
        hostport = authority.substr(at + 1);
        const auto colon = userinfo.find(':');
        if (!percent_decode(userinfo.substr(0, colon), username, "user name", why))
            return error::invalid_url;
        if (colon != std::string_view::npos &&
            !percent_decode(userinfo.substr(colon + 1), password, "password", why))
            return error::invalid_url;
        // The client sends AUTH only with a password, so a user name without
        // one would silently connect as "default": refuse it rather than
        // authenticate as someone the caller did not name.
        // The name is not echoed: in "redis://s3cret@host" the lone word
        // before '@' is far more likely a password than a user name.
        if (!username.empty() && password.empty()) {
            return fail(std::string("the URL has a user part") +
                        (colon == std::string_view::npos ? " without a password"
                                                         : " with an empty password") +
                        " (use user:password@ or :password@; the user part is not shown, as it "
                        "may be a password)");
        }
    }

    // The host list: one host for redis://, one or more (comma-separated)
    // for Sentinel and Cluster.
    std::vector<endpoint> nodes;
    const std::uint16_t fallback_port =
        mode == topology::sentinel ? default_sentinel_port : default_redis_port;
    for (bool more = true; more;) {
        const auto comma = hostport.find(',');
        more = comma != std::string_view::npos;
        endpoint e;
        if (!parse_host(hostport.substr(0, comma), fallback_port, e, why)) return error::invalid_url;
        if (std::find(nodes.begin(), nodes.end(), e) != nodes.end())
            return fail("the host " + quoted(e.host) + " port " + std::to_string(e.port) +
                        " is listed twice in the URL");
        nodes.push_back(std::move(e));
        if (more) hostport.remove_prefix(comma + 1);
    }
    if (mode == topology::single && nodes.size() > 1)
        return fail("a redis:// URL names one server: for several, use redis+sentinel:// (the "
                    "Sentinels) or redis+cluster:// (seed nodes)");

    // Sentinel: the path is SERVICE[/db]. Cluster: a cluster has only
    // database 0.
    std::string service;
    std::string_view db_path = path;
    if (mode == topology::sentinel) {
        const auto slash = path.find('/');
        std::string_view name = path.substr(0, slash);
        db_path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
        if (!percent_decode(name, service, "service name", why)) return error::invalid_url;
        if (service.empty())
            return fail("a redis+sentinel:// URL needs the service name after the hosts: "
                        "redis+sentinel://host:26379/SERVICE[/db]");
        for (char c : service) {
            const auto u = static_cast<unsigned char>(c);
            if (u < 0x20 || u == 0x7f)
                return fail("the URL's service name contains a control character");
        }
    } else if (mode == topology::cluster && !path.empty() && path != "0") {
        return fail("a Redis Cluster has only database 0: the redis+cluster:// URL's path must "
                    "be empty or /0");
    }

    // An empty path ("redis://h" or "redis://h/") is database 0.
    int database = 0;
    if (!db_path.empty()) {
        if (!all_digits(db_path))
            return fail("invalid database " + quoted(db_path) +
                        " in the URL: must be a non-negative decimal integer");
        // from_chars into int refuses anything that does not fit, which is
        // far beyond any real server's `databases` setting anyway.
        const auto [end, ec] =
            std::from_chars(db_path.data(), db_path.data() + db_path.size(), database);
        if (ec != std::errc() || end != db_path.data() + db_path.size())
            return fail("invalid database " + quoted(db_path) + " in the URL: out of range");
    }

    if (mode == topology::single) {
        out.host = std::move(nodes.front().host);
        out.port = nodes.front().port;
        out.nodes.clear();
    } else {
        // Unused in these modes; reset so nothing of an earlier URL lingers.
        out.host = config{}.host;
        out.port = config{}.port;
        out.nodes = std::move(nodes);
    }
    out.mode = mode;
    out.service_name = std::move(service);
    out.sentinel_username = std::move(extras.sentinel_username);
    out.sentinel_password = std::move(extras.sentinel_password);
    out.username = std::move(username);
    out.password = std::move(password);
    out.database = database;
    out.tls = std::move(tls_options);
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
    auto fill = [](duration& d, duration fallback) {
        if (d == duration::zero()) d = fallback;
    };
    using d = config_defaults;
    fill(c.connect_timeout, d::connect_timeout);
    fill(c.command_timeout, d::command_timeout);
    fill(c.health_check_interval, d::health_check_interval);
    fill(c.reconnect_min, d::reconnect_min);
    fill(c.reconnect_max, d::reconnect_max);
    if (c.max_bulk_length == 0) c.max_bulk_length = d::max_bulk_length;
    if (c.max_nesting_depth == 0) c.max_nesting_depth = d::max_nesting_depth;
    if (c.max_aggregate_size == 0) c.max_aggregate_size = d::max_aggregate_size;
    if (c.max_reply_size == 0) c.max_reply_size = d::max_reply_size;
    return c;
}

config& config::use_lock_only_limits() noexcept {
    // A Cluster client also reads the slot map (CLUSTER SHARDS, or CLUSTER
    // SLOTS): every slot range of every shard, up to 16384 ranges of two
    // numbers when the slots are fragmented, each number a reply node.
    const bool cluster = mode == topology::cluster;
    if (max_bulk_length == 0) max_bulk_length = 64u * 1024;
    if (max_aggregate_size == 0) max_aggregate_size = cluster ? 2u * 16384 : 1024;
    if (max_nesting_depth == 0) max_nesting_depth = 4;
    if (max_reply_size == 0) max_reply_size = cluster ? 8u * 1024 * 1024 : 1024u * 1024;
    return *this;
}

error_code config::validate(std::string& why) const {
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_argument);
    };
    if (mode == topology::single) {
        if (host.empty()) return fail("config.host is empty");
        if (port == 0) return fail("config.port is 0");
    } else {
        if (nodes.empty())
            return fail(mode == topology::sentinel ? "config.nodes is empty: name the Sentinels"
                                                   : "config.nodes is empty: name seed nodes");
        for (const auto& n : nodes)
            if (n.host.empty() || n.port == 0)
                return fail("config.nodes has an empty host or port 0");
        if (mode == topology::sentinel && service_name.empty())
            return fail("config.service_name is empty: name the primary the Sentinels monitor");
        if (mode == topology::cluster && database != 0)
            return fail("config.database must be 0 for a Redis Cluster");
    }
    if (database < 0) return fail("config.database is negative");
    const std::pair<const char*, duration> durations[] = {
        {"connect_timeout", connect_timeout},
        {"command_timeout", command_timeout},
        {"health_check_interval", health_check_interval},
        {"reconnect_min", reconnect_min},
        {"reconnect_max", reconnect_max},
    };
    for (const auto& [name, d] : durations)
        if (d < duration::zero()) return fail(std::string("config.") + name + " is negative");
    // Compared after defaults: a reconnect_min above the default cap with
    // reconnect_max unset is as wrong as with that cap set explicitly.
    const config full = with_defaults();
    if (full.reconnect_min > full.reconnect_max)
        return fail("config.reconnect_min is above config.reconnect_max (after defaults: "
                    "reconnect_max defaults to " +
                    std::to_string(std::chrono::milliseconds(config_defaults::reconnect_max).count()) +
                    " ms)");
    // A certificate without its key (or the reverse) cannot be loaded; say so
    // here rather than as an OpenSSL error at connect time.
    if (tls.cert_file.empty() != tls.key_file.empty())
        return fail("config.tls.cert_file and config.tls.key_file must be given together");
    why.clear();
    return {};
}

}  // namespace corolock
