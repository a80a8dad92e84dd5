// Command-line parsing. Every rejection says exactly what was wrong, because
// the tool is mostly run from scripts, where "usage error" alone costs a
// debugging session.
#include "cli.hpp"

#include "core/backend.hpp"
#include "core/credentials.hpp"
#include "core/url_authority.hpp"
#include "schemes.hpp"
#include "etcd/etcd_backend.hpp"
#include "redlock/redlock_url.hpp"
#ifdef COROLOCK_HAVE_POSTGRESQL
#include "pg/pg_admin.hpp"
#include "pg/pg_backend.hpp"
#endif
#ifdef COROLOCK_HAVE_ZOOKEEPER
#include "zk/url.hpp"
#endif

#include <corolock/election.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>
#include <corolock/printable.hpp>
#include <corolock/semaphore.hpp>

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

namespace corolock::cli {

namespace {

// Anything longer is surely a typo, and it keeps the arithmetic far from overflow.
constexpr duration max_duration = std::chrono::hours(24 * 365);

// Quoted for a message; the bytes are made printable when the whole message
// is (report_error), so a name with a newline cannot forge another line.
std::string single_quoted(std::string_view s) {
    std::string out = "'";
    out.append(s);
    out.push_back('\'');
    return out;
}

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

// --password-file, the --tls-* options: applied to the parsed URL.
struct credential_options {
    std::optional<std::string> password_file;
    std::optional<std::string> tls_ca, tls_cert, tls_key, tls_server_name;
    std::optional<std::string> sentinel_tls_server_name;
    bool tls_insecure = false;
    bool any_tls() const {
        return tls_ca || tls_cert || tls_key || tls_server_name || sentinel_tls_server_name ||
               tls_insecure;
    }
};

// "5", "0.5", "12.125": seconds with at most millisecond precision (further
// digits are dropped). Empty when the text is not such a number or is too long.
std::optional<duration> parse_seconds(std::string_view text) {
    const auto dot = text.find('.');
    const auto whole = text.substr(0, dot);
    const auto fraction = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
    if (whole.empty() || whole.size() > 9) return std::nullopt;
    if (dot != std::string_view::npos && fraction.empty()) return std::nullopt;
    auto digits = [](std::string_view s) {
        return s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (!digits(whole) || !digits(fraction)) return std::nullopt;
    std::int64_t ms = std::stoll(std::string(whole)) * 1000;
    std::int64_t scale = 100;
    for (std::size_t i = 0; i < fraction.size() && i < 3; ++i, scale /= 10)
        ms += (fraction[i] - '0') * scale;
    if (ms > max_duration.count()) return std::nullopt;
    return duration(ms);
}

// The option parser is CLI11 (Debian 12's libcli11-dev): a Debian package,
// header-only (nothing to link or to ship), and made for a tool with
// subcommands: short-option bundling ("-nq", "-w5", "-E0"), "--opt=value",
// repeated options (several --url), "-vv", "--". Its own help is turned off:
// `corolock help` (help.cpp) is the one help source, from which the man page
// and the bash completion are generated (packaging/cli_docs.cpp), and a unit
// test checks that every option given to CLI11 is documented there
// (cli_defaults_test.cpp, parser_option_names). What CLI11 does not know is
// the meaning of a value: each value is checked below, with a message that
// names the option as the user typed it.

// An option's value as typed: "-w" or "--wait", and its text.
struct typed_value {
    std::string option;
    std::string value;
};
using value_slot = std::optional<typed_value>;

std::vector<std::string> option_names(std::string_view names) {
    std::vector<std::string> out;
    while (!names.empty()) {
        const auto comma = names.find(',');
        out.emplace_back(names.substr(0, comma));
        if (comma == std::string_view::npos) break;
        names.remove_prefix(comma + 1);
    }
    return out;
}

// Each of `names` ("-w,--wait") is registered as an option of its own that
// takes one value, so that a message names the spelling the user typed. The
// last one given wins.
void value_option(CLI::App& app, std::string_view names, value_slot& slot) {
    for (auto& name : option_names(names))
        app.add_option_function<std::string>(
               name, [&slot, name](const std::string& v) { slot = typed_value{name, v}; })
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
            ->allow_extra_args(false);
}

// A flag: counts how often it is given; "--flag=value" is refused.
void flag_option(CLI::App& app, std::string_view names, int& count) {
    app.add_flag(std::string(names), count)->disable_flag_override();
}

// The options every command takes.
struct common_slots {
    std::vector<std::string> urls;  // each --url given (several: RedLock's nodes, run only)
    int verbose = 0;
    int help = 0;
    value_slot password_file, tls_ca, tls_cert, tls_key, tls_server_name,
        sentinel_tls_server_name;
    int tls_insecure = 0;
};

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

// Runs CLI11 over one command's arguments. A CLI11 error is put in the
// tool's words where it has some: a missing value, a value given to a flag.
std::optional<usage_error> run_parser(CLI::App& app, const std::string& command,
                                      const std::vector<std::string_view>& args) {
    std::vector<std::string> reversed;  // CLI11 takes them last first
    for (auto it = args.rbegin(); it != args.rend(); ++it) reversed.emplace_back(*it);
    try {
        app.parse(reversed);
    } catch (const CLI::ArgumentMismatch& e) {
        // "--lease: 1 required TEXT missing", "json was given a disallowed
        // flag override".
        const std::string what = e.what();
        auto named = [](std::string name) {
            if (!name.starts_with('-')) name.insert(0, name.size() == 1 ? "-" : "--");
            return name;
        };
        if (const auto at = what.find(" was given a disallowed flag override");
            at != std::string::npos)
            return usage_error{command, "option " + named(what.substr(0, at)) + " takes no value"};
        if (const auto at = what.find(": "); at != std::string::npos &&
                                             what.find(" required ") != std::string::npos)
            return usage_error{command, "option " + named(what.substr(0, at)) + " needs a value"};
        return usage_error{command, what};
    } catch (const CLI::ParseError& e) {
        return usage_error{command, e.what()};
    }
    return std::nullopt;
}

bool is_option(std::string_view tok) { return tok.size() > 1 && tok[0] == '-'; }

// The first option CLI11 did not know (it leaves them in remaining()).
std::optional<usage_error> unknown_option(const std::string& command,
                                          const std::vector<std::string>& remaining) {
    for (const auto& tok : remaining)
        if (is_option(tok) && tok != "--")
            return usage_error{command, "unknown option " + single_quoted(tok.substr(0, tok.find('=')))};
    return std::nullopt;
}

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
    detail::url_pieces p;
    if (!detail::split_url_pieces(url, p) || p.userinfo.empty() ||
        p.userinfo.find(':') != std::string_view::npos)
        return std::string(url);
    std::string out(p.head);
    out.append(p.userinfo).append(":-@").append(p.hosts).append(p.tail);
    return out;
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
// own parser, so that a typo is a usage error before anything starts. The
// Redis-only options are refused by name rather than ignored: these take
// their credentials and TLS settings in the URL (ZooKeeper none at all).
// A ZooKeeper URL with its user's password put in (replacing one already
// there), %-escaped: the password from --password-file or
// COROLOCK_PASSWORD. Nothing when the URL names no user.
std::optional<std::string> zk_url_with_password(std::string_view url, std::string_view password) {
    detail::url_pieces p;
    if (!detail::split_url_pieces(url, p) || p.userinfo.empty() || p.userinfo.front() == ':')
        return std::nullopt;
    std::string out(p.head);
    out.append(p.userinfo.substr(0, p.userinfo.find(':')))
        .append(":")
        .append(detail::percent_encode(password))
        .append("@")
        .append(p.hosts)
        .append(p.tail);
    return out;
}

std::optional<usage_error> resolve_store_url(const std::string& command, common_options& o,
                                             const credential_options& cred) {
    // ZooKeeper's digest password may come from --password-file or
    // COROLOCK_PASSWORD, as Redis's does, for a URL that names its user.
    const char* env_password = std::getenv("COROLOCK_PASSWORD");
    if (env_password != nullptr && *env_password == 0) env_password = nullptr;
    if (o.kind == url_kind::zk && (cred.password_file || env_password)) {
        if (!zk_url_with_password(o.url, {})) {
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
            o.url = *zk_url_with_password(o.url, password);
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
    if (auto why = detail::left_out_backend(o.kind == url_kind::zk ? "zk" : "postgresql");
        o.kind != url_kind::etcd && !why.empty())
        return usage_error{command, "cannot use the " + service + " URL in " + o.url_from +
                                        ": " + why};
    std::string why;
    error_code ec;
    o.endpoints.clear();
    if (o.kind == url_kind::etcd) {
        detail::etcd::backend_options eo;
        ec = detail::etcd::parse_url(o.url, eo, why);
        for (const auto& ep : eo.gateway.endpoints)
            o.endpoints += (o.endpoints.empty() ? "" : ",") + ep;
    }
#ifdef COROLOCK_HAVE_ZOOKEEPER
    if (o.kind == url_kind::zk) {
        detail::zk::zk_options zo;
        ec = detail::zk::parse_url(o.url, zo, why);
        o.endpoints = zo.hosts;
        if (!ec && !zo.authenticated())
            o.warnings.push_back(
                "the ZooKeeper URL has no credentials: the lock's nodes are open to anyone who "
                "can reach the ensemble (give zk://USER:PASSWORD@..., see docs/security.md)");
    }
#endif
#ifdef COROLOCK_HAVE_POSTGRESQL
    if (o.kind == url_kind::postgresql) {
        detail::pg::backend_options po;
        ec = detail::pg::parse_url(o.url, po, why);
        // libpq's message comes with this prefix already.
        constexpr std::string_view prefix = "malformed PostgreSQL URL: ";
        if (std::string_view(why).starts_with(prefix)) why.erase(0, prefix.size());
        if (!ec) o.endpoints = detail::pg::describe_server(*po.url);
        if (!ec && !po.url->tls_warning.empty()) o.warnings.push_back(po.url->tls_warning);
    }
#endif
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

// Resolves --url / $REDIS_URL / the default and parses it, then applies the
// password and TLS options. Several --url: RedLock's nodes (run only).
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
    // the library dispatches on (src/schemes.hpp).
    if (detail::family_of(o.url) == detail::scheme_family::unknown)
        return usage_error{command, "unsupported URL scheme " +
                                        single_quoted(detail::scheme_of(o.url)) + " in " +
                                        o.url_from + ": corolock accepts " +
                                        detail::accepted_schemes() + " (SCHEME://...)"};
    o.kind = kind_of_url(o.url);
    if (o.kind == url_kind::redlock) {
        // One URL naming RedLock's nodes: each becomes a node URL, as if
        // given with --url of its own.
        detail::redlock_url parsed;
        try {
            parsed = detail::parse_redlock_url(o.url);
        } catch (const boost::system::system_error& e) {
            // The library's message never holds the password.
            return usage_error{command, "malformed RedLock URL in " + o.url_from + ": " +
                                            redact_quoted(e.what())};
        }
        const std::vector<std::string_view> node_urls(parsed.nodes.begin(), parsed.nodes.end());
        const auto url = o.url, from = o.url_from;
        if (auto e = resolve_redlock(command, node_urls, o, cred, redlock_source::url); e) return e;
        o.url = url;
        o.url_from = from;
        o.kind = url_kind::redis;
        o.redlock_node_timeout = std::chrono::duration_cast<duration>(parsed.options.node_timeout);
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

std::optional<usage_error> check_name(const std::string& command, std::string_view name) {
    std::string why;
    if (validate_lock_name(name, why))
        return usage_error{command, "bad lock NAME " + single_quoted(name) + ": " + why};
    return std::nullopt;
}

// run's own options.
struct run_slots {
    value_slot lease, wait, conflict_exit_code, replicas, capacity, permits, grace, on_lost,
        label, metrics_file, lock_delay, shell_command;
    value_slot leader_value;  // elect's --value
    int quiet = 0, fair = 0, shared = 0, exclusive = 0, no_process_group = 0,
        pass_credentials = 0, no_label = 0, no_wait = 0;
    // flock(1)'s -o, -u and -F: accepted (-o) or refused with the reason.
    int close = 0, unlock = 0, no_fork = 0;
};

// The options of holding something while COMMAND runs: run's and elect's.
void add_held_options(CLI::App& app, run_slots& s) {
    value_option(app, "--lease", s.lease);
    value_option(app, "-w,--wait,--timeout", s.wait);
    flag_option(app, "-n,--no-wait,--nonblock,--nb", s.no_wait);
    value_option(app, "-E,--conflict-exit-code", s.conflict_exit_code);
    flag_option(app, "-q,--quiet", s.quiet);
    value_option(app, "--on-lost", s.on_lost);
    value_option(app, "--grace", s.grace);
    flag_option(app, "--no-process-group", s.no_process_group);
    flag_option(app, "--pass-credentials", s.pass_credentials);
    value_option(app, "--label", s.label);
    flag_option(app, "--no-label", s.no_label);
    value_option(app, "--metrics-file", s.metrics_file);
    value_option(app, "-c,--command", s.shell_command);
}

// elect's: the held ones and the leader's value.
void add_elect_options(CLI::App& app, run_slots& s) {
    add_held_options(app, s);
    value_option(app, "--value", s.leader_value);
}

void add_run_options(CLI::App& app, run_slots& s) {
    add_held_options(app, s);
    flag_option(app, "-s,--shared", s.shared);
    flag_option(app, "-x,-e,--exclusive", s.exclusive);
    flag_option(app, "--fair", s.fair);
    value_option(app, "--capacity", s.capacity);
    value_option(app, "--permits", s.permits);
    value_option(app, "--replicas", s.replicas);
    value_option(app, "--lock-delay", s.lock_delay);
    flag_option(app, "-o,--close", s.close);
    flag_option(app, "-u,--unlock", s.unlock);
    flag_option(app, "-F,--no-fork", s.no_fork);
}

// A whole number from lo to hi with at most max_digits digits; `expected`
// ends the message ("expected ...").
std::optional<usage_error> number_value(const std::string& command, const typed_value& v,
                                        std::size_t max_digits, std::uint32_t lo, std::uint32_t hi,
                                        const std::string& expected, std::uint32_t& out) {
    std::uint32_t n = 0;
    bool ok = !v.value.empty() && v.value.size() <= max_digits;
    for (char c : v.value) {
        if (c < '0' || c > '9') ok = false;
        else n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (!ok || n < lo || n > hi)
        return usage_error{command, "bad " + v.option + " value " + single_quoted(v.value) +
                                        ": expected " + expected};
    out = n;
    return std::nullopt;
}

// Every time option (--lease, -w/--wait, --grace, --lock-delay) follows one
// rule: plain or fractional seconds ("5", "0.25", as flock(1) takes them),
// or a duration ("500ms", "2m").
std::optional<usage_error> duration_value(const std::string& command, const typed_value& v,
                                          duration& out) {
    if (auto d = parse_seconds(v.value)) {
        out = *d;
        return std::nullopt;
    }
    std::string why;
    auto d = parse_duration(v.value, why);
    if (!d)
        return usage_error{command, "bad " + v.option + " value " + single_quoted(v.value) + ": " + why +
                                        "; or plain seconds: 5, 0.5"};
    out = *d;
    return std::nullopt;
}

// The values of run's options, checked, into o.
std::optional<usage_error> read_run_options(const std::string& cmd, const run_slots& s,
                                            run_options& o) {
    auto error = [&](std::string m) { return usage_error{cmd, std::move(m)}; };
    if (s.lease) {
        if (auto e = duration_value(cmd, *s.lease, o.lease); e) return e;
        o.lease_text = format_duration(o.lease);
    }
    o.quiet = s.quiet > 0;
    o.fair = s.fair > 0;
    if (s.shared > 0 && s.exclusive > 0)
        return error("-s (--shared) and -x (--exclusive) cannot be used together");
    if (s.shared > 0) o.level = lock_level::shared;
    if (s.exclusive > 0) o.level = lock_level::exclusive;
    o.own_process_group = s.no_process_group == 0;
    o.pass_credentials = s.pass_credentials > 0;
    if (s.label) {
        if (s.label->value.empty()) return error("--label needs a text (--no-label records none)");
        o.label = s.label->value.substr(0, max_holder_label_length);
    }
    if (s.no_label > 0) o.label = std::string();
    if (s.metrics_file) {
        o.metrics_file = s.metrics_file->value;
        if (auto why = check_metrics_file(o.metrics_file))
            return error("bad --metrics-file " + single_quoted(o.metrics_file) + ": " + *why);
    }
    if (s.conflict_exit_code) {
        std::uint32_t code = 0;
        if (auto e = number_value(cmd, *s.conflict_exit_code, 3, 0, 255,
                                  "an exit status from 0 to 255", code);
            e)
            return e;
        o.conflict_exit_code = static_cast<int>(code);
    }
    if (s.replicas) {
        std::uint32_t n = 0;
        if (auto e = number_value(cmd, *s.replicas, 3, 0, 999,
                                  "a number of replicas from 0 to 999", n);
            e)
            return e;
        o.replicas = static_cast<int>(n);
    }
    const std::string permits_range =
        "a whole number from 1 to " + std::to_string(max_semaphore_capacity);
    if (s.capacity) {
        if (auto e = number_value(cmd, *s.capacity, 7, 1, max_semaphore_capacity, permits_range,
                                  o.capacity);
            e)
            return e;
    }
    if (s.permits) {
        if (auto e = number_value(cmd, *s.permits, 7, 1, max_semaphore_capacity, permits_range,
                                  o.permits);
            e)
            return e;
    }
    if (s.grace) {
        if (auto e = duration_value(cmd, *s.grace, o.grace); e) return e;
    }
    if (s.wait) {
        duration d{};
        if (auto e = duration_value(cmd, *s.wait, d); e) return e;
        o.wait = d;
        o.wait_text = format_duration(d);
    }
    if (s.lock_delay) {
        if (auto e = duration_value(cmd, *s.lock_delay, o.lock_delay); e) return e;
        if (o.lock_delay > max_lock_delay)
            return error("--lock-delay must be at most " +
                         format_duration(std::chrono::duration_cast<duration>(max_lock_delay)) +
                         " (got " + format_duration(o.lock_delay) + ")");
    }
    if (s.unlock > 0)
        return error("-u (--unlock) is not offered: the lock is held by corolock run itself and "
                     "released when COMMAND exits; 'corolock break NAME' force-releases it");
    if (s.no_fork > 0)
        return error("-F (--no-fork) is not offered: corolock run stays beside COMMAND to renew "
                     "the lease and release the lock, so it cannot exec COMMAND in its place");
    // -o (--close): flock closes the lock's descriptor before COMMAND runs;
    // COMMAND never gets the lock here (corolock holds it), so there is
    // nothing to close: accepted for flock's command lines.
    if (s.on_lost) {
        if (s.on_lost->value == "kill")
            o.on_lost = on_lost_action::kill;
        else if (s.on_lost->value == "ignore")
            o.on_lost = on_lost_action::ignore;
        else
            return error("bad --on-lost value " + single_quoted(s.on_lost->value) +
                         ": expected kill or ignore");
    }
    if (s.wait && s.no_wait > 0)
        return error("--wait and --no-wait cannot be used together (nor -w and -n)");
    if (s.permits && o.capacity == 0)
        return error("--permits needs --capacity N: the semaphore's number of permits");
    if (o.permits > o.capacity && o.capacity > 0)
        return error("--permits " + std::to_string(o.permits) + " is more than --capacity " +
                     std::to_string(o.capacity));
    if (o.fair && o.capacity > 0)
        return error("--fair and --capacity cannot be used together (the semaphore has no "
                     "queue)");
    if (o.level != lock_level::mutex) {
        const std::string flag = o.level == lock_level::shared ? "-s (--shared)" : "-x (--exclusive)";
        if (o.fair)
            return error(flag + " and --fair cannot be used together (the shared mutex has "
                                "no queue)");
        if (o.capacity > 0)
            return error(flag + " and --capacity cannot be used together (a semaphore has no "
                                "shared level)");
        if (o.replicas > 0)
            return error("--replicas is not offered with " + flag +
                         " (replica acknowledgement is the plain mutex's)");
    }
    if (o.fair && o.replicas > 0)
        return error("--replicas is not offered with --fair (replica acknowledgement is the "
                     "plain mutex's)");
    if (s.no_wait > 0) {
        o.wait = duration::zero();
        o.wait_text = "0s";
    }
    if (o.lease < defaults::min_lease)
        return error("--lease must be at least " + format_duration(defaults::min_lease) +
                     " (got " + o.lease_text + ")");
    return std::nullopt;
}

// run [OPTIONS] NAME COMMAND [ARGS...], as flock(1): the first word after
// NAME starts COMMAND (options after it are COMMAND's). run [OPTIONS] NAME...
// -- COMMAND [ARGS...]: with "--" (which several NAMEs need), the words
// before the first "--" are NAMEs and options, everything after it COMMAND.
// run [OPTIONS] NAME -c 'SHELL COMMAND': $SHELL (else /bin/sh) -c, as flock.
// elect (cmd "elect"): the same forms with one NAME, elect's options.
std::optional<usage_error> parse_run(const std::vector<std::string_view>& args,
                                     parsed_command& out, const std::string& cmd = "run") {
    const bool elect = cmd == "elect";
    run_options& o = out.run;
    const auto separator = std::find(args.begin(), args.end(), std::string_view("--"));
    const bool saw_separator = separator != args.end();
    const std::vector<std::string_view> head(args.begin(), separator);
    CLI::App app;
    common_slots common;
    run_slots slots;
    std::vector<std::string> names;
    std::string name;
    add_common_options(app, common);
    if (elect)
        add_elect_options(app, slots);
    else
        add_run_options(app, slots);
    if (saw_separator) {
        app.add_option("NAME", names);
    } else {
        // One NAME; CLI11 stops at the next word and leaves it, and all that
        // follows, in remaining(): COMMAND.
        app.add_option("NAME", name);
        app.prefix_command();
    }
    if (auto e = run_parser(app, cmd, head); e) return e;
    if (!saw_separator && app.count("NAME") > 0) names.push_back(name);
    if (common.help > 0) {
        out.what = parsed_command::kind::help;
        out.help_topic = cmd;
        return std::nullopt;
    }
    std::vector<std::string> command;
    if (saw_separator) {
        if (auto e = unknown_option(cmd, app.remaining()); e) return e;
        command.assign(separator + 1, args.end());
    } else {
        // remaining(): the options CLI11 did not know, then COMMAND.
        command = app.remaining();
        const auto first_word = std::find_if(command.begin(), command.end(),
                                             [](const std::string& w) { return !is_option(w); });
        if (auto e = unknown_option(cmd, {command.begin(), first_word}); e) return e;
    }
    credential_options cred;
    if (auto e = read_common_options(cmd, common, o.common, cred); e) return e;
    if (auto e = read_run_options(cmd, slots, o); e) return e;
    auto error = [&](std::string m) { return usage_error{cmd, std::move(m)}; };

    if (names.empty()) return error(saw_separator ? "missing NAME before '--'" : "missing NAME");
    if (slots.shell_command) {
        if (!command.empty())
            return error(slots.shell_command->option + " takes the whole command as one " +
                         "argument; nothing may follow NAME (got " + single_quoted(command[0]) +
                         ")");
        if (slots.shell_command->value.empty())
            return error("option " + slots.shell_command->option + " needs a value");
        const char* shell = std::getenv("SHELL");
        command = {shell != nullptr && *shell != 0 ? shell : "/bin/sh", "-c",
                   slots.shell_command->value};
    }
    if (command.empty())
        return error(saw_separator ? "missing COMMAND after '--'" : "missing COMMAND after NAME");
    for (const auto& name : names)
        if (auto e = check_name(cmd, name); e) return e;
    if (elect) {
        if (names.size() > 1)
            return error("elect campaigns for one NAME (got " + std::to_string(names.size()) + ")");
        o.leader_value = slots.leader_value ? slots.leader_value->value : std::string();
        if (o.leader_value->size() > max_leader_value_length)
            return error("--value is " + std::to_string(o.leader_value->size()) +
                         " bytes long; at most " + std::to_string(max_leader_value_length));
    }
    o.names = detail::canonical_names({names.begin(), names.end()});
    if (o.names.size() > max_run_names)
        return error("too many NAMEs: " + std::to_string(o.names.size()) + " (at most " +
                     std::to_string(max_run_names) + ")");
    if (o.names.size() > 1) {
        // A multi_lock is one plain mutex per name.
        const char* kind = o.fair                           ? "--fair"
                           : o.capacity > 0                 ? "--capacity"
                           : o.level == lock_level::shared  ? "-s (--shared)"
                           : o.level == lock_level::exclusive ? "-x (--exclusive)"
                                                            : nullptr;
        if (kind != nullptr)
            return error(std::string("several NAMEs take a plain lock each (all or none); "
                                     "not with ") +
                         kind);
    }
    o.name = o.names.front();
    for (std::size_t i = 1; i < o.names.size(); ++i) o.name += "," + o.names[i];
    o.command = std::move(command);
    const std::vector<std::string_view> urls(common.urls.begin(), common.urls.end());
    if (auto e = resolve_url(cmd, urls, o.common, cred); e) return e;
    if (o.common.redlock()) {
        // RedLock (src/redlock) offers the plain mutex only, and each node
        // is a primary of its own: nothing to acknowledge.
        const char* refused = o.fair                      ? "--fair"
                              : o.capacity > 0            ? "--capacity"
                              : o.level != lock_level::mutex
                                  ? (o.level == lock_level::shared ? "-s (--shared)"
                                                                   : "-x (--exclusive)")
                              : o.replicas > 0            ? "--replicas"
                                                          : nullptr;
        if (refused != nullptr)
            return error(std::string(refused) +
                         " is not offered with several --url (RedLock takes a plain lock on "
                         "independent servers)");
    }
    return std::nullopt;
}

// status, break, list and check: the common options, `json` (--json) when
// the command has it, and positionals.
struct simple_command {
    CLI::App app;
    common_slots common;
    int json = 0;
    int watch = 0;  // leader --watch
    std::vector<std::string> words;
};

void add_simple_options(const std::string& cmd, simple_command& c) {
    add_common_options(c.app, c.common);
    if (cmd == "status" || cmd == "list" || cmd == "leader") flag_option(c.app, "--json", c.json);
    if (cmd == "leader") flag_option(c.app, "--watch", c.watch);
    c.app.add_option("WORDS", c.words);
}

// Parses a simple command; the positionals are left in c.words. Sets help
// when asked for.
std::optional<usage_error> parse_simple(const std::string& cmd,
                                        const std::vector<std::string_view>& args,
                                        simple_command& c, common_options& o,
                                        credential_options& cred, parsed_command& out) {
    add_simple_options(cmd, c);
    if (auto e = run_parser(c.app, cmd, args); e) return e;
    if (c.common.help > 0) {
        out.what = parsed_command::kind::help;
        out.help_topic = cmd;
        return std::nullopt;
    }
    if (auto e = unknown_option(cmd, c.app.remaining()); e) return e;
    return read_common_options(cmd, c.common, o, cred);
}

// status and break: [options] NAME
template <class Options>
std::optional<usage_error> parse_name_command(const std::string& cmd,
                                              const std::vector<std::string_view>& args,
                                              Options& o, bool& json, parsed_command& out) {
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    json = c.json > 0;
    if (c.words.empty()) return usage_error{cmd, "missing NAME"};
    if (c.words.size() > 1)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[1]) +
                                    " (give exactly one NAME)"};
    o.name = c.words[0];
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// list: [options] [--json] [PATTERN]
std::optional<usage_error> parse_list(const std::vector<std::string_view>& args,
                                      parsed_command& out) {
    const std::string cmd = "list";
    list_options& o = out.list;
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    o.json = c.json > 0;
    if (c.words.size() > 1)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[1]) +
                                    " (give at most one PATTERN)"};
    if (!c.words.empty()) {
        o.pattern = c.words[0];
        if (o.pattern.find_first_of("{}") != std::string::npos)
            return usage_error{cmd, "bad PATTERN " + single_quoted(o.pattern) +
                                        ": lock names never contain '{' or '}'"};
    }
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// check: [options] NAME TOKEN; TOKEN a non-negative integer (a fencing
// token as a guard or `corolock run` gives it).
std::optional<usage_error> parse_check(const std::vector<std::string_view>& args,
                                       parsed_command& out) {
    const std::string cmd = "check";
    check_options& o = out.check;
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    if (c.words.size() < 2)
        return usage_error{cmd, c.words.empty() ? "missing NAME and TOKEN" : "missing TOKEN"};
    if (c.words.size() > 2)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[2]) +
                                    " (give one NAME and one TOKEN)"};
    o.name = c.words[0];
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::string_view t = c.words[1];
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), o.token);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
        return usage_error{cmd, "bad TOKEN " + single_quoted(t) +
                                    ": a fencing token is a non-negative integer"};
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// leader: [options] [--json] [--watch] NAME
std::optional<usage_error> parse_leader(const std::vector<std::string_view>& args,
                                        parsed_command& out) {
    const std::string cmd = "leader";
    leader_options& o = out.leader;
    simple_command c;
    credential_options cred;
    if (auto e = parse_simple(cmd, args, c, o.common, cred, out); e) return e;
    if (out.what == parsed_command::kind::help) return std::nullopt;
    o.json = c.json > 0;
    o.watch = c.watch > 0;
    if (c.words.empty()) return usage_error{cmd, "missing NAME"};
    if (c.words.size() > 1)
        return usage_error{cmd, "unexpected argument " + single_quoted(c.words[1]) +
                                    " (give exactly one NAME)"};
    o.name = c.words[0];
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o.common, cred);
}

// Every option name a command's parser knows ("-w", "--wait", ...).
std::vector<std::string> names_in(const CLI::App& app) {
    std::vector<std::string> out;
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->get_positional()) continue;
        for (const auto& n : opt->get_snames()) out.push_back("-" + n);
        for (const auto& n : opt->get_lnames()) out.push_back("--" + n);
    }
    return out;
}
}  // namespace

std::optional<usage_error> parse_options_only(const std::string& cmd,
                                              const std::vector<std::string_view>& args,
                                              common_options& o, bool& help) {
    simple_command c;
    credential_options cred;
    parsed_command unused;
    if (auto e = parse_simple(cmd, args, c, o, cred, unused); e) return e;
    help = c.common.help > 0;
    if (help) return std::nullopt;
    if (!c.words.empty()) return usage_error{cmd, "unexpected argument " + single_quoted(c.words[0])};
    if (c.common.urls.size() > 1)
        return usage_error{cmd, "give one --url (several are a RedLock's nodes: run only)"};
    const std::vector<std::string_view> urls(c.common.urls.begin(), c.common.urls.end());
    return resolve_url(cmd, urls, o, cred);
}

url_kind kind_of_url(std::string_view url) {
    switch (detail::family_of(url)) {
        case detail::scheme_family::etcd: return url_kind::etcd;
        case detail::scheme_family::zk: return url_kind::zk;
        case detail::scheme_family::postgresql: return url_kind::postgresql;
        case detail::scheme_family::redlock: return url_kind::redlock;
        // An unknown scheme: the Redis parser names it and what it expects.
        case detail::scheme_family::redis:
        case detail::scheme_family::unknown: break;
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

std::optional<duration> parse_duration(std::string_view text, std::string& why) {
    constexpr std::string_view hint = "expected a whole number and a unit: 500ms, 10s, 2m or 1h";
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (text.empty()) {
        why = "empty duration; " + std::string(hint);
        return std::nullopt;
    }
    if (digits == 0) {
        why = std::string(hint);
        return std::nullopt;
    }
    const auto unit = text.substr(digits);
    if (unit.empty()) {
        why = "no unit; " + std::string(hint);
        return std::nullopt;
    }
    std::chrono::milliseconds::rep per_unit = 0;
    if (unit == "ms") per_unit = 1;
    else if (unit == "s") per_unit = 1000;
    else if (unit == "m") per_unit = 60 * 1000;
    else if (unit == "h") per_unit = 60 * 60 * 1000;
    else {
        why = "unknown unit " + single_quoted(unit) + "; " + std::string(hint);
        return std::nullopt;
    }
    std::chrono::milliseconds::rep value = 0;
    for (std::size_t i = 0; i < digits; ++i) {
        value = value * 10 + (text[i] - '0');
        // Checked per digit, so the multiplication below cannot overflow.
        if (value > max_duration.count()) break;
    }
    if (value > max_duration.count() / per_unit) {
        why = "too long; the limit is " + format_duration(max_duration);
        return std::nullopt;
    }
    why.clear();
    return duration(value * per_unit);
}

std::string url_without_credentials(std::string_view url) {
    detail::url_pieces p;
    if (!detail::split_url_pieces(url, p))
        return url.find('@') == std::string_view::npos ? std::string(url) : std::string();
    // An '@' past the host: a password holding '/', '?' or '#' unencoded.
    if (p.tail.find('@') != std::string_view::npos) return std::string();
    // The query may carry credentials (a Sentinel URL's sentinel_user and
    // sentinel_password, a PostgreSQL URL's password and sslpassword, the
    // key %-escaped or not): dropped.
    std::string rest(p.tail);
    if (const auto q = rest.find('?'); q != std::string::npos) {
        std::string kept;
        std::string_view query = std::string_view(rest).substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const auto item = query.substr(0, amp);
            const auto key = item.substr(0, item.find('='));
            if (!detail::is_credential_query_key(detail::percent_decode(key)) && !item.empty())
                kept.append(kept.empty() ? "" : "&").append(item);
            if (amp == std::string_view::npos) break;
            query.remove_prefix(amp + 1);
        }
        rest.erase(q);
        if (!kept.empty()) rest.append("?").append(kept);
    }
    std::string out(p.head);
    out.append(p.hosts).append(rest);
    return out;
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

std::string format_duration(duration d) {
    const auto ms = d.count();
    if (ms != 0 && ms % (60 * 60 * 1000) == 0) return std::to_string(ms / (60 * 60 * 1000)) + "h";
    if (ms != 0 && ms % (60 * 1000) == 0) return std::to_string(ms / (60 * 1000)) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

std::optional<usage_error> parse_command_line(const std::vector<std::string_view>& args,
                                              parsed_command& out) {
    using kind = parsed_command::kind;
    if (args.empty())
        return usage_error{
            "", "missing COMMAND (run, elect, leader, status, list, break, check or help)"};
    const auto first = args[0];
    const std::vector<std::string_view> rest(args.begin() + 1, args.end());

    if (first == "--help" || first == "-h" || first == "help") {
        out.what = kind::help;
        if (first != "help") {
            if (!rest.empty())
                return usage_error{"", "unexpected argument " + single_quoted(rest[0]) + " after " +
                                           std::string(first)};
            return std::nullopt;
        }
        if (rest.size() > 1)
            return usage_error{"", "unexpected argument " + single_quoted(rest[1]) +
                                       " (help takes at most one COMMAND)"};
        if (!rest.empty()) {
            if (help_text(rest[0]).empty())
                return usage_error{"", "no help for unknown command " + single_quoted(rest[0])};
            out.help_topic = std::string(rest[0]);
        }
        return std::nullopt;
    }
    if (first == "--version" || first == "-V") {
        if (!rest.empty())
            return usage_error{"", "unexpected argument " + single_quoted(rest[0]) + " after " +
                                       std::string(first)};
        out.what = kind::version;
        return std::nullopt;
    }
    if (first == "run") {
        out.what = kind::run;
        return parse_run(rest, out);
    }
    if (first == "elect") {
        out.what = kind::elect;
        return parse_run(rest, out, "elect");
    }
    if (first == "leader") {
        out.what = kind::leader;
        return parse_leader(rest, out);
    }
    if (first == "list") {
        out.what = kind::list;
        return parse_list(rest, out);
    }
    if (first == "check") {
        out.what = kind::check;
        return parse_check(rest, out);
    }
    if (first == "status") {
        out.what = kind::status;
        return parse_name_command("status", rest, out.status, out.status.json, out);
    }
    if (first == "break") {
        out.what = kind::break_lock;
        bool no_json = false;
        return parse_name_command("break", rest, out.brk, no_json, out);
    }
    if (is_option(first)) return usage_error{"", "unknown option " + single_quoted(first)};
    return usage_error{"", "unknown command " + single_quoted(first) +
                               " (commands: run, elect, leader, status, list, break, check, help)"};
}

std::vector<std::string> parser_option_names(std::string_view command) {
    if (command == "run") {
        CLI::App app;
        common_slots common;
        run_slots slots;
        add_common_options(app, common);
        add_run_options(app, slots);
        return names_in(app);
    }
    if (command == "elect") {
        CLI::App app;
        common_slots common;
        run_slots slots;
        add_common_options(app, common);
        add_elect_options(app, slots);
        return names_in(app);
    }
    if (command == "status" || command == "list" || command == "break" || command == "check" ||
        command == "leader" || command == "fence") {
        simple_command c;
        add_simple_options(std::string(command), c);
        return names_in(c.app);
    }
    return {};
}

std::string command_label(const std::vector<std::string>& command) {
    if (command.empty()) return {};
    const std::string& program = command.front();
    const auto slash = program.find_last_of('/');
    std::string label = slash == std::string::npos ? program : program.substr(slash + 1);
    if (label.size() > max_holder_label_length) label.resize(max_holder_label_length);
    return label;
}

}  // namespace corolock::cli
