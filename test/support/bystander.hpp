// Work that must survive whatever a bad-input row (test/integration/
// bad_input_test.cpp, bad_reply_test.cpp) does next to it: a lock held with
// a short lease, so that the watchdog renews it during the row, and a stream
// of INCRs on the same or another client. end() checks that nothing
// happened to either.
#pragma once

#include <corolock/corolock.hpp>

#include "support/redis_server.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>

namespace corolock::test {

class bystander {
public:
    using clock = corolock::guard::clock;

    bystander(corolock::client& c, std::string tag);

    // Takes the lock and starts the INCR stream.
    boost::asio::awaitable<void> begin();

    // Stops the stream and checks, with Catch2, that the lock is still held
    // with its token and was renewed (past its first deadline, and past
    // renewed_after + one lease when given: a renewal after a fault), that
    // every INCR succeeded and the server's counter matches; then releases.
    boost::asio::awaitable<void> end(const redis_server& server, clock::time_point renewed_after = {});

    long long sent() const noexcept { return sent_; }

private:
    boost::asio::awaitable<void> stream();

    corolock::client& client_;
    corolock::mutex mutex_;
    std::string counter_;
    corolock::guard guard_;
    std::uint64_t token_ = 0;
    clock::time_point first_deadline_{};
    long long sent_ = 0, ok_ = 0;
    error_code first_error_;
    bool stop_ = false, done_ = false;
};

}  // namespace corolock::test
