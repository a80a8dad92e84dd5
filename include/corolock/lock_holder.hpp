// Who holds a lock, as every backend records it beside the lock for people
// reading it (corolock status, corolock list, async_lock_status).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace corolock {

// The longest holder label recorded (config::holder_label,
// backend_config::holder_label); a longer one is cut.
inline constexpr std::size_t max_holder_label_length = 256;

// Who holds a lock, as the grant that began the holder's tenure recorded it
// (re-entries do not change it).
struct lock_holder {
    std::string host;      // the holder's host name (spaces and control bytes as '?')
    std::int64_t pid = 0;  // the holder's process id on that host
    // The holder's config::holder_label (Redis client) or
    // backend_config::holder_label (a backend by URL); `corolock run`
    // records its command line. May be empty.
    std::string label;
    // When the tenure began. Redis: by the Redis server's clock. etcd: by
    // the holder's own wall clock (etcd reports no time), so it is only as
    // right as that machine's clock.
    std::chrono::system_clock::time_point since{};
    // How long it has been held: now minus since, never negative. Redis: now
    // by the server's clock. etcd: now by the reader's wall clock, so clocks
    // that disagree between the holder's and the reader's machines move it.
    std::chrono::milliseconds held_for{0};
};

}  // namespace corolock
