// The election seam: what a backend does for corolock::election beyond its
// fair mutex (docs/election.md). A backend that offers election returns its
// service from lock_backend::elections(); the others return null, and
// core/election.cpp answers error::not_supported for them, in one place.
//
// Every function may be called from any thread; handlers complete on their
// associated executors, never inside the call.
#pragma once

#include <corolock/election.hpp>
#include <corolock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace corolock::detail {

// A subscription to the announcements of one name's leader changes.
class leader_watch {
public:
    using clock = std::chrono::steady_clock;
    using done_handler = boost::asio::any_completion_handler<void(error_code)>;

    virtual ~leader_watch() = default;
    // Completes with success at the next announcement (or at once when one
    // came since the last wait), or when `cap` has passed (time to read
    // again: a leader's lease may have ended); clock::duration::max(): no
    // cap. error::client_stopped, or operation_aborted by the handler's
    // cancellation slot (terminal, partial). One wait at a time.
    virtual void wait(clock::duration cap, done_handler h) = 0;
    // For a watch whose close() can no longer run (its io_context is being
    // destroyed with the close still queued): lets go of whatever keeps it
    // alive, touching nothing else. Single-threaded by then.
    virtual void abandon() noexcept {}
    // Ends the subscription; a pending wait completes with operation_aborted.
    virtual void close() noexcept = 0;
};

// One read of a name's leader: the leader, and how long the server still
// holds the name's lock (duration::max() when it is free).
struct leader_reading {
    leader_state leader;
    std::chrono::steady_clock::duration lease_left = std::chrono::steady_clock::duration::max();
};

class election_service {
public:
    using done_handler = boost::asio::any_completion_handler<void(error_code)>;
    using read_handler = boost::asio::any_completion_handler<void(error_code, leader_reading)>;

    virtual ~election_service() = default;

    // Writes `value` as the leader's of the term `epoch` of `owner`, only if
    // the server's lock of `name` is that owner's at that epoch, and
    // announces it. error::lock_lost when it is not.
    virtual void proclaim(std::string name, std::string owner, std::uint64_t epoch,
                          std::string value, done_handler h) = 0;
    // Removes the leader record if it is still the term's (owner, epoch),
    // and announces the change. Success either way.
    virtual void withdraw(std::string name, std::string owner, std::uint64_t epoch,
                          done_handler h) = 0;
    // Reads the leader: present only when the record is the lock's live term.
    virtual void read(std::string name, read_handler h) = 0;
    // Subscribes to the name's announcements (the subscription is made before
    // any later read of the name is sent).
    virtual std::shared_ptr<leader_watch> watch(std::string name) = 0;
};

}  // namespace corolock::detail
