// The one rule for every reconnect and retry loop: steps that start at
// `min` and double up to `max`, each delay drawn with "equal jitter" (half
// the step fixed, half random). Clients that lost the same server together
// then come back spread over half a step instead of in one burst, and no
// delay falls under half a step, so a loop never spins. Sans-I/O: the
// caller waits; a test gives the seed and checks the bounds.
//
// Its users: the Redis client's reconnects, the Sentinel subscription's
// move to the next Sentinel, the Cluster router's retries after TRYAGAIN,
// CLUSTERDOWN or an unreachable node, an acquire's retry after a transient
// failure (acquire_fsm), the etcd watch's restart, ZooKeeper's background
// clean-up after an unanswered delete, PostgreSQL's repeated cancel of a
// waiter's statement.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace corolock::detail {

class backoff {
public:
    using duration = std::chrono::steady_clock::duration;

    // A min under 1 ms is taken as 1 ms (never spin); a max under min as
    // min. Cheap to make (an acquire makes one): the seed comes from a
    // per-thread sequence seeded once by std::random_device.
    backoff(duration min, duration max) noexcept : backoff(min, max, next_seed()) {}
    backoff(duration min, duration max, std::uint32_t seed) noexcept
        : min_(std::max<duration>(min, std::chrono::milliseconds(1))),
          max_(std::max(max, min_)),
          rng_(seed) {}

    // The delay before the next try: the next step (min first, then twice
    // the last, at most max), less a random part of at most half of it.
    duration next() noexcept {
        step_ = step_.count() == 0 ? min_ : std::min(step_ * 2, max_);
        const auto half = step_ / 2;
        std::uniform_int_distribution<duration::rep> jitter(0, half.count());
        return step_ - half + duration(jitter(rng_));
    }

    // After a success, or when the cause is known to be gone: the next
    // delay is drawn from the first step again.
    void reset() noexcept { step_ = {}; }

    // The step of the last delay (zero before the first and after reset):
    // that delay was within [step - step/2, step].
    duration step() const noexcept { return step_; }

private:
    static std::uint32_t next_seed() noexcept {
        // splitmix64 over a per-thread counter: distinct seeds, no lock.
        thread_local std::uint64_t state = [] {
            try {
                std::random_device rd;
                return (std::uint64_t{rd()} << 32) ^ rd();
            } catch (...) {
                return std::uint64_t{0x9e3779b97f4a7c15ULL};
            }
        }();
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return static_cast<std::uint32_t>(z ^ (z >> 31));
    }

    duration min_, max_, step_{};
    std::minstd_rand rng_;
};

}  // namespace corolock::detail
