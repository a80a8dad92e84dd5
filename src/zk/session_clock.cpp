#include "zk/session_clock.hpp"

#include "core/watchdog_schedule.hpp"

#include <algorithm>

namespace corolock::detail::zk {

void session_clock::on_connected(std::int64_t session_id, clock::duration negotiated) noexcept {
    if (session_id != session_id_) {
        session_id_ = session_id;
        deadline_ = clock::time_point::min();
        timeout_ = negotiated;
    } else {
        // The same session through another server: its timeout is fixed at
        // creation, but never trust a longer one than first negotiated.
        timeout_ = std::min(timeout_, negotiated);
    }
    connected_ = true;
}

void session_clock::on_expired() noexcept {
    connected_ = false;
    deadline_ = clock::time_point::min();
    session_id_ = 0;
}

void session_clock::on_answered(clock::time_point sent) noexcept {
    if (session_id_ == 0) return;
    deadline_ = std::max(deadline_, watchdog_schedule::deadline_for(sent, timeout_));
}

}  // namespace corolock::detail::zk
