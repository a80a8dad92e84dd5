// What the Sentinel tests share on top of the fleet (kept out of
// sentinel_fleet.cpp, which the topology benchmark compiles without the
// test support library).
#pragma once

#include "support/lock_testing.hpp"
#include "support/sentinel_fleet.hpp"

#include <corolock/config.hpp>

#include <chrono>
#include <cstddef>
#include <string>

namespace corolock::test {

// A Sentinel URL with a short connect (500 ms) and command (2 s) timeout,
// so that a failover or a wrong service name costs a test seconds, not the
// production defaults.
inline corolock::config quick_config(const std::string& url) {
    auto cfg = corolock::config::from_url(url);
    cfg.connect_timeout = std::chrono::milliseconds(500);
    cfg.command_timeout = std::chrono::seconds(2);
    return cfg;
}

// quick_config() of the fleet's URL.
inline corolock::config quick_config_for(const sentinel_fleet& fleet) { return quick_config(fleet.url()); }

// Makes every replica forget a lock, as a promoted replica that missed the
// primary's last writes would (asynchronous replication): writes to a
// replica are its own, never sent on.
inline void forget_on_replicas(sentinel_fleet& fleet, const std::string& name) {
    for (std::size_t i = 1; i < fleet.servers(); ++i) {
        fleet.server(i).cmd({"CONFIG", "SET", "replica-read-only", "no"});
        fleet.server(i).cmd({"DEL", lock_key(name), lock_key(name) + ":fence"});
    }
}

}  // namespace corolock::test
