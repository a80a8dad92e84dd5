// N independent redis-servers for the RedLock tests, started on free
// loopback ports and stopped by PID (redis_server).
#pragma once

#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <corolock/backend.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>
#include <vector>

namespace corolock::test {

struct redlock_fleet {
    explicit redlock_fleet(std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) servers.push_back(std::make_unique<redis_server>());
    }
    std::vector<std::string> urls() const {
        std::vector<std::string> out;
        for (const auto& s : servers) out.push_back(client_url(*s));
        return out;
    }
    // How many running servers have the lock's key.
    int holding(const std::string& name) const {
        int n = 0;
        for (const auto& s : servers)
            if (s->running()) n += s->cmd1({"EXISTS", lock_key(name)}) == "1";
        return n;
    }
    std::vector<std::unique_ptr<redis_server>> servers;
};

// A fleet, a RedLock backend over it, and two handles (two owners) of one
// lock name: the setting of most RedLock cases.
struct redlock_case {
    redlock_case(std::size_t nodes, const std::string& name)
        : f(nodes),
          locks(corolock::backend::redlock(ioc.get_executor(), f.urls())),
          a(locks, name),
          b(locks, name) {}
    redlock_fleet f;
    boost::asio::io_context ioc;
    corolock::backend locks;
    corolock::mutex a, b;
};

}  // namespace corolock::test
