// A lock service's URL read without connecting: which service its scheme
// names, where it points, and the URL rewritten without its credentials or
// with a password put in. For tools that talk about a URL to people (the
// corolock tool's checks and messages). It reads URLs as backend(ex, url)
// does: the same scheme table, each backend's own parser.
//
// Nothing here returns a password (url_with_password's result aside), nor
// text before a "://" that is no scheme (it may be one).
#pragma once

#include <corolock/export.hpp>

#include <corolock/error.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock {

// The services a URL's scheme can name (backend.hpp lists the schemes).
enum class url_service {
    redis,       // redis://, rediss://, redis+sentinel://, redis+cluster://, ...
    redlock,     // redlock://, redlock+redis://, redlock+rediss://
    etcd,        // etcd://, etcds://
    zookeeper,   // zk://
    postgresql,  // postgresql://, postgres://
    unknown,     // a scheme no backend has
};

// The URL's scheme in lower case (RFC 3986, 3.1), or empty when it has none.
COROLOCK_API std::string url_scheme(std::string_view url);

// The service of the URL's scheme. A URL without one is Redis's (host:port,
// whose parser says what is wrong with it).
COROLOCK_API url_service service_of_url(std::string_view url);

// Every scheme backend(ex, url) accepts, for messages: "redis, rediss, ...,
// postgres", in a fixed order.
COROLOCK_API std::string accepted_url_schemes();

// What describe_url reads from an etcd, ZooKeeper, PostgreSQL or RedLock URL.
struct url_description {
    url_service service = url_service::unknown;
    // Where it points, for messages: "host:port[,host:port...]" (PostgreSQL:
    // libpq's hosts and ports, a socket directory as such). Never the user
    // information.
    std::string endpoints;
    // ZooKeeper: whether the URL names a digest user (without one, the
    // lock's nodes are open to anyone who can reach the ensemble).
    bool authenticated = false;
    // What the backend would warn about when opened (PostgreSQL: TLS that
    // is not verified, from the URL's sslmode).
    std::vector<std::string> warnings;
    // RedLock: one Redis URL per node, in order, each carrying the URL's
    // credentials and query, and the per-node timeout (docs/redlock.md).
    std::vector<std::string> nodes;
    std::chrono::milliseconds node_timeout{0};
};

// Reads an etcd, ZooKeeper, PostgreSQL or RedLock URL with its backend's
// own parser, without connecting. Completes `out`, or answers
// error::invalid_url for a malformed URL or a scheme of another service
// (Redis URLs are config::parse_url's), error::invalid_argument for a bad
// setting in its query, or error::not_supported when this build of
// corolock left the URL's backend out; `why` says what is wrong, never the
// password (some messages quote what they took for a user name, in
// double quotes).
COROLOCK_API error_code describe_url(std::string_view url, url_description& out, std::string& why);

// The URL without its credentials: the user information, and the query's
// keys that carry one (a Sentinel URL's sentinel_user and
// sentinel_password, a PostgreSQL URL's password and sslpassword, %-escaped
// or not). Empty when that cannot be done with certainty (an '@' after the
// host: a password with an unencoded '/', '?' or '#').
COROLOCK_API std::string url_without_credentials(std::string_view url);

// The URL with `password` (%-escaped) as its user's password, replacing one
// it has; nullopt when it names no user.
COROLOCK_API std::optional<std::string> url_with_password(std::string_view url,
                                                          std::string_view password);

}  // namespace corolock
