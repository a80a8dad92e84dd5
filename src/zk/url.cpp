#include "zk/url.hpp"

#include "core/credentials.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

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
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
            return fail("the URL contains whitespace or a control character");
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos || !iequals(url.substr(0, scheme_end), "zk"))
        return fail("not a ZooKeeper URL: expected zk://host:port[,host:port...][/root]");
    std::string_view rest = url.substr(scheme_end + 3);
    std::string_view query;
    if (auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    std::string_view path;
    if (auto p = rest.find('/'); p != std::string_view::npos) {
        path = rest.substr(p);
        rest = rest.substr(0, p);
    }
    zk_options o;
    if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
        // Digest credentials. Nothing of them goes into a message.
        const auto userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        const auto colon = userinfo.find(':');
        if (colon == std::string_view::npos || colon == 0 || colon + 1 == userinfo.size())
            return fail("the URL's user part must be USER:PASSWORD (ZooKeeper digest "
                        "credentials, %-escaped)");
        o.user = percent_decode(userinfo.substr(0, colon));
        o.password = percent_decode(userinfo.substr(colon + 1));
        if (o.user.find(':') != std::string::npos)
            return fail("the user name may not hold ':' (digest credentials are USER:PASSWORD)");
    }
    if (rest.empty()) return fail("the URL names no host: expected zk://host:2181");
    for (bool more = true; more;) {
        const auto comma = rest.find(',');
        const auto ep = rest.substr(0, comma);
        more = comma != std::string_view::npos;
        rest = more ? rest.substr(comma + 1) : std::string_view{};
        const auto colon = ep.rfind(':');
        if (ep.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == ep.size())
            return fail("each host needs a port: zk://host:2181[,host:port...]");
        unsigned port = 0;
        const auto r = std::from_chars(ep.data() + colon + 1, ep.data() + ep.size(), port);
        if (r.ec != std::errc() || r.ptr != ep.data() + ep.size() || port == 0 || port > 65535)
            return fail("a port is not a number from 1 to 65535");
        if (!o.hosts.empty()) o.hosts += ',';
        o.hosts += ep;
    }
    if (!path.empty() && path != "/") {
        std::string root(path);
        if (root.back() == '/') root.pop_back();
        if (!valid_root(root))
            return fail("the root path must be /segment[/segment...] of letters, digits, '-', "
                        "'_' and '.' (not /zookeeper)");
        o.root = std::move(root);
    }
    while (!query.empty()) {
        const auto amp = query.find('&');
        const auto kv = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = kv.find('=');
        const auto key = kv.substr(0, eq);
        const auto value = eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1);
        if (key != "session_timeout_ms")
            return fail("unknown URL option '" + std::string(key.substr(0, 32)) +
                        "' (known: session_timeout_ms)");
        unsigned long ms = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
        if (ec != std::errc() || end != value.data() + value.size() || ms < 100 || ms > 600'000)
            return fail("'session_timeout_ms' must be a whole number of milliseconds from 100 "
                        "to 600000");
        o.session_timeout = std::chrono::milliseconds(ms);
    }
    out = std::move(o);
    why.clear();
    return {};
}

}  // namespace corolock::detail::zk
