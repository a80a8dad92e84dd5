// Fuzz target for the etcd URL parser (etcd_backend.hpp's parse_url):
//  - it never throws; a failure is error::invalid_url with a reason, and
//    leaves the options it was given untouched;
//  - every endpoint it accepts is one the gateway accepts (gateway.cpp's
//    parse_endpoint: host:port or [v6]:port, a host, a port from 1 to
//    65535), so that opening the backend cannot throw anything else;
//  - the key prefix ends with '/', a password comes with a user name, and
//    the timeouts are within their bounds;
//  - round trip: the options written back as a URL parse to the same;
//  - no message holds the user part or a query value (see url_secrets.hpp).
#include "fuzz_check.hpp"
#include "targets.hpp"
#include "url_secrets.hpp"

#include "core/credentials.hpp"
#include "etcd/etcd_backend.hpp"

#include <charconv>
#include <string>

namespace {

using corolock::detail::percent_encode;
using corolock::detail::etcd::backend_options;
using corolock::detail::etcd::parse_url;

bool same(const backend_options& a, const backend_options& b) {
    const auto& x = a.gateway;
    const auto& y = b.gateway;
    return a.prefix == b.prefix && x.endpoints == y.endpoints && x.tls == y.tls &&
           x.ca_file == y.ca_file && x.username == y.username && x.password == y.password &&
           x.connect_timeout == y.connect_timeout && x.request_timeout == y.request_timeout;
}

backend_options marked() {
    backend_options o;
    o.prefix = "untouched/";
    o.gateway.endpoints = {"n:1"};
    o.gateway.username = "u";
    o.gateway.password = "p";
    return o;
}

// gateway.cpp's rule for an endpoint.
bool gateway_accepts(std::string_view s) {
    std::string_view host, port;
    if (!s.empty() && s.front() == '[') {
        const auto close = s.find(']');
        if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
            return false;
        host = s.substr(1, close - 1);
        port = s.substr(close + 2);
    } else {
        const auto colon = s.rfind(':');
        if (colon == std::string_view::npos) return false;
        host = s.substr(0, colon);
        port = s.substr(colon + 1);
    }
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    return !host.empty() && ec == std::errc{} && end == port.data() + port.size() && n != 0 &&
           n <= 65535;
}

std::string to_url(const backend_options& o) {
    const auto& g = o.gateway;
    std::string url = g.tls ? "etcds://" : "etcd://";
    if (!g.username.empty()) {
        url += percent_encode(g.username);
        if (!g.password.empty()) url += ":" + percent_encode(g.password);
        url += "@";
    }
    for (std::size_t i = 0; i < g.endpoints.size(); ++i) url += (i ? "," : "") + g.endpoints[i];
    url += "/" + percent_encode(o.prefix);
    url += "?connect_timeout_ms=" + std::to_string(g.connect_timeout.count());
    url += "&request_timeout_ms=" + std::to_string(g.request_timeout.count());
    if (!g.ca_file.empty()) url += "&ca_file=" + percent_encode(g.ca_file);
    return url;
}

}  // namespace

int corolock_fuzz_etcd_url(const std::uint8_t* data, std::size_t size) {
    const std::string_view url(reinterpret_cast<const char*>(data), size);
    backend_options o = marked();
    std::string why = "stale";
    const auto ec = parse_url(url, o, why);
    if (ec) {
        FUZZ_REQUIRE(ec == corolock::error_code(corolock::error::invalid_url));
        FUZZ_REQUIRE(!why.empty());
        FUZZ_REQUIRE(same(o, marked()));
    } else {
        FUZZ_REQUIRE(why.empty());
        const auto& g = o.gateway;
        FUZZ_REQUIRE(!g.endpoints.empty());
        for (const auto& e : g.endpoints) FUZZ_REQUIRE(gateway_accepts(e));
        FUZZ_REQUIRE(!o.prefix.empty() && o.prefix.back() == '/');
        if (!g.password.empty()) FUZZ_REQUIRE(!g.username.empty());
        if (!g.tls) FUZZ_REQUIRE(g.ca_file.empty());
        for (const auto t : {g.connect_timeout, g.request_timeout})
            FUZZ_REQUIRE(t.count() >= 1 && t.count() <= 3'600'000);
        backend_options again;
        std::string why2;
        FUZZ_REQUIRE(!parse_url(to_url(o), again, why2));
        FUZZ_REQUIRE(same(again, o));
    }
    const auto planted = corolock::fuzz::plant_secrets(url);
    if (planted.planted) {
        backend_options p;
        std::string why3;
        if (parse_url(planted.url, p, why3)) FUZZ_REQUIRE(!corolock::fuzz::echoes_secret(why3));
    }
    return 0;
}
