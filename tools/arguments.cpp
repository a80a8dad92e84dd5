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

#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>
#include <corolock/printable.hpp>
#include <corolock/semaphore.hpp>

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
std::string quoted(std::string_view s) {
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

// flock(1)-style short options for run: "-nq" is "-n -q", "-sn" is "-s -n", "-w5" is "-w 5",
// "-E0" is "-E 0". Only before the first "--".
std::vector<std::string_view> expand_short_options(const std::vector<std::string_view>& args) {
    static constexpr std::string_view letters = "nqvsx";
    static constexpr std::string_view flags[] = {"-n", "-q", "-v", "-s", "-x"};
    std::vector<std::string_view> out;
    bool done = false;
    for (auto tok : args) {
        if (!done && tok == "--") done = true;
        if (done || tok.size() <= 2 || tok[0] != '-' || tok[1] == '-') {
            out.push_back(tok);
            continue;
        }
        if (tok[1] == 'w' || tok[1] == 'E') {
            out.push_back(tok.substr(0, 2));
            out.push_back(tok.substr(2));
            continue;
        }
        if (tok.find_first_not_of(letters, 1) == std::string_view::npos) {
            for (char c : tok.substr(1)) out.push_back(flags[letters.find(c)]);
            continue;
        }
        out.push_back(tok);
    }
    return out;
}

// One option as typed: "--lease 5s", "--lease=5s", "-v", "-vv".
struct option_token {
    std::string_view name;                 // "--lease", "-v"
    std::optional<std::string_view> value; // from "=value"
};

option_token split_option(std::string_view tok) {
    if (tok.substr(0, 2) == "--") {
        const auto eq = tok.find('=');
        if (eq != std::string_view::npos) return {tok.substr(0, eq), tok.substr(eq + 1)};
    }
    return {tok, std::nullopt};
}

bool is_option(std::string_view tok) { return tok.size() > 1 && tok[0] == '-'; }

// Reads the common and command-specific options of one command. Positionals
// go to `positionals`; for `run`, what follows the first "--" goes to
// `rest` and `saw_separator` is set.
class option_reader {
public:
    option_reader(std::string command, const std::vector<std::string_view>& args, bool run_style)
        : command_(std::move(command)), args_(args), run_style_(run_style) {}

    // Calls on_option(opt) for every option; it returns false for an unknown
    // one. Stops at the first error.
    template <class OnOption>
    std::optional<usage_error> read(OnOption&& on_option) {
        bool options_done = false;
        for (index_ = 0; index_ < args_.size(); ++index_) {
            const auto tok = args_[index_];
            if (tok == "--") {
                if (run_style_) {
                    saw_separator = true;
                    rest.assign(args_.begin() + static_cast<std::ptrdiff_t>(index_) + 1,
                                args_.end());
                    return std::nullopt;
                }
                if (!options_done) {
                    options_done = true;
                    continue;
                }
            }
            if (options_done || !is_option(tok)) {
                positionals.push_back(tok);
                continue;
            }
            current_ = split_option(tok);
            if (auto err = on_option(current_); err) return err;
        }
        return std::nullopt;
    }

    // The option's value: "=value", or the next argument.
    std::optional<usage_error> value(std::string_view& out) {
        if (current_.value) {
            out = *current_.value;
            return std::nullopt;
        }
        if (index_ + 1 >= args_.size() || (run_style_ && args_[index_ + 1] == "--"))
            return error("option " + std::string(current_.name) + " needs a value");
        out = args_[++index_];
        return std::nullopt;
    }

    std::optional<usage_error> no_value() {
        if (current_.value)
            return error("option " + std::string(current_.name) + " takes no value");
        return std::nullopt;
    }

    std::optional<usage_error> duration_value(duration& out, std::string& text) {
        std::string_view v;
        if (auto err = value(v); err) return err;
        std::string why;
        auto d = parse_duration(v, why);
        if (!d) return error("bad " + std::string(current_.name) + " value " + quoted(v) + ": " + why);
        out = *d;
        text = std::string(v);
        return std::nullopt;
    }

    // -w/--wait: plain or fractional seconds ("5", "0.25", as flock(1)
    // takes them), or a duration ("500ms").
    std::optional<usage_error> seconds_or_duration_value(duration& out, std::string& text) {
        std::string_view v;
        if (auto err = value(v); err) return err;
        if (auto d = parse_seconds(v)) {
            out = *d;
            text = format_duration(*d);
            return std::nullopt;
        }
        std::string why;
        auto d = parse_duration(v, why);
        if (!d)
            return error("bad " + std::string(current_.name) + " value " + quoted(v) + ": " + why +
                         "; or plain seconds: 5, 0.5");
        out = *d;
        text = std::string(v);
        return std::nullopt;
    }

    usage_error error(std::string message) const { return {command_, std::move(message)}; }

    usage_error unknown() const {
        return error("unknown option " + quoted(current_.name));
    }

    std::vector<std::string_view> positionals;
    std::vector<std::string_view> rest;
    bool saw_separator = false;

private:
    std::string command_;
    const std::vector<std::string_view>& args_;
    bool run_style_;
    std::size_t index_ = 0;
    option_token current_;
};

// -v, -vv, --verbose, --url (each one given: several make a RedLock for
// run), the credential options: shared by every command. Returns true when the
// option was one of these (err set on a bad value).
bool common_option(option_reader& r, const option_token& opt, common_options& o,
                   std::optional<usage_error>& err, std::vector<std::string_view>& urls,
                   credential_options& cred) {
    auto string_value = [&](std::optional<std::string>& out) {
        std::string_view v;
        err = r.value(v);
        if (!err && v.empty()) err = r.error("option " + std::string(opt.name) + " needs a value");
        if (!err) out = std::string(v);
        return true;
    };
    if (opt.name == "--password-file") return string_value(cred.password_file);
    if (opt.name == "--tls-ca") return string_value(cred.tls_ca);
    if (opt.name == "--tls-cert") return string_value(cred.tls_cert);
    if (opt.name == "--tls-key") return string_value(cred.tls_key);
    if (opt.name == "--tls-server-name") return string_value(cred.tls_server_name);
    if (opt.name == "--sentinel-tls-server-name")
        return string_value(cred.sentinel_tls_server_name);
    if (opt.name == "--tls-insecure") {
        err = r.no_value();
        cred.tls_insecure = true;
        return true;
    }
    if (opt.name == "--verbose") {
        err = r.no_value();
        ++o.verbosity;
        return true;
    }
    if (opt.name.size() >= 2 && opt.name[0] == '-' && opt.name[1] == 'v' &&
        opt.name.find_first_not_of('v', 1) == std::string_view::npos) {
        o.verbosity += static_cast<int>(opt.name.size() - 1);
        return true;
    }
    if (opt.name == "--url") {
        std::string_view v;
        err = r.value(v);
        if (!err) urls.push_back(v);
        return true;
    }
    return false;
}

// The password in a file: its first line, without the line end.
std::optional<usage_error> read_password_file(const std::string& command, const std::string& path,
                                              std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int err = errno;
        return usage_error{command, "cannot read --password-file " + quoted(path) + ": " +
                                        std::strerror(err != 0 ? err : EIO)};
    }
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty())
        return usage_error{command, "--password-file " + quoted(path) +
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
            return usage_error{command, std::string("cannot read ") + option + " " + quoted(file) +
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
    if (command != "run" && by_url)
        return usage_error{command, command + " reads one server, and a redlock:// URL names " +
                                        count + " (a RedLock lock is a lock of its own on each "
                                        "node: ask each in turn, with a redis:// --url)"};
    if (command != "run")
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
        return usage_error{command, "bad lock NAME " + quoted(name) + ": " + why};
    return std::nullopt;
}

bool asks_for_help(const std::vector<std::string_view>& args) {
    for (auto tok : args) {
        if (tok == "--") return false;  // beyond here it is COMMAND's (run) or a NAME
        if (tok == "--help" || tok == "-h") return true;
    }
    return false;
}

std::optional<usage_error> parse_run(const std::vector<std::string_view>& args, run_options& o) {
    const std::string cmd = "run";
    const auto expanded = expand_short_options(args);
    option_reader r(cmd, expanded, /*run_style=*/true);
    std::vector<std::string_view> url;
    credential_options cred;
    bool no_wait = false;
    bool wait_given = false;
    bool permits_given = false;
    auto err = r.read([&](const option_token& opt) -> std::optional<usage_error> {
        std::optional<usage_error> e;
        if (common_option(r, opt, o.common, e, url, cred)) return e;
        if (opt.name == "--lease") return r.duration_value(o.lease, o.lease_text);
        if (opt.name == "-q" || opt.name == "--quiet") {
            o.quiet = true;
            return r.no_value();
        }
        if (opt.name == "--fair") {
            o.fair = true;
            return r.no_value();
        }
        if (opt.name == "-s" || opt.name == "--shared" || opt.name == "-x" ||
            opt.name == "--exclusive") {
            const auto level = opt.name == "-s" || opt.name == "--shared" ? lock_level::shared
                                                                          : lock_level::exclusive;
            if (o.level != lock_level::mutex && o.level != level)
                return r.error("-s (--shared) and -x (--exclusive) cannot be used together");
            o.level = level;
            return r.no_value();
        }
        if (opt.name == "--no-process-group") {
            o.own_process_group = false;
            return r.no_value();
        }
        if (opt.name == "--pass-credentials") {
            o.pass_credentials = true;
            return r.no_value();
        }
        if (opt.name == "--label") {
            std::string_view v;
            if (auto e2 = r.value(v); e2) return e2;
            if (v.empty()) return r.error("--label needs a text (--no-label records none)");
            o.label = std::string(v.substr(0, max_holder_label_length));
            return std::nullopt;
        }
        if (opt.name == "--no-label") {
            o.label = std::string();
            return r.no_value();
        }
        if (opt.name == "--metrics-file") {
            std::string_view v;
            if (auto e2 = r.value(v); e2) return e2;
            o.metrics_file = std::string(v);
            if (auto why = check_metrics_file(o.metrics_file))
                return r.error("bad --metrics-file " + quoted(v) + ": " + *why);
            return std::nullopt;
        }
        if (opt.name == "-E" || opt.name == "--conflict-exit-code") {
            std::string_view v;
            if (auto e2 = r.value(v); e2) return e2;
            int code = 0;
            bool ok = !v.empty() && v.size() <= 3;
            for (char c : v) {
                if (c < '0' || c > '9') ok = false;
                else code = code * 10 + (c - '0');
            }
            if (!ok || code > 255)
                return r.error("bad " + std::string(opt.name) + " value " + quoted(v) +
                               ": expected an exit status from 0 to 255");
            o.conflict_exit_code = code;
            return std::nullopt;
        }
        if (opt.name == "--replicas") {
            std::string_view v;
            if (auto e2 = r.value(v); e2) return e2;
            int n = 0;
            bool ok = !v.empty() && v.size() <= 3;
            for (char c : v) {
                if (c < '0' || c > '9') ok = false;
                else n = n * 10 + (c - '0');
            }
            if (!ok)
                return r.error("bad --replicas value " + quoted(v) +
                               ": expected a number of replicas from 0 to 999");
            o.replicas = n;
            return std::nullopt;
        }
        if (opt.name == "--capacity" || opt.name == "--permits") {
            std::string_view v;
            if (auto e2 = r.value(v); e2) return e2;
            std::uint32_t n = 0;
            bool ok = !v.empty() && v.size() <= 7;
            for (char c : v) {
                if (c < '0' || c > '9') ok = false;
                else n = n * 10 + static_cast<std::uint32_t>(c - '0');
            }
            if (!ok || n < 1 || n > max_semaphore_capacity)
                return r.error("bad " + std::string(opt.name) + " value " + quoted(v) +
                               ": expected a whole number from 1 to " +
                               std::to_string(max_semaphore_capacity));
            (opt.name == "--capacity" ? o.capacity : o.permits) = n;
            permits_given = permits_given || opt.name == "--permits";
            return std::nullopt;
        }
        if (opt.name == "--grace") {
            std::string ignored;
            return r.duration_value(o.grace, ignored);
        }
        if (opt.name == "--wait" || opt.name == "-w") {
            duration d{};
            if (auto e2 = r.seconds_or_duration_value(d, o.wait_text); e2) return e2;
            o.wait = d;
            wait_given = true;
            return std::nullopt;
        }
        if (opt.name == "--no-wait" || opt.name == "-n") {
            no_wait = true;
            return r.no_value();
        }
        if (opt.name == "--on-lost") {
            std::string_view v;
            if (auto e2 = r.value(v); e2) return e2;
            if (v == "kill")
                o.on_lost = on_lost_action::kill;
            else if (v == "ignore")
                o.on_lost = on_lost_action::ignore;
            else
                return r.error("bad --on-lost value " + quoted(v) + ": expected kill or ignore");
            return std::nullopt;
        }
        return r.unknown();
    });
    if (err) return err;
    if (wait_given && no_wait)
        return r.error("--wait and --no-wait cannot be used together (nor -w and -n)");
    if (permits_given && o.capacity == 0)
        return r.error("--permits needs --capacity N: the semaphore's number of permits");
    if (o.permits > o.capacity && o.capacity > 0)
        return r.error("--permits " + std::to_string(o.permits) + " is more than --capacity " +
                       std::to_string(o.capacity));
    if (o.fair && o.capacity > 0)
        return r.error("--fair and --capacity cannot be used together (the semaphore has no "
                       "queue)");
    if (o.level != lock_level::mutex) {
        const std::string flag = o.level == lock_level::shared ? "-s (--shared)" : "-x (--exclusive)";
        if (o.fair)
            return r.error(flag + " and --fair cannot be used together (the shared mutex has "
                                  "no queue)");
        if (o.capacity > 0)
            return r.error(flag + " and --capacity cannot be used together (a semaphore has no "
                                  "shared level)");
        if (o.replicas > 0)
            return r.error("--replicas is not offered with " + flag +
                           " (replica acknowledgement is the plain mutex's)");
    }
    if (o.fair && o.replicas > 0)
        return r.error("--replicas is not offered with --fair (replica acknowledgement is the "
                       "plain mutex's)");
    if (no_wait) {
        o.wait = duration::zero();
        o.wait_text = "0s";
    }
    if (o.lease < defaults::min_lease)
        return r.error("--lease must be at least " + format_duration(defaults::min_lease) +
                       " (got " + o.lease_text + ")");

    if (r.positionals.empty())
        return r.error(r.saw_separator ? "missing NAME before '--'" : "missing NAME");
    if (r.positionals.size() > 1 && !r.saw_separator)
        return r.error("unexpected argument " + quoted(r.positionals[1]) +
                       " after NAME: put '--' before COMMAND");
    if (!r.saw_separator) return r.error("missing '--' and COMMAND after NAME");
    if (r.rest.empty()) return r.error("missing COMMAND after '--'");
    for (auto name : r.positionals)
        if (auto e = check_name(cmd, name); e) return e;
    o.names = detail::canonical_names({r.positionals.begin(), r.positionals.end()});
    if (o.names.size() > max_run_names)
        return r.error("too many NAMEs: " + std::to_string(o.names.size()) + " (at most " +
                       std::to_string(max_run_names) + ")");
    if (o.names.size() > 1) {
        // A multi_lock is one plain mutex per name.
        const char* kind = o.fair                           ? "--fair"
                           : o.capacity > 0                 ? "--capacity"
                           : o.level == lock_level::shared  ? "-s (--shared)"
                           : o.level == lock_level::exclusive ? "-x (--exclusive)"
                                                            : nullptr;
        if (kind != nullptr)
            return r.error(std::string("several NAMEs take a plain lock each (all or none); "
                                       "not with ") +
                           kind);
    }
    o.name = o.names.front();
    for (std::size_t i = 1; i < o.names.size(); ++i) o.name += "," + o.names[i];
    o.command.assign(r.rest.begin(), r.rest.end());
    if (auto e = resolve_url(cmd, url, o.common, cred); e) return e;
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
            return r.error(std::string(refused) +
                           " is not offered with several --url (RedLock takes a plain lock on "
                           "independent servers)");
    }
    return std::nullopt;
}

// Reads the options of a command that takes the common ones plus those
// `extra` knows (it returns true for an option it took, with any error in
// e); the positionals stay in r.
template <class Common, class Extra>
std::optional<usage_error> read_options(option_reader& r, Common& common,
                                        std::vector<std::string_view>& url,
                                        credential_options& cred, Extra&& extra) {
    return r.read([&](const option_token& opt) -> std::optional<usage_error> {
        std::optional<usage_error> e;
        if (common_option(r, opt, common, e, url, cred)) return e;
        if (extra(r, opt, e)) return e;
        return r.unknown();
    });
}

// status and break: [options] NAME
template <class Options, class Extra>
std::optional<usage_error> parse_name_command(const std::string& cmd,
                                              const std::vector<std::string_view>& args,
                                              Options& o, Extra&& extra) {
    option_reader r(cmd, args, /*run_style=*/false);
    std::vector<std::string_view> url;
    credential_options cred;
    if (auto err = read_options(r, o.common, url, cred, extra); err) return err;
    if (r.positionals.empty()) return r.error("missing NAME");
    if (r.positionals.size() > 1)
        return r.error("unexpected argument " + quoted(r.positionals[1]) +
                       " (give exactly one NAME)");
    o.name = std::string(r.positionals[0]);
    if (auto e = check_name(cmd, o.name); e) return e;
    return resolve_url(cmd, url, o.common, cred);
}

// list: [options] [--json] [PATTERN]
std::optional<usage_error> parse_list(const std::vector<std::string_view>& args, list_options& o) {
    const std::string cmd = "list";
    option_reader r(cmd, args, /*run_style=*/false);
    std::vector<std::string_view> url;
    credential_options cred;
    auto err = read_options(r, o.common, url, cred,
                            [&](option_reader& rr, const option_token& opt,
                                std::optional<usage_error>& e) {
                                if (opt.name != "--json") return false;
                                o.json = true;
                                e = rr.no_value();
                                return true;
                            });
    if (err) return err;
    if (r.positionals.size() > 1)
        return r.error("unexpected argument " + quoted(r.positionals[1]) +
                       " (give at most one PATTERN)");
    if (!r.positionals.empty()) {
        o.pattern = std::string(r.positionals[0]);
        if (o.pattern.find_first_of("{}") != std::string::npos)
            return r.error("bad PATTERN " + quoted(o.pattern) +
                           ": lock names never contain '{' or '}'");
    }
    return resolve_url(cmd, url, o.common, cred);
}

// check: [options] NAME TOKEN; TOKEN a non-negative integer (a fencing
// token as a guard or `corolock run` gives it).
std::optional<usage_error> parse_check(const std::vector<std::string_view>& args,
                                       check_options& o) {
    const std::string cmd = "check";
    option_reader r(cmd, args, /*run_style=*/false);
    std::vector<std::string_view> url;
    credential_options cred;
    auto no_extra = [](option_reader&, const option_token&, std::optional<usage_error>&) {
        return false;
    };
    if (auto err = read_options(r, o.common, url, cred, no_extra); err) return err;
    if (r.positionals.size() < 2)
        return r.error(r.positionals.empty() ? "missing NAME and TOKEN" : "missing TOKEN");
    if (r.positionals.size() > 2)
        return r.error("unexpected argument " + quoted(r.positionals[2]) +
                       " (give one NAME and one TOKEN)");
    o.name = std::string(r.positionals[0]);
    if (auto e = check_name(cmd, o.name); e) return e;
    const std::string_view t = r.positionals[1];
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), o.token);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
        return r.error("bad TOKEN " + quoted(t) + ": a fencing token is a non-negative integer");
    return resolve_url(cmd, url, o.common, cred);
}

}  // namespace

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
        why = "unknown unit " + quoted(unit) + "; " + std::string(hint);
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
        return usage_error{"", "missing COMMAND (run, status, list, break, check or help)"};
    const auto first = args[0];
    const std::vector<std::string_view> rest(args.begin() + 1, args.end());

    if (first == "--help" || first == "-h" || first == "help") {
        out.what = kind::help;
        if (first != "help") {
            if (!rest.empty())
                return usage_error{"", "unexpected argument " + quoted(rest[0]) + " after " +
                                           std::string(first)};
            return std::nullopt;
        }
        if (rest.size() > 1)
            return usage_error{"", "unexpected argument " + quoted(rest[1]) +
                                       " (help takes at most one COMMAND)"};
        if (!rest.empty()) {
            if (help_text(rest[0]).empty())
                return usage_error{"", "no help for unknown command " + quoted(rest[0])};
            out.help_topic = std::string(rest[0]);
        }
        return std::nullopt;
    }
    if (first == "--version" || first == "-V") {
        if (!rest.empty())
            return usage_error{"", "unexpected argument " + quoted(rest[0]) + " after " +
                                       std::string(first)};
        out.what = kind::version;
        return std::nullopt;
    }
    if (first == "run" || first == "status" || first == "break" || first == "list" ||
        first == "check") {
        if (asks_for_help(rest)) {
            out.what = kind::help;
            out.help_topic = std::string(first);
            return std::nullopt;
        }
        if (first == "run") {
            out.what = kind::run;
            return parse_run(rest, out.run);
        }
        if (first == "list") {
            out.what = kind::list;
            return parse_list(rest, out.list);
        }
        if (first == "check") {
            out.what = kind::check;
            return parse_check(rest, out.check);
        }
        if (first == "status") {
            out.what = kind::status;
            return parse_name_command(
                "status", rest, out.status,
                [&](option_reader& r, const option_token& opt, std::optional<usage_error>& e) {
                    if (opt.name != "--json") return false;
                    e = r.no_value();
                    out.status.json = true;
                    return true;
                });
        }
        out.what = kind::break_lock;
        return parse_name_command(
            "break", rest, out.brk,
            [](option_reader&, const option_token&, std::optional<usage_error>&) { return false; });
    }
    if (is_option(first)) return usage_error{"", "unknown option " + quoted(first)};
    return usage_error{"", "unknown command " + quoted(first) +
                               " (commands: run, status, list, break, check, help)"};
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
