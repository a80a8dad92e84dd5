// The options every command takes (--url, --password-file, the --tls-*
// options, -v, -h) and the URL they lead to: --url, else $REDIS_URL, else
// the default, checked by its service's own parser, with the password and
// TLS options applied; several --url or a redlock:// URL: a RedLock's
// nodes. Also how a server and a URL read in messages (never a password).
#include "arguments.hpp"
#include "cli.hpp"

#include <corolock/url.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace corolock::cli {

namespace {

// The library's URL messages quote some parts of the URL ("the URL names
// user "s3cret" without a password"): what was meant as a user name is
// often a password written without its ':'. Every quoted part is dropped,
// so nothing of the URL is ever repeated.
std::string redact_quoted(std::string_view why) {
    std::string out;
    bool inside = false;
    for (char c : why) {
        if (c == '"') {
            if (!inside) out += "(not shown)";
            inside = !inside;
            continue;
        }
        if (!inside) out.push_back(c);
    }
    // An unbalanced quote: the tail may be part of the URL; drop the message.
    if (inside) return "the URL cannot be parsed";
    return out;
}

}  // namespace

void add_common_options(CLI::App& app, common_slots& s) {
    // CLI11's own --help prints CLI11's text, not help.cpp's.
    app.set_help_flag();
    app.allow_extras();  // unknown options are reported below, in our words
    flag_option(app, "-h,--help", s.help);
    flag_option(app, "-v,--verbose", s.verbose);
    app.add_option("--url", s.urls)->take_all()->expected(1)->allow_extra_args(false);
    value_option(app, "--password-file", s.password_file);
    value_option(app, "--tls-ca", s.tls_ca);
    value_option(app, "--tls-cert", s.tls_cert);
    value_option(app, "--tls-key", s.tls_key);
    value_option(app, "--tls-server-name", s.tls_server_name);
    value_option(app, "--sentinel-tls-server-name", s.sentinel_tls_server_name);
    flag_option(app, "--tls-insecure", s.tls_insecure);
}

std::optional<usage_error> read_common_options(const std::string& command, const common_slots& s,
                                               common_options& o, credential_options& cred) {
    auto text = [&](const value_slot& slot,
                    std::optional<std::string>& out) -> std::optional<usage_error> {
        if (!slot) return std::nullopt;
        if (slot->value.empty())
            return usage_error{command, "option " + slot->option + " needs a value"};
        out = slot->value;
        return std::nullopt;
    };
    for (auto [slot, out] : {std::pair{&s.password_file, &cred.password_file},
                             std::pair{&s.tls_ca, &cred.tls_ca},
                             std::pair{&s.tls_cert, &cred.tls_cert},
                             std::pair{&s.tls_key, &cred.tls_key},
                             std::pair{&s.tls_server_name, &cred.tls_server_name},
                             std::pair{&s.sentinel_tls_server_name,
                                       &cred.sentinel_tls_server_name}})
        if (auto e = text(*slot, *out); e) return e;
    cred.tls_insecure = s.tls_insecure > 0;
    o.verbosity = s.verbose;
    return std::nullopt;
}

namespace {

// The password in a file: its first line, without the line end.
std::optional<usage_error> read_password_file(const std::string& command, const std::string& path,
                                              std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int err = errno;
        return usage_error{command, "cannot read --password-file " + single_quoted(path) + ": " +
                                        std::strerror(err != 0 ? err : EIO)};
    }
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty())
        return usage_error{command, "--password-file " + single_quoted(path) +
                                        " is empty (the password is its first line)"};
    out = std::move(line);
    return std::nullopt;
}

// A URL with a user name and no password ("redis://alice@host") is refused
// by the library, but is what one writes when the password comes from
// --password-file or COROLOCK_PASSWORD: parse it with a stand-in password.
std::string with_password_slot(std::string_view url) {
    return url_with_password(url, "-").value_or(std::string(url));
}

std::optional<usage_error> apply_credentials(const std::string& command,
                                             const credential_options& cred, common_options& o) {
    config& cfg = o.cfg;
    if (cred.password_file) {
        if (auto e = read_password_file(command, *cred.password_file, cfg.password); e) return e;
    } else if (const char* env = std::getenv("COROLOCK_PASSWORD"); env != nullptr && *env != 0) {
        cfg.password = env;
    }
    if (cred.any_tls()) cfg.tls.enabled = true;
    // Each option sets the field its URL query key sets (tls_config::set).
    auto set = [&](const std::optional<std::string>& value, const char* option,
                   std::string_view key) -> std::optional<usage_error> {
        if (!value) return std::nullopt;
        std::string why;
        if (cfg.tls.set(key, *value, why)) return usage_error{command, option + (": " + why)};
        return std::nullopt;
    };
    // A file from an option or from the URL's query, checked now rather than
    // when the client loads it. A URL's parts are never repeated.
    auto readable = [&](const std::string& file, const std::optional<std::string>& from_option,
                        const char* option, const char* key) -> std::optional<usage_error> {
        if (file.empty() || ::access(file.c_str(), R_OK) == 0) return std::nullopt;
        const std::string err = std::strerror(errno);
        if (from_option)
            return usage_error{command, std::string("cannot read ") + option + " " + single_quoted(file) +
                                            ": " + err};
        return usage_error{command,
                           std::string("cannot read the file in the URL's ") + key + ": " + err};
    };
    if (cred.tls_cert.has_value() != cred.tls_key.has_value())
        return usage_error{command, "--tls-cert and --tls-key go together (a client certificate "
                                    "and its private key)"};
    if (auto e = set(cred.tls_ca, "--tls-ca", "tls_ca"); e) return e;
    if (auto e = set(cred.tls_cert, "--tls-cert", "tls_cert"); e) return e;
    if (auto e = set(cred.tls_key, "--tls-key", "tls_key"); e) return e;
    if (auto e = set(cred.tls_server_name, "--tls-server-name", "tls_server_name"); e) return e;
    if (cred.sentinel_tls_server_name && cfg.mode != topology::sentinel)
        return usage_error{command, "--sentinel-tls-server-name applies to Sentinel URLs only "
                                    "(rediss+sentinel://): it is the name the Sentinels' "
                                    "certificates must carry"};
    if (auto e = set(cred.sentinel_tls_server_name, "--sentinel-tls-server-name",
                     "sentinel_tls_server_name");
        e)
        return e;
    if (cred.tls_insecure) {
        if (auto e = set(std::string("no"), "--tls-insecure", "tls_verify"); e) return e;
    }
    if (auto e = readable(cfg.tls.ca_file, cred.tls_ca, "--tls-ca", "tls_ca"); e) return e;
    if (auto e = readable(cfg.tls.cert_file, cred.tls_cert, "--tls-cert", "tls_cert"); e) return e;
    if (auto e = readable(cfg.tls.key_file, cred.tls_key, "--tls-key", "tls_key"); e) return e;
    return std::nullopt;
}

// A URL of etcd, ZooKeeper or PostgreSQL: checked here with the backend's
// own parser (describe_url), so that a typo is a usage error before
// anything starts. The Redis-only options are refused by name rather than
// ignored: these take their credentials and TLS settings in the URL
// (ZooKeeper its password from --password-file too, and no TLS).
std::optional<usage_error> resolve_store_url(const std::string& command, common_options& o,
                                             const credential_options& cred) {
    // ZooKeeper's digest password may come from --password-file or
    // COROLOCK_PASSWORD, as Redis's does, for a URL that names its user.
    const char* env_password = std::getenv("COROLOCK_PASSWORD");
    if (env_password != nullptr && *env_password == 0) env_password = nullptr;
    if (o.kind == url_kind::zk && (cred.password_file || env_password)) {
        if (!url_with_password(o.url, {})) {
            if (cred.password_file)
                return usage_error{command, "--password-file needs the user in the ZooKeeper URL "
                                            "(zk://USER@HOST:PORT[/ROOT])"};
        } else {
            std::string password;
            if (cred.password_file) {
                if (auto e = read_password_file(command, *cred.password_file, password); e)
                    return e;
            } else {
                password = env_password;
            }
            o.url = *url_with_password(o.url, password);
        }
    }
    const bool zk_password = o.kind == url_kind::zk && cred.password_file;
    const char* redis_only = cred.password_file && !zk_password ? "--password-file"
                             : cred.tls_ca      ? "--tls-ca"
                             : cred.tls_cert    ? "--tls-cert"
                             : cred.tls_key     ? "--tls-key"
                             : cred.tls_server_name ? "--tls-server-name"
                             : cred.sentinel_tls_server_name ? "--sentinel-tls-server-name"
                             : cred.tls_insecure ? "--tls-insecure"
                                                 : nullptr;
    const char* instead =
        o.kind == url_kind::etcd ? "for etcd, give the user and password in the URL "
                                   "(etcd://USER:PASSWORD@HOST:PORT) and TLS as "
                                   "etcds://HOST:PORT[?ca_file=PATH]"
        : o.kind == url_kind::zk ? "ZooKeeper takes its digest credentials in the URL "
                                   "(zk://USER:PASSWORD@HOST:PORT[,HOST:PORT...][/ROOT]) or "
                                   "the password from --password-file, and no TLS"
                                 : "for PostgreSQL, give the user and password in the URL or "
                                   "in ~/.pgpass, and TLS in its query "
                                   "(postgresql://USER@HOST:PORT/DB?sslmode=verify-full)";
    if (redis_only != nullptr)
        return usage_error{command, std::string(redis_only) + " applies to Redis URLs only; " +
                                        instead};
    const std::string service(service_name(o));
    std::string why;
    url_description d;
    const error_code ec = describe_url(o.url, d, why);
    if (ec == error::not_supported)
        return usage_error{command, "cannot use the " + service + " URL in " + o.url_from +
                                        ": " + why};
    o.endpoints = d.endpoints;
    if (!ec && o.kind == url_kind::zk && !d.authenticated)
        o.warnings.push_back(
            "the ZooKeeper URL has no credentials: the lock's nodes are open to anyone who "
            "can reach the ensemble (give zk://USER:PASSWORD@..., see docs/security.md)");
    if (!ec) o.warnings.insert(o.warnings.end(), d.warnings.begin(), d.warnings.end());
    // libpq's message comes with this prefix already.
    constexpr std::string_view prefix = "malformed PostgreSQL URL: ";
    if (std::string_view(why).starts_with(prefix)) why.erase(0, prefix.size());
    if (ec)
        return usage_error{command, "malformed " + service + " URL in " + o.url_from + ": " +
                                        (why.empty() ? ec.message() : redact_quoted(why))};
    return std::nullopt;
}

// Where RedLock's node URLs came from: several --url, or the hosts of one
// redlock:// URL (expanded by the library's parser).
enum class redlock_source { options, url };

std::optional<usage_error> resolve_redlock(const std::string& command,
                                           const std::vector<std::string_view>& urls,
                                           common_options& o, const credential_options& cred,
                                           redlock_source source);

}  // namespace

std::optional<usage_error> resolve_url(const std::string& command,
                                       const std::vector<std::string_view>& urls,
                                       common_options& o, const credential_options& cred) {
    if (urls.size() > 1) return resolve_redlock(command, urls, o, cred, redlock_source::options);
    const std::optional<std::string_view> from_option =
        urls.empty() ? std::nullopt : std::optional<std::string_view>(urls.front());
    if (from_option) {
        o.url = std::string(*from_option);
        o.url_from = "--url";
    } else if (const char* env = std::getenv("REDIS_URL"); env != nullptr && *env != 0) {
        o.url = env;
        o.url_from = "REDIS_URL";
    } else {
        o.url = defaults::url();
        o.url_from = "the default URL";
    }
    // A scheme of no service: every scheme corolock accepts, from the table
    // the library dispatches on (corolock/url.hpp).
    if (service_of_url(o.url) == url_service::unknown)
        return usage_error{command, "unsupported URL scheme " +
                                        single_quoted(url_scheme(o.url)) + " in " +
                                        o.url_from + ": corolock accepts " +
                                        accepted_url_schemes() + " (SCHEME://...)"};
    o.kind = kind_of_url(o.url);
    if (o.kind == url_kind::redlock) {
        // One URL naming RedLock's nodes: each becomes a node URL, as if
        // given with --url of its own.
        url_description parsed;
        std::string why;
        if (describe_url(o.url, parsed, why))
            return usage_error{command, "malformed RedLock URL in " + o.url_from + ": " +
                                            redact_quoted(why)};
        const std::vector<std::string_view> node_urls(parsed.nodes.begin(), parsed.nodes.end());
        const auto url = o.url, from = o.url_from;
        if (auto e = resolve_redlock(command, node_urls, o, cred, redlock_source::url); e) return e;
        o.url = url;
        o.url_from = from;
        o.kind = url_kind::redis;
        o.redlock_node_timeout = std::chrono::duration_cast<duration>(parsed.node_timeout);
        return std::nullopt;
    }
    if (!o.redis()) return resolve_store_url(command, o, cred);
    const bool password_elsewhere =
        cred.password_file.has_value() ||
        (std::getenv("COROLOCK_PASSWORD") != nullptr && *std::getenv("COROLOCK_PASSWORD") != 0);
    std::string why;
    if (auto ec = config::parse_url(password_elsewhere ? with_password_slot(o.url) : o.url, o.cfg,
                                    why);
        ec) {
        // Nothing of the URL is echoed: it may carry a password, also where
        // the library's message quotes what it took for a user name.
        return usage_error{command, "malformed Redis URL in " + o.url_from + ": " +
                                        (why.empty() ? ec.message() : redact_quoted(why))};
    }
    return apply_credentials(command, cred, o);
}

namespace {

// Several --url: the independent Redis servers of a RedLock (run only).
// An odd number of at least 3, each a single server or a Sentinel set, no
// server twice (two URLs for one server would let it count twice towards
// the majority).
std::optional<usage_error> resolve_redlock(const std::string& command,
                                           const std::vector<std::string_view>& urls,
                                           common_options& o, const credential_options& cred,
                                           redlock_source source) {
    const std::string count = std::to_string(urls.size());
    const bool by_url = source == redlock_source::url;
    const std::string nodes = by_url ? "hosts in the redlock:// URL" : "--url";
    if (command != "run" && command != "elect" && by_url)
        return usage_error{command, command + " reads one server, and a redlock:// URL names " +
                                        count + " (a RedLock lock is a lock of its own on each "
                                        "node: ask each in turn, with a redis:// --url)"};
    if (command != "run" && command != "elect")
        return usage_error{command, command + " reads one server: give one --url (got " + count +
                                        "; a RedLock lock is a lock of its own on each node, "
                                        "ask each in turn)"};
    if (urls.size() == 2)
        return usage_error{command, "RedLock needs at least 3 --url (independent Redis servers) "
                                    "and got 2: a majority of 2 is both, so losing either one "
                                    "stops every run"};
    if (urls.size() % 2 == 0)
        return usage_error{command, "RedLock takes an odd number of " + nodes + " (3, 5, ...) and got " +
                                        count + ": a majority of " + count + " survives no more "
                                        "lost nodes than one node fewer"};
    std::vector<std::string> seen;
    for (std::size_t i = 0; i < urls.size(); ++i) {
        const std::string from = by_url ? "node " + std::to_string(i + 1) + " of the redlock:// URL"
                                        : "--url #" + std::to_string(i + 1);
        if (const auto kind = kind_of_url(urls[i]); kind != url_kind::redis) {
            common_options other;
            other.kind = kind;
            return usage_error{command, "RedLock's nodes are Redis servers, but " + from +
                                            " is a URL of " + std::string(service_name(other)) +
                                            " (one --url names a whole " +
                                            std::string(service_name(other)) + " cluster)"};
        }
        common_options node;
        if (auto e = resolve_url(command, {urls[i]}, node, cred); e) {
            // The single-URL message names "--url"; say which one.
            const auto at = e->message.find("--url");
            if (at != std::string::npos) e->message.replace(at, 5, from);
            return e;
        }
        if (node.cfg.mode == topology::cluster)
            return usage_error{command, from + " is a Redis Cluster, which cannot be a RedLock "
                                               "node: give the independent servers themselves"};
        std::string where = describe_server(node.cfg);
        if (std::find(seen.begin(), seen.end(), where) != seen.end())
            return usage_error{command, from + " names " + where + " again: RedLock's nodes "
                                               "must be different servers"};
        seen.push_back(std::move(where));
        o.nodes.push_back(std::move(node.cfg));
    }
    o.url = std::string(urls.front());
    o.url_from = "--url";
    o.cfg = o.nodes.front();
    return std::nullopt;
}

}  // namespace

url_kind kind_of_url(std::string_view url) {
    switch (service_of_url(url)) {
        case url_service::etcd: return url_kind::etcd;
        case url_service::zookeeper: return url_kind::zk;
        case url_service::postgresql: return url_kind::postgresql;
        case url_service::redlock: return url_kind::redlock;
        // An unknown scheme: the Redis parser names it and what it expects.
        case url_service::redis:
        case url_service::unknown: break;
    }
    return url_kind::redis;
}

std::string_view service_name(const common_options& o) {
    switch (o.kind) {
        case url_kind::etcd: return "etcd";
        case url_kind::zk: return "ZooKeeper";
        case url_kind::postgresql: return "PostgreSQL";
        case url_kind::redlock: return "RedLock";
        case url_kind::redis: break;
    }
    return "Redis";
}

std::string defaults::url() {
    const config cfg;  // its host is an IPv4 address: no brackets needed
    return "redis://" + cfg.host + ":" + std::to_string(cfg.port);
}

std::string describe_server(const config& cfg) {
    // Appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict for
    // chains of string + string (GCC bug 105329).
    auto put = [](std::string& out, const std::string& h, std::uint16_t port) {
        const bool v6 = h.find(':') != std::string::npos;
        if (v6) out += '[';
        out += h;
        if (v6) out += ']';
        out += ':';
        out += std::to_string(port);
    };
    std::string out;
    if (cfg.mode == topology::sentinel) {
        out += "the primary of ";
        out += cfg.service_name;
        out += " (Sentinel ";
        for (std::size_t i = 0; i < cfg.nodes.size(); ++i) {
            if (i > 0) out += ',';
            put(out, cfg.nodes[i].host, cfg.nodes[i].port);
        }
        out += ')';
        return out;
    }
    if (cfg.mode == topology::cluster) {
        out += "cluster seeds ";
        for (std::size_t i = 0; i < cfg.nodes.size(); ++i) {
            if (i > 0) out += ',';
            put(out, cfg.nodes[i].host, cfg.nodes[i].port);
        }
        return out;
    }
    put(out, cfg.host, cfg.port);
    return out;
}

}  // namespace corolock::cli
