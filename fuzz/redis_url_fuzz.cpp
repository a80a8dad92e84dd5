// Fuzz target for the Redis, Sentinel and Cluster URL parser
// (corolock::config::parse_url, config::from_url):
//  - from_url throws boost::system::system_error(invalid_url) exactly when
//    parse_url fails, and nothing else escapes;
//  - a failure leaves the config it was given untouched and says why;
//  - what a success gives is consistent (one host for redis://, nodes and
//    a service for Sentinel, database 0 for Cluster, ports from 1 to
//    65535, no host twice);
//  - round trip: the config written back as a URL (corolock's own
//    spelling, percent_encode for the credentials) parses to the same;
//  - with its user part and query values replaced by markers, no message
//    of the parser holds a marker (credentials are never echoed).
#include "fuzz_check.hpp"
#include "targets.hpp"
#include "url_secrets.hpp"

#include "core/credentials.hpp"

#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <string>

namespace {

using corolock::config;
using corolock::endpoint;
using corolock::topology;
using corolock::detail::percent_encode;

bool same(const config& a, const config& b) {
    return a.host == b.host && a.port == b.port && a.mode == b.mode && a.nodes == b.nodes &&
           a.service_name == b.service_name && a.sentinel_username == b.sentinel_username &&
           a.sentinel_password == b.sentinel_password && a.username == b.username &&
           a.password == b.password && a.database == b.database &&
           a.tls.enabled == b.tls.enabled && a.tls.verify_peer == b.tls.verify_peer &&
           a.tls.ca_file == b.tls.ca_file && a.tls.cert_file == b.tls.cert_file &&
           a.tls.key_file == b.tls.key_file && a.tls.server_name == b.tls.server_name;
}

// A config unlike any URL's, to see that a failure leaves it alone.
config marked() {
    config c;
    c.host = "untouched";
    c.port = 1;
    c.nodes = {{"n", 2}};
    c.service_name = "s";
    c.username = "u";
    c.password = "p";
    c.database = 7;
    c.tls.ca_file = "ca";
    return c;
}

std::string host_text(const endpoint& e) {
    const bool v6 = e.host.find(':') != std::string::npos;
    return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

std::string to_url(const config& c) {
    std::string url = c.tls.enabled ? "rediss" : "redis";
    if (c.mode == topology::sentinel) url += "+sentinel";
    if (c.mode == topology::cluster) url += "+cluster";
    url += "://";
    if (!c.username.empty() || !c.password.empty())
        url += percent_encode(c.username) + ":" + percent_encode(c.password) + "@";
    if (c.mode == topology::single) {
        url += host_text({c.host, c.port});
    } else {
        for (std::size_t i = 0; i < c.nodes.size(); ++i)
            url += (i ? "," : "") + host_text(c.nodes[i]);
    }
    if (c.mode == topology::sentinel) url += "/" + percent_encode(c.service_name);
    if (c.mode != topology::cluster) url += "/" + std::to_string(c.database);
    std::string query;
    auto add = [&query](const char* key, const std::string& value) {
        if (value.empty()) return;
        query += (query.empty() ? "?" : "&") + std::string(key) + "=" + percent_encode(value);
    };
    add("tls_ca", c.tls.ca_file);
    add("tls_cert", c.tls.cert_file);
    add("tls_key", c.tls.key_file);
    add("tls_server_name", c.tls.server_name);
    if (!c.tls.verify_peer) add("tls_verify", "no");
    add("sentinel_user", c.sentinel_username);
    add("sentinel_password", c.sentinel_password);
    return url + query;
}

void check_consistent(const config& c) {
    if (c.mode == topology::single) {
        FUZZ_REQUIRE(!c.host.empty() && c.port != 0 && c.nodes.empty());
    } else {
        FUZZ_REQUIRE(!c.nodes.empty());
        for (std::size_t i = 0; i < c.nodes.size(); ++i) {
            FUZZ_REQUIRE(!c.nodes[i].host.empty() && c.nodes[i].port != 0);
            for (std::size_t j = 0; j < i; ++j) FUZZ_REQUIRE(!(c.nodes[i] == c.nodes[j]));
        }
    }
    if (c.mode == topology::sentinel) FUZZ_REQUIRE(!c.service_name.empty());
    if (c.mode == topology::cluster) FUZZ_REQUIRE(c.database == 0);
    FUZZ_REQUIRE(c.database >= 0);
    // A user name without a password is refused.
    if (!c.username.empty()) FUZZ_REQUIRE(!c.password.empty());
    if (c.mode != topology::sentinel)
        FUZZ_REQUIRE(c.sentinel_username.empty() && c.sentinel_password.empty());
}

}  // namespace

int corolock_fuzz_redis_url(const std::uint8_t* data, std::size_t size) {
    const std::string_view url(reinterpret_cast<const char*>(data), size);

    config parsed = marked();
    std::string why = "stale";
    const auto ec = config::parse_url(url, parsed, why);
    bool threw = false;
    config thrown_for;
    try {
        thrown_for = config::from_url(url);
    } catch (const boost::system::system_error& e) {
        threw = true;
        FUZZ_REQUIRE(e.code() == ec);
    }
    FUZZ_REQUIRE(threw == ec.failed());

    if (ec) {
        FUZZ_REQUIRE(ec == corolock::error_code(corolock::error::invalid_url));
        FUZZ_REQUIRE(!why.empty());
        FUZZ_REQUIRE(same(parsed, marked()));
    } else {
        FUZZ_REQUIRE(why.empty());
        check_consistent(thrown_for);
        const std::string again = to_url(thrown_for);
        config reparsed;
        std::string why2;
        FUZZ_REQUIRE(!config::parse_url(again, reparsed, why2));
        FUZZ_REQUIRE(same(reparsed, thrown_for));
    }

    const auto planted = corolock::fuzz::plant_secrets(url);
    if (planted.planted) {
        config c;
        std::string why3;
        if (config::parse_url(planted.url, c, why3)) FUZZ_REQUIRE(!corolock::fuzz::echoes_secret(why3));
    }
    return 0;
}
