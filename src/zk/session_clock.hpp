// When a ZooKeeper session's lease is known to hold, without I/O.
//
// The session is the lease of every lock it holds. The ensemble expires it
// once it has heard nothing from the client for the negotiated timeout T
// (rounded up to its tick), counted from when a server received the
// client's last request. So a request sent at s and answered (with anything
// but "session expired") proves the session lives until at least s + T on
// the ensemble's clock; the local deadline is the latest such s, plus T,
// minus the drift allowance every backend takes (core/watchdog_schedule.hpp).
// Curator's "suspended" (no connection, deadline not yet passed) and "lost"
// (deadline passed) become two readings of one number.
//
// A server relays the requests it receives to the leader's session tracker
// at the leader's next ping of it (every tick / 2); a follower cut off from
// the leader still answers reads until it notices (sync limit × tick). The
// deadline trusts an answer from such a follower: docs/backends.md states
// that limit, and the fencing token is what covers it.
#pragma once

#include <chrono>
#include <cstdint>

namespace corolock::detail::zk {

class session_clock {
public:
    using clock = std::chrono::steady_clock;

    // A session was established (or re-established after a reconnect) with
    // the negotiated timeout. A new session id starts a new lease: the
    // deadline waits for its first answered request.
    void on_connected(std::int64_t session_id, clock::duration negotiated) noexcept;
    // The connection dropped: suspended. The deadline does not move.
    void on_disconnected() noexcept { connected_ = false; }
    // The session is gone (expired, closed): lost at once.
    void on_expired() noexcept;
    // A request sent at `sent` was answered by the session's server.
    void on_answered(clock::time_point sent) noexcept;

    bool connected() const noexcept { return connected_; }
    std::int64_t session_id() const noexcept { return session_id_; }
    clock::duration timeout() const noexcept { return timeout_; }
    // min() until a request of this session has been answered.
    clock::time_point deadline() const noexcept { return deadline_; }
    bool lost(clock::time_point now) const noexcept { return now >= deadline_; }
    // How often to send a heartbeat so that the deadline stays ahead: a
    // third of the timeout, as the C client pings an idle connection.
    clock::duration heartbeat_interval() const noexcept { return timeout_ / 3; }

private:
    clock::duration timeout_{};
    clock::time_point deadline_ = clock::time_point::min();
    std::int64_t session_id_ = 0;
    bool connected_ = false;
};

}  // namespace corolock::detail::zk
