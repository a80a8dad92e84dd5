// Fuzz target for the RedLock URL parser (redlock/redlock_url.hpp):
//  - it throws only boost::system::system_error, with error::invalid_url
//    or error::invalid_argument;
//  - a success names at least min_redlock_url_nodes nodes, each a
//    redis:// (rediss:// for redlock+rediss://) URL that
//    config::parse_url accepts, on different servers, sharing the
//    credentials and the database; node_timeout is 1 ms to 60 s;
//  - no message holds the user part or a query value (see url_secrets.hpp).
#include "fuzz_check.hpp"
#include "targets.hpp"
#include "url_secrets.hpp"

#include "redlock/redlock_url.hpp"

#include <corolock/config.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>
#include <string>

namespace {

using corolock::config;
using corolock::detail::parse_redlock_url;
using corolock::detail::redlock_url;

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// What the parser said: nullopt when it threw; `message` holds what().
std::optional<redlock_url> parse(std::string_view url, std::string& message) {
    try {
        return parse_redlock_url(url);
    } catch (const boost::system::system_error& e) {
        FUZZ_REQUIRE(e.code() == corolock::error_code(corolock::error::invalid_url) ||
                     e.code() == corolock::error_code(corolock::error::invalid_argument));
        message = e.what();
        return std::nullopt;
    }
}

void check(std::string_view url, const redlock_url& r) {
    FUZZ_REQUIRE(r.nodes.size() >= corolock::detail::min_redlock_url_nodes);
    const auto scheme = lower(std::string(url.substr(0, url.find("://"))));
    const std::string node_scheme = scheme == "redlock+rediss" ? "rediss://" : "redis://";
    std::vector<config> configs;
    for (const auto& node : r.nodes) {
        FUZZ_REQUIRE(node.rfind(node_scheme, 0) == 0);
        config c;
        std::string why;
        FUZZ_REQUIRE(!config::parse_url(node, c, why));
        FUZZ_REQUIRE(c.mode == corolock::topology::single);
        for (const auto& other : configs) {
            FUZZ_REQUIRE(lower(other.host) != lower(c.host) || other.port != c.port);
            FUZZ_REQUIRE(other.username == c.username && other.password == c.password &&
                         other.database == c.database);
        }
        configs.push_back(std::move(c));
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.options.node_timeout);
    FUZZ_REQUIRE(ms.count() >= 1 && ms.count() <= 60'000);
}

}  // namespace

int corolock_fuzz_redlock_url(const std::uint8_t* data, std::size_t size) {
    const std::string_view url(reinterpret_cast<const char*>(data), size);
    std::string message;
    if (const auto r = parse(url, message))
        check(url, *r);
    else
        FUZZ_REQUIRE(!message.empty());

    const auto planted = corolock::fuzz::plant_secrets(url);
    if (planted.planted) {
        std::string planted_message;
        if (!parse(planted.url, planted_message))
            FUZZ_REQUIRE(!corolock::fuzz::echoes_secret(planted_message));
    }
    return 0;
}
