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

#include "core/url.hpp"

#include <boost/asio/ip/address_v6.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

namespace corolock {

namespace {

using detail::iequals;
using detail::quoted;
using detail::percent_decode_strict;

bool all_digits(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What a URL's query may set besides TLS options.
struct query_extras {
    bool sentinel = false;  // sentinel_user and sentinel_password are allowed
    std::string sentinel_username;
    std::string sentinel_password;
};

// The query's parameters (core/url.hpp has refused empty, duplicate and
// badly escaped ones) into tls and extras. Unknown keys and bad values are
// errors naming the key; values are never echoed.
bool apply_query(std::vector<detail::url_param> params, bool tls_scheme, tls_config& tls,
                 query_extras& extras, std::string& why) {
    for (auto& p : params) {
        const std::string& key = p.key;
        std::string& value = p.value;
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
    detail::url_parts parts;
    if (!detail::split_url(url, "redis://host[:port][/db] or rediss://...", parts, why))
        return error::invalid_url;
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
            if (iequals(parts.scheme, name)) {
                known = true;
                tls = t;
                mode = m;
            }
        }
    }
    if (!known)
        return fail("unsupported URL scheme " + quoted(parts.scheme) +
                    ": expected redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or "
                    "rediss+cluster");
    // The path is empty, "/db", or for Sentinel "/SERVICE[/db]".
    const std::string_view path = parts.path.empty() ? parts.path : parts.path.substr(1);
    std::vector<detail::url_param> params;
    if (!detail::parse_url_query(parts.query, params, why)) return error::invalid_url;
    tls_config tls_options = out.tls;
    query_extras extras;
    extras.sentinel = mode == topology::sentinel;
    if (!apply_query(std::move(params), tls, tls_options, extras, why)) return error::invalid_url;

    std::string username, password;
    if (parts.has_userinfo) {
        detail::url_credentials c;
        if (!detail::decode_userinfo(parts.userinfo, c, why)) return error::invalid_url;
        // The client sends AUTH only with a password, so a user name without
        // one would silently connect as "default": refuse it rather than
        // authenticate as someone the caller did not name.
        // The name is not echoed: in "redis://s3cret@host" the lone word
        // before '@' is far more likely a password than a user name.
        if (!c.user.empty() && c.password.empty()) {
            return fail(std::string("the URL has a user part") +
                        (c.has_password ? " with an empty password" : " without a password") +
                        " (use user:password@ or :password@; the user part is not shown, as it "
                        "may be a password)");
        }
        username = std::move(c.user);
        password = std::move(c.password);
    }

    // The host list: one host for redis://, one or more (comma-separated)
    // for Sentinel and Cluster.
    std::vector<endpoint> nodes;
    const std::uint16_t fallback_port =
        mode == topology::sentinel ? default_sentinel_port : default_redis_port;
    std::vector<detail::url_host> hosts;
    if (!detail::parse_url_hosts(parts.hosts, fallback_port, {}, hosts, why))
        return error::invalid_url;
    for (auto& h : hosts) {
        endpoint e{std::move(h.host), h.port};
        if (std::find(nodes.begin(), nodes.end(), e) != nodes.end())
            return fail("the host " + quoted(e.host) + " port " + std::to_string(e.port) +
                        " is listed twice in the URL");
        nodes.push_back(std::move(e));
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
        if (!percent_decode_strict(name, service))
            return fail("malformed percent-escape in the URL's service name (expected %XX with two "
                        "hex digits)");
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
