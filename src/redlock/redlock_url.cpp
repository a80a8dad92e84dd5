#include "redlock/redlock_url.hpp"

#include "core/url.hpp"

#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>

namespace corolock::detail {

namespace {

[[noreturn]] void fail(error e, const std::string& why) {
    throw boost::system::system_error(make_error_code(e), "RedLock URL: " + why);
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// The longest per-node timeout a URL may ask for: a node slower than this
// is down for any lease worth taking.
constexpr long long max_node_timeout_ms = 60'000;

}  // namespace

bool is_redlock_scheme(std::string_view scheme) noexcept {
    return scheme == "redlock" || scheme == "redlock+redis" || scheme == "redlock+rediss";
}

redlock_url parse_redlock_url(std::string_view url) {
    url_parts parts;
    std::string why;
    if (!split_url(url, "redlock://host:port,host:port,host:port", parts, why))
        fail(error::invalid_url, why);
    const std::string scheme = lower(parts.scheme);
    if (!is_redlock_scheme(scheme))
        fail(error::invalid_url, "expected redlock://, redlock+redis:// or redlock+rediss://");
    const std::string node_scheme = scheme == "redlock+rediss" ? "rediss" : "redis";
    // The user part goes to every node as written; each node's parser
    // decodes and judges it.
    const std::string userinfo =
        parts.has_userinfo ? std::string(parts.userinfo) + "@" : std::string();
    const std::string_view path = parts.path;

    // The query: node_timeout_ms is RedLock's, the rest every node's, passed
    // on as written.
    std::vector<url_param> params;
    if (!parse_url_query(parts.query, params, why)) fail(error::invalid_url, why);
    std::string node_query;
    redlock_url out;
    for (const auto& p : params) {
        if (p.key != "node_timeout_ms") {
            node_query += node_query.empty() ? "?" : "&";
            node_query += p.text;  // the node's parser judges it
            continue;
        }
        std::chrono::milliseconds ms{};
        if (!parse_url_milliseconds(p, std::chrono::milliseconds(1),
                                    std::chrono::milliseconds(max_node_timeout_ms), ms, why))
            fail(error::invalid_argument, why);
        out.options.node_timeout = ms;
    }

    // The host list as every URL reads it (core/url.hpp); then each host
    // becomes a node's URL, whose path and query the Redis URL parser
    // judges. Its message names the host, never the user part.
    std::vector<url_host> hosts;
    if (!parse_url_hosts(parts.hosts, default_redis_port, {}, hosts, why))
        fail(error::invalid_url, why);
    std::vector<config> seen;
    for (const auto& host : hosts) {
        const std::string which = "node " + std::to_string(out.nodes.size() + 1);
        std::string node = node_scheme + "://";
        node.append(userinfo).append(host.text).append(path).append(node_query);
        config cfg;
        if (const auto ec = config::parse_url(node, cfg, why); ec)
            fail(error::invalid_url, which + ": " + (why.empty() ? ec.message() : why));
        for (const auto& other : seen)
            if (lower(other.host) == lower(cfg.host) && other.port == cfg.port)
                fail(error::invalid_url,
                     which + " names host \"" + cfg.host + "\" port " + std::to_string(cfg.port) +
                         " again: RedLock's nodes must be different servers");
        seen.push_back(std::move(cfg));
        out.nodes.push_back(std::move(node));
    }
    if (out.nodes.size() < min_redlock_url_nodes)
        fail(error::invalid_url,
             "names " + std::to_string(out.nodes.size()) + " host" +
                 (out.nodes.size() == 1 ? "" : "s") + ", at least " +
                 std::to_string(min_redlock_url_nodes) +
                 " are needed (independent Redis servers, comma-separated): with fewer, a "
                 "majority is every node");
    return out;
}

}  // namespace corolock::detail
