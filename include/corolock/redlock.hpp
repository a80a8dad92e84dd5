// RedLock (docs/redlock.md) over Redis backends already open, with
// RedLock's own settings: for nodes that each need a configuration a URL
// does not carry (TLS files, timeouts, a logger, a password read
// elsewhere), as the corolock tool opens the nodes of `run --url A --url B
// --url C`. A redlock:// URL and backend::redlock(ex, urls) are the
// simpler forms.
//
//   std::vector<corolock::backend> nodes;
//   for (const auto& cfg : node_configs) nodes.emplace_back(ex, cfg);
//   corolock::redlock_settings rs;
//   rs.node_timeout = 100ms;
//   auto locks = corolock::open_redlock(ex, std::move(nodes), rs);
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>

#include <chrono>
#include <vector>

namespace corolock {

struct redlock_settings {
    // A node that has not answered a round's try within this counts as
    // failed, and its late grant is given back. Zero: 200 ms, as a
    // redlock:// URL without node_timeout_ms.
    std::chrono::steady_clock::duration node_timeout{};
};

// A RedLock backend over `nodes`: independent Redis servers, each one
// server or a Sentinel set (a backend(ex, cfg), a URL's backend, or a
// client's lock_backend(); the handles are kept, so a client's must
// outlive the RedLock backend), 3 or 5 of them for a majority that
// survives a lost node. Its mutex is the only kind, as with
// backend::redlock. Throws boost::system::system_error with
// error::invalid_argument for an empty list, a negative node_timeout, or a
// node that is not a Redis backend of one server or a Sentinel set (a
// Redis Cluster, etcd, ...).
COROLOCK_API backend open_redlock(backend::executor_type ex, std::vector<backend> nodes,
                                  const redlock_settings& settings = {});

}  // namespace corolock
