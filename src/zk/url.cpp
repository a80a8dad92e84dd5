#include "zk/url.hpp"

#include "core/url.hpp"

#include <algorithm>
#include <cctype>

namespace corolock::detail::zk {

namespace {

// A ZooKeeper path of plain segments: no empty, "." or ".." segment, and
// only characters that need no escaping in any tool.
bool valid_root(std::string_view p) {
    if (p.empty() || p.front() != '/' || p.size() > 512) return false;
    std::size_t start = 1;
    while (start <= p.size()) {
        const auto end = std::min(p.find('/', start), p.size());
        const auto seg = p.substr(start, end - start);
        if (seg.empty() || seg == "." || seg == ".." || (start == 1 && seg == "zookeeper"))
            return false;
        for (char c : seg)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
                return false;
        start = end + 1;
    }
    return true;
}

}  // namespace

error_code parse_url(std::string_view url, zk_options& out, std::string& why) {
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_url);
    };
    constexpr std::string_view example = "zk://host:2181[,host:port...][/root]";
    url_parts parts;
    if (!split_url(url, example, parts, why)) return error::invalid_url;
    if (!iequals(parts.scheme, "zk"))
        return fail("not a ZooKeeper URL: expected zk://host:port[,host:port...][/root]");
    zk_options o;
    if (parts.has_userinfo) {
        // Digest credentials. Nothing of them goes into a message.
        url_credentials c;
        if (!decode_userinfo(parts.userinfo, c, why)) return error::invalid_url;
        if (c.user.empty() || c.password.empty())
            return fail("the URL's user part must be USER:PASSWORD (ZooKeeper digest "
                        "credentials, %-escaped)");
        if (c.user.find(':') != std::string::npos)
            return fail("the user name may not hold ':' (digest credentials are USER:PASSWORD)");
        o.user = std::move(c.user);
        o.password = std::move(c.password);
    }
    if (parts.hosts.empty()) return fail("the URL names no host: expected zk://host:2181");
    std::vector<url_host> hosts;
    if (!parse_url_hosts(parts.hosts, std::nullopt, example, hosts, why)) return error::invalid_url;
    // As zookeeper_init() takes them: host:port,host:port.
    for (const auto& h : hosts) {
        if (!o.hosts.empty()) o.hosts += ',';
        o.hosts += h.text;
    }
    if (!parts.path.empty() && parts.path != "/") {
        std::string root(parts.path);
        if (root.back() == '/') root.pop_back();
        if (!valid_root(root))
            return fail("the root path must be /segment[/segment...] of letters, digits, '-', "
                        "'_' and '.' (not /zookeeper)");
        o.root = std::move(root);
    }
    std::vector<url_param> query;
    if (!parse_url_query(parts.query, query, why)) return error::invalid_url;
    for (const auto& p : query) {
        using std::chrono::milliseconds;
        if (p.key != "session_timeout_ms")
            return fail(unknown_url_option(p.key, "session_timeout_ms"));
        if (!parse_url_milliseconds(p, milliseconds(100), milliseconds(600'000), o.session_timeout,
                                    why))
            return error::invalid_url;
    }
    out = std::move(o);
    why.clear();
    return {};
}

}  // namespace corolock::detail::zk
