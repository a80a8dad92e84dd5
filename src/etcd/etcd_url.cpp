// etcd_backend.hpp's parse_url: etcd://, etcds:// URLs, on core/url.hpp's
// grammar. Apart from the backend's I/O so that the fuzz target links it
// alone (fuzz/etcd_url_fuzz.cpp).
#include "etcd/etcd_backend.hpp"

#include "core/url.hpp"

namespace corolock::detail::etcd {

error_code parse_url(std::string_view url, backend_options& out, std::string& why) {
    auto fail = [&](std::string reason) {
        why = std::move(reason);
        return error_code(error::invalid_url);
    };
    constexpr std::string_view example = "etcd://host:2379[,host:port...]";
    url_parts parts;
    if (!split_url(url, example, parts, why)) return error::invalid_url;
    backend_options o;
    if (iequals(parts.scheme, "etcd"))
        o.gateway.tls = false;
    else if (iequals(parts.scheme, "etcds"))
        o.gateway.tls = true;
    else
        return fail("not an etcd URL: expected etcd://host:port or etcds://...");
    if (parts.has_userinfo) {
        url_credentials c;
        if (!decode_userinfo(parts.userinfo, c, why)) return error::invalid_url;
        if (c.user.empty()) return fail("the URL has a password but no user name");
        o.gateway.username = std::move(c.user);
        o.gateway.password = std::move(c.password);
    }
    if (parts.hosts.empty()) return fail("the URL names no host: expected etcd://host:2379");
    std::vector<url_host> hosts;
    if (!parse_url_hosts(parts.hosts, std::nullopt, example, hosts, why)) return error::invalid_url;
    // As the gateway reads them: host:port, [v6]:port.
    for (const auto& h : hosts) o.gateway.endpoints.emplace_back(h.text);
    if (parts.path.size() > 1) {
        if (!percent_decode_strict(parts.path.substr(1), o.prefix))
            return fail("the URL's key prefix has a bad %-escape");
        if (o.prefix.back() != '/') o.prefix += '/';
    }
    std::vector<url_param> query;
    if (!parse_url_query(parts.query, query, why)) return error::invalid_url;
    for (const auto& p : query) {
        using std::chrono::milliseconds;
        if (p.key == "ca_file" && o.gateway.tls) {
            o.gateway.ca_file = p.value;
        } else if (p.key == "connect_timeout_ms" || p.key == "request_timeout_ms") {
            auto& field =
                p.key == "connect_timeout_ms" ? o.gateway.connect_timeout : o.gateway.request_timeout;
            if (!parse_url_milliseconds(p, milliseconds(1), milliseconds(3'600'000), field, why))
                return error::invalid_url;
        } else {
            return fail(unknown_url_option(
                p.key, "connect_timeout_ms, request_timeout_ms, and ca_file for etcds://"));
        }
    }
    out = std::move(o);
    why.clear();
    return {};
}

}  // namespace corolock::detail::etcd
