#include "redlock/redlock_url.hpp"

#include "core/url_authority.hpp"

#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

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
    const auto scheme_end = url.find("://");
    const std::string scheme =
        scheme_end == std::string_view::npos ? std::string() : lower(url.substr(0, scheme_end));
    if (!is_redlock_scheme(scheme))
        fail(error::invalid_url, "expected redlock://, redlock+redis:// or redlock+rediss://");
    const std::string node_scheme = scheme == "redlock+rediss" ? "rediss" : "redis";
    const std::string_view rest = url.substr(scheme_end + 3);

    url_authority parts;
    if (!split_authority(rest, parts)) fail(error::invalid_url, std::string(misplaced_at_message));
    const std::string_view authority = parts.authority;
    const std::string_view tail = parts.tail;
    const auto at = authority.rfind('@');
    const std::string_view userinfo =
        at == std::string_view::npos ? std::string_view() : authority.substr(0, at + 1);
    std::string_view hosts = at == std::string_view::npos ? authority : authority.substr(at + 1);

    // The query: node_timeout_ms is RedLock's, the rest every node's.
    const auto question = tail.find('?');
    const std::string_view path = tail.substr(0, question);
    std::string node_query;
    redlock_url out;
    if (question != std::string_view::npos) {
        std::string_view query = tail.substr(question + 1);
        bool timeout_seen = false;
        for (bool more = true; more;) {
            const auto amp = query.find('&');
            more = amp != std::string_view::npos;
            const std::string_view item = query.substr(0, amp);
            if (more) query.remove_prefix(amp + 1);
            const auto eq = item.find('=');
            if (item.substr(0, eq) != "node_timeout_ms") {
                node_query += node_query.empty() ? "?" : "&";
                node_query += item;  // the node's parser judges it
                continue;
            }
            const std::string_view value =
                eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
            long long ms = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
            if (timeout_seen || value.empty() || ec != std::errc() ||
                end != value.data() + value.size() || ms < 1 || ms > max_node_timeout_ms)
                fail(error::invalid_argument,
                     "node_timeout_ms must be given once, as a whole number of milliseconds from "
                     "1 to " + std::to_string(max_node_timeout_ms));
            timeout_seen = true;
            out.options.node_timeout = std::chrono::milliseconds(ms);
        }
    }

    // Each host becomes a node's URL, judged by the Redis URL parser; its
    // message names the host, never the user part.
    std::vector<config> seen;
    for (bool more = true; more;) {
        const auto comma = hosts.find(',');
        more = comma != std::string_view::npos;
        const std::string_view host = hosts.substr(0, comma);
        if (more) hosts.remove_prefix(comma + 1);
        const std::string which = "node " + std::to_string(out.nodes.size() + 1);
        if (host.empty()) fail(error::invalid_url, which + " of the host list is empty");
        std::string node = node_scheme + "://";
        node.append(userinfo).append(host).append(path).append(node_query);
        config cfg;
        std::string why;
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
