// The RedLock URL: N independent Redis servers in one URL (docs/redlock.md,
// "Opening it"), so that backend(ex, url) picks RedLock as it picks every
// other backend.
//
//   redlock://[user:password@]host[:port],host[:port],host[:port][/db][?query]
//   redlock+redis://...    the same
//   redlock+rediss://...   every node over TLS
//
// The hosts share the credentials, the database and the query: each node's
// URL is redis[s]://[user:password@]host[:port][/db][?query], parsed by
// config::parse_url (one home for what a Redis URL may say). The query's
// node_timeout_ms=N is RedLock's own (redlock_options::node_timeout) and is
// not passed on. Nodes behind Sentinel, or with credentials of their own,
// are opened with backend::redlock(ex, urls) instead.
#pragma once

#include "redlock/redlock_backend.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail {

struct redlock_url {
    std::vector<std::string> nodes;  // one redis:// or rediss:// URL per host, in order
    redlock_options options;
};

// Whether `scheme` (lower case) is a RedLock URL's.
bool is_redlock_scheme(std::string_view scheme) noexcept;

// The fewest hosts a RedLock URL names: with fewer, a majority is every node.
inline constexpr std::size_t min_redlock_url_nodes = 3;

// Splits a RedLock URL into its nodes' URLs and RedLock's options. Throws
// boost::system::system_error: error::invalid_url for a malformed URL (the
// reason as what(), never the password), fewer than min_redlock_url_nodes
// hosts or a host named twice; error::invalid_argument for a bad
// node_timeout_ms.
redlock_url parse_redlock_url(std::string_view url);

}  // namespace corolock::detail
