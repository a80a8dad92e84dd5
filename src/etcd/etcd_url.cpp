// etcd_backend.hpp's parse_url: etcd://, etcds:// URLs. Apart from the
// backend's I/O so that the fuzz target links it alone (fuzz/etcd_url_fuzz.cpp).
#include "etcd/etcd_backend.hpp"

#include "core/url_text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace corolock::detail::etcd {

namespace {

// core/url_text.hpp's strict decoding, reported as a flag.
std::string percent_decode(std::string_view s, bool& ok) {
    std::string out;
    ok = percent_decode_strict(s, out);
    if (!ok) out.clear();
    return out;
}

}  // namespace

error_code parse_url(std::string_view url, backend_options& out, std::string& why) {
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_url);
    };
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
            return fail("the URL contains whitespace or a control character");
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) return fail("the URL has no scheme");
    const auto scheme = url.substr(0, scheme_end);
    backend_options o;
    if (iequals(scheme, "etcd"))
        o.gateway.tls = false;
    else if (iequals(scheme, "etcds"))
        o.gateway.tls = true;
    else
        return fail("not an etcd URL: expected etcd://host:port or etcds://...");
    std::string_view rest = url.substr(scheme_end + 3);
    std::string_view query;
    if (auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    std::string_view path;
    if (auto p = rest.find('/'); p != std::string_view::npos) {
        path = rest.substr(p + 1);
        rest = rest.substr(0, p);
    }
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        const auto userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        const auto colon = userinfo.find(':');
        bool ok1 = true, ok2 = true;
        o.gateway.username = percent_decode(userinfo.substr(0, colon), ok1);
        if (colon != std::string_view::npos)
            o.gateway.password = percent_decode(userinfo.substr(colon + 1), ok2);
        if (!ok1 || !ok2) return fail("the URL's user or password has a bad %-escape");
        if (o.gateway.username.empty()) return fail("the URL has a password but no user name");
    }
    if (rest.empty()) return fail("the URL names no host: expected etcd://host:port");
    for (bool more = true; more;) {
        const auto comma = rest.find(',');
        auto ep = rest.substr(0, comma);
        more = comma != std::string_view::npos;
        rest = more ? rest.substr(comma + 1) : std::string_view{};
        const auto colon = ep.rfind(':');
        if (ep.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == ep.size())
            return fail("each host needs a port: etcd://host:2379[,host:port...]");
        // As the gateway reads it: [v6]:port, the brackets closed right
        // before the port's colon and not empty.
        if (ep.front() == '[' && (ep.find(']') != colon - 1 || colon < 3))
            return fail("an IPv6 host goes in brackets before its port: etcd://[::1]:2379");
        unsigned port = 0;
        auto r = std::from_chars(ep.data() + colon + 1, ep.data() + ep.size(), port);
        if (r.ec != std::errc() || r.ptr != ep.data() + ep.size() || port == 0 || port > 65535)
            return fail("a port is not a number from 1 to 65535");
        o.gateway.endpoints.emplace_back(ep);
    }
    if (!path.empty()) {
        bool ok = true;
        o.prefix = percent_decode(path, ok);
        if (!ok) return fail("the URL's key prefix has a bad %-escape");
        if (o.prefix.back() != '/') o.prefix += '/';
    }
    while (!query.empty()) {
        const auto amp = query.find('&');
        auto kv = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = kv.find('=');
        const auto key = kv.substr(0, eq);
        bool ok = true;
        const auto value =
            eq == std::string_view::npos ? std::string{} : percent_decode(kv.substr(eq + 1), ok);
        if (!ok) return fail("a query value has a bad %-escape");
        if (key == "ca_file" && o.gateway.tls) {
            o.gateway.ca_file = value;
        } else if (key == "connect_timeout_ms" || key == "request_timeout_ms") {
            // Whole milliseconds, 1 ms to an hour.
            unsigned long ms = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
            if (ec != std::errc() || end != value.data() + value.size() || ms == 0 ||
                ms > 3'600'000)
                return fail("'" + std::string(key) +
                            "' must be a whole number of milliseconds from 1 to 3600000");
            (key == "connect_timeout_ms" ? o.gateway.connect_timeout : o.gateway.request_timeout) =
                std::chrono::milliseconds(ms);
        } else {
            return fail("unknown URL option '" + std::string(key.substr(0, 32)) +
                        "' (known: connect_timeout_ms, request_timeout_ms, and ca_file for "
                        "etcds://)");
        }
    }
    out = std::move(o);
    why.clear();
    return {};
}

}  // namespace corolock::detail::etcd
