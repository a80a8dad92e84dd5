// zk:// URLs: which ensemble, under which path, with which session timeout.
#pragma once

#include <corolock/error.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace corolock::detail::zk {

struct zk_options {
    // "host:port[,host:port...]", as the C client's zookeeper_init() takes it.
    std::string hosts;
    // Every node corolock makes lives under it (made on first use). Not the
    // C client's chroot: corolock creates the path itself.
    std::string root = "/corolock";
    // Asked of the ensemble, which clamps it to [2, 20] ticks by default;
    // the negotiated one is what the lost signal is measured against.
    std::chrono::milliseconds session_timeout{10'000};
    // Recorded in each node's data (core/holder_record.hpp); not in the URL.
    std::string holder_label;
    // Digest credentials (zk://user:password@...). With them the session
    // authenticates, and every node corolock creates (directories and
    // lock nodes) gives all permissions to that identity only and READ to
    // the world: nobody else can create or delete a node in a lock's
    // directory. Empty user: no authentication, and the nodes are open to
    // anyone who reaches the ensemble (docs/security.md).
    std::string user;
    std::string password;
    bool authenticated() const noexcept { return !user.empty(); }
};

// Parses zk://[user:password@]host:port[,host:port...][/root][?session_timeout_ms=N].
// The user and password are %-decoded; neither is ever put in `why`.
// On failure returns error::invalid_url with the reason in `why`.
error_code parse_url(std::string_view url, zk_options& out, std::string& why);

}  // namespace corolock::detail::zk
