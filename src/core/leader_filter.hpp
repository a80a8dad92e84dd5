// What election::async_observe reports, sans I/O: readings of a name's
// leader go in, in the order they were read; a reading comes out only when
// it is a change the observer has not been told of, and never one that goes
// back to an older term (docs/election.md, "Observing").
#pragma once

#include <corolock/election.hpp>

#include <cstdint>

namespace corolock::detail {

class leader_filter {
public:
    // True when `seen` is to be reported: the first reading, a term newer
    // than every one reported, a new value proclaimed in the term last
    // reported, or no leader after a leader. Readings of an older term, of
    // a term that was seen to end, or that repeat the last report are not.
    bool accept(const leader_state& seen) {
        if (!started_) {
            started_ = true;
            return remember(seen);
        }
        if (!seen) {
            if (!last_present_) return false;
            last_present_ = false;
            return true;
        }
        if (seen->epoch > last_epoch_) return remember(seen);
        if (seen->epoch == last_epoch_ && last_present_ && seen->value != last_value_)
            return remember(seen);
        return false;
    }

    // The newest epoch reported (0: none yet).
    std::uint64_t last_epoch() const noexcept { return last_epoch_; }

private:
    bool remember(const leader_state& seen) {
        last_present_ = seen.has_value();
        if (seen) {
            last_epoch_ = seen->epoch;
            last_value_ = seen->value;
        }
        return true;
    }

    std::uint64_t last_epoch_ = 0;
    std::string last_value_;
    bool last_present_ = false;
    bool started_ = false;
};

}  // namespace corolock::detail
