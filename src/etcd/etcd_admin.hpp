// Operator tools for locks on etcd: read a lock's state, force-release it,
// or list the locks held. The etcd counterpart of corolock/admin.hpp
// (Redis), behind `corolock status`, `corolock break` and `corolock list`
// with an etcd:// or etcds:// URL. Private to corolock's own layers (the
// CLI); the key layout is etcd_backend.hpp's.
//
// A lock's keys are those under lock_prefix(prefix, name); the holder is
// the key with the lowest create revision, the others wait in that order.
// Each key is  <lock prefix><owner id>,  attached to its backend's lease for
// the lock's lease duration (shared with its other locks of that duration);
// its value is the holder record (core/holder_record.hpp) of the process
// that wrote it, and its mod revision is the latest fencing token of that
// tenure.
//
// Breaking a lock is as unsafe as on Redis (see admin.hpp): the holder runs
// on until its watch or watchdog notices the key gone.
#pragma once

#include "etcd/etcd_backend.hpp"
#include "etcd/gateway.hpp"
#include "etcd/transport.hpp"

#include <corolock/lock_holder.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace corolock::detail::etcd {

// One key under a lock's prefix: a holder's or a waiter's.
struct lock_key {
    std::string owner;                // the key's tail after the lock prefix
    std::string value;                // as stored: the holder record
    // The value read as a holder record: who wrote the key, and since when
    // by the writer's wall clock (for the holder, when its tenure began; for
    // a waiter, when it began waiting); held_for is the reader's wall clock
    // now minus since. Absent when the value has another shape (a key
    // written by an older corolock holds the owner id alone).
    std::optional<lock_holder> holder;
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

// What list() looks at, and the bounds that keep it short. Zero means the
// default: corolock::lock_list_defaults, as for Redis's list.
struct admin_list_options {
    // Which lock names: a Redis glob (glob_match); empty means every name.
    std::string pattern;
    std::size_t keys_per_page = 0;  // keys per range request (count_per_step)
    std::size_t max_pages = 0;      // range requests at most (max_steps)
    std::size_t max_locks = 0;      // locks reported at most
    // The whole listing's time. Each request is bounded by the request
    // timeout as well.
    std::chrono::steady_clock::duration max_time{};
};

struct admin_listed_lock {
    std::string name;
    admin_lock_status status;  // held is always true
};

struct admin_lock_list {
    std::vector<admin_listed_lock> locks;  // in key order (by name length, then name)
    // A bound of admin_list_options ended the listing early: there may be more.
    bool truncated = false;
    std::int64_t revision = 0;  // the store's revision every page was read at
};

// The lock name and owner id of a key read under the backend's prefix
// ("<prefix><len>:<name>/<owner>"); false when the key has another shape,
// or does not begin with the prefix (a gateway's answer is not trusted to
// stay within the range asked for).
bool split_lock_key(std::string_view key, std::string_view prefix, std::string_view& name,
                    std::string_view& owner) noexcept;

struct admin_break_result {
    bool held = false;                // false: nothing was removed
    // The holder's key as it was. A break deletes that key (checked against
    // its create revision) and never revokes the lease, which the holder
    // shares with its other locks.
    lock_key removed;
};

class admin {
public:
    // Parses the URL (etcd_backend.hpp's parse_url) and opens a gateway with
    // these bounds. Throws boost::system::system_error (error::invalid_url,
    // the reason as its text, never the password).
    admin(boost::asio::any_io_executor ex, std::string_view url,
          std::chrono::milliseconds connect_timeout, std::chrono::milliseconds request_timeout);
    // An admin over a backend's own gateway (the seam: etcd_admin.cpp),
    // which stop() leaves running.
    admin(backend_options opts, std::shared_ptr<gateway> wire);
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

    // The locks held now whose name matches options.pattern: ranges over the
    // backend's prefix in pages of keys_per_page keys, every page read at
    // the first page's revision (one consistent view; a compaction of that
    // revision meanwhile fails the listing with server_error), grouped by
    // lock name, then one lease look-up per lock for its holder's TTL.
    // Read-only.
    boost::asio::awaitable<std::tuple<error_code, admin_lock_list>> list(admin_list_options options);

    // Removes the holder's key if it still has the create revision read;
    // never revokes its lease, which the holder's backend shares with its
    // other locks (lease_pool.hpp). Waiters are left alone; the next one in line
    // sees the deletion on its watch and takes the lock. With `only_owner`
    // not empty, only a holder of that owner id is removed: else
    // error::not_owner (someone else holds it; untouched).
    boost::asio::awaitable<std::tuple<error_code, admin_break_result>> break_lock(
        std::string name, std::string only_owner = {});

    // The cause of the last failure, in words.
    failure last_error() const;
    // Ends every request. Idempotent; never throws.
    void stop() noexcept;

private:
    backend_options opts_;
    std::shared_ptr<gateway> wire_;
    bool owns_wire_ = true;
};

}  // namespace corolock::detail::etcd
