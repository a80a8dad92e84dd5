// The one enum that names a lock's kind: the public API's (admin.hpp's
// lock_status::type) and the backends' (a handle's kind) alike.
#pragma once

#include <cstdint>
#include <string_view>

namespace corolock {

// Which kind of lock a name holds. On Redis, the lock hash's `kind` field
// (docs/protocol.md); etcd, ZooKeeper and PostgreSQL offer the mutex only.
enum class lock_type : std::uint8_t { mutex, fair_mutex, shared_mutex, semaphore };

// The protocol's name of a kind, as the CLI prints it: "mutex", "fair",
// "shared", "semaphore".
std::string_view lock_type_name(lock_type t) noexcept;

}  // namespace corolock
