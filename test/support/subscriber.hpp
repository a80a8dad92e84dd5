// A RESP2 subscriber on a blocking loopback socket: a test reads the
// messages a release published, each read bounded in time.
#pragma once

#include "support/redis_server.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace corolock::test {

class subscriber {
public:
    // Subscribes to `channel` and waits (up to 2 s) for the confirmation.
    subscriber(const redis_server& server, const std::string& channel);
    ~subscriber();
    subscriber(const subscriber&) = delete;
    subscriber& operator=(const subscriber&) = delete;

    // The next message's payload; empty when none came within `limit`.
    std::string message(std::chrono::milliseconds limit = std::chrono::milliseconds(2000));

private:
    // One RESP2 array of bulk strings or integers; empty on timeout.
    std::vector<std::string> next(std::chrono::milliseconds limit);
    // Takes one complete array off the buffer, or returns empty.
    std::vector<std::string> parse();

    int fd_ = -1;
    std::string buffer_;
};

}  // namespace corolock::test
