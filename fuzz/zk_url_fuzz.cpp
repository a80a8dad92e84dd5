// Fuzz target for the ZooKeeper URL parser (zk/url.hpp):
//  - it never throws; a failure is error::invalid_url with a reason, and
//    leaves the options it was given untouched;
//  - what it accepts is consistent: each host has a name and a port from
//    1 to 65535, the root is /segment[/segment...] of plain characters (not
//    /zookeeper), the session timeout is 100 ms to 600 s, and credentials
//    come as a pair, the user without ':';
//  - round trip: the options written back as a URL parse to the same;
//  - no message holds the user part or a query value (see url_secrets.hpp).
#include "fuzz_check.hpp"
#include "targets.hpp"
#include "url_secrets.hpp"

#include "core/credentials.hpp"
#include "zk/url.hpp"

#include <charconv>
#include <string>

namespace {

using corolock::detail::percent_encode;
using corolock::detail::zk::parse_url;
using corolock::detail::zk::zk_options;

bool same(const zk_options& a, const zk_options& b) {
    return a.hosts == b.hosts && a.root == b.root && a.session_timeout == b.session_timeout &&
           a.user == b.user && a.password == b.password;
}

zk_options marked() {
    zk_options o;
    o.hosts = "untouched:1";
    o.root = "/untouched";
    o.user = "u";
    o.password = "p";
    return o;
}

bool plain(char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
}

void check_consistent(const zk_options& o) {
    std::string_view hosts = o.hosts;
    FUZZ_REQUIRE(!hosts.empty());
    for (bool more = true; more;) {
        const auto comma = hosts.find(',');
        const auto ep = hosts.substr(0, comma);
        more = comma != std::string_view::npos;
        if (more) hosts.remove_prefix(comma + 1);
        const auto colon = ep.rfind(':');
        FUZZ_REQUIRE(colon != std::string_view::npos && colon > 0);
        unsigned port = 0;
        const auto port_text = ep.substr(colon + 1);
        const auto [end, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        FUZZ_REQUIRE(ec == std::errc() && end == port_text.data() + port_text.size());
        FUZZ_REQUIRE(port >= 1 && port <= 65535);
    }
    FUZZ_REQUIRE(o.root.size() > 1 && o.root.front() == '/' && o.root.back() != '/');
    FUZZ_REQUIRE(o.root != "/zookeeper" && o.root.rfind("/zookeeper/", 0) != 0);
    FUZZ_REQUIRE(o.root.find("//") == std::string::npos);
    for (const char c : o.root) FUZZ_REQUIRE(c == '/' || plain(c));
    for (std::string_view seg : {std::string_view("/./"), std::string_view("/../")})
        FUZZ_REQUIRE((o.root + "/").find(seg) == std::string::npos);
    FUZZ_REQUIRE(o.session_timeout.count() >= 100 && o.session_timeout.count() <= 600'000);
    FUZZ_REQUIRE(o.user.empty() == o.password.empty());
    FUZZ_REQUIRE(o.user.find(':') == std::string::npos);
}

std::string to_url(const zk_options& o) {
    std::string url = "zk://";
    if (o.authenticated()) url += percent_encode(o.user) + ":" + percent_encode(o.password) + "@";
    url += o.hosts + o.root;
    url += "?session_timeout_ms=" + std::to_string(o.session_timeout.count());
    return url;
}

}  // namespace

int corolock_fuzz_zk_url(const std::uint8_t* data, std::size_t size) {
    const std::string_view url(reinterpret_cast<const char*>(data), size);
    zk_options o = marked();
    std::string why = "stale";
    const auto ec = parse_url(url, o, why);
    if (ec) {
        FUZZ_REQUIRE(ec == corolock::error_code(corolock::error::invalid_url));
        FUZZ_REQUIRE(!why.empty());
        FUZZ_REQUIRE(same(o, marked()));
    } else {
        FUZZ_REQUIRE(why.empty());
        check_consistent(o);
        zk_options again;
        std::string why2;
        FUZZ_REQUIRE(!parse_url(to_url(o), again, why2));
        FUZZ_REQUIRE(same(again, o));
    }
    const auto planted = corolock::fuzz::plant_secrets(url);
    if (planted.planted) {
        zk_options p;
        std::string why3;
        if (parse_url(planted.url, p, why3)) FUZZ_REQUIRE(!corolock::fuzz::echoes_secret(why3));
    }
    return 0;
}
