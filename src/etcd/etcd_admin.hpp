// Operator tools for a lock on etcd: read its state, or force-release it.
// The etcd counterpart of corolock/admin.hpp (Redis), behind `corolock
// status` and `corolock break` with an etcd:// or etcds:// URL. Private to
// corolock's own layers (the CLI); the key layout is etcd_backend.hpp's.
//
// A lock's keys are those under lock_prefix(prefix, name); the holder is
// the key with the lowest create revision, the others wait in that order.
// Each key is  <lock prefix><owner id>,  its value is what the backend
// writes for its holder (the owner id today), attached to the tenure's own
// lease, and its mod revision is the latest fencing token of that tenure.
//
// Breaking a lock is as unsafe as on Redis (see admin.hpp): the holder runs
// on until its watch or watchdog notices the key gone.
#pragma once

#include "etcd/etcd_backend.hpp"
#include "etcd/gateway.hpp"
#include "etcd/transport.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace corolock::detail::etcd {

// One key under a lock's prefix: a holder's or a waiter's.
struct lock_key {
    std::string owner;                // the key's tail after the lock prefix
    std::string value;                // as stored (the backend writes the owner id)
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;    // for the holder: its latest fencing token
    std::int64_t lease = 0;           // 0: the key has no lease
};

struct admin_lock_status {
    bool held = false;
    lock_key holder;                  // when held: the key created first
    // The holder's lease's remaining time, whole seconds as etcd reports it;
    // -1 s when the key has no lease or the lease is gone.
    std::chrono::seconds ttl{0};
    std::vector<lock_key> waiters;    // the other keys, by create revision
    std::int64_t revision = 0;        // the store's revision when read
};

struct admin_break_result {
    bool held = false;                // false: nothing was removed
    lock_key removed;                 // the holder's key as it was
    bool lease_revoked = false;       // removed by revoking its lease (else by a delete)
};

class admin {
public:
    // Parses the URL (etcd_backend.hpp's parse_url) and opens a gateway with
    // these bounds. Throws boost::system::system_error (error::invalid_url,
    // the reason as its text, never the password).
    admin(boost::asio::any_io_executor ex, std::string_view url,
          std::chrono::milliseconds connect_timeout, std::chrono::milliseconds request_timeout);
    ~admin();
    admin(const admin&) = delete;
    admin& operator=(const admin&) = delete;

    // "host:port[,host:port...]" for messages.
    std::string endpoints() const;
    // The lock's key prefix for `name`.
    std::string key_prefix(std::string_view name) const;

    // One range of the lock's prefix (sorted by create revision), then the
    // holder's lease's time to live. Read-only.
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> status(std::string name);

    // Removes the holder's key: revokes its lease (which deletes the key and
    // nothing else: a lease per tenure), or, for a key without a lease or
    // whose lease is already gone, deletes the key if it still has the
    // create revision read. Waiters are left alone; the next one in line
    // sees the deletion on its watch and takes the lock.
    boost::asio::awaitable<std::tuple<error_code, admin_break_result>> break_lock(std::string name);

    // The cause of the last failure, in words.
    failure last_error() const;
    // Ends every request. Idempotent; never throws.
    void stop() noexcept;

private:
    backend_options opts_;
    std::shared_ptr<gateway> wire_;
};

}  // namespace corolock::detail::etcd
