// Operator tools for a lock name: read its state, force-release it, or
// release one owner's hold; list the locks held now; and check a fencing
// token against the current holder's grant (a sequencer check).
//
// These are for people and scripts looking at a lock from outside (the
// `corolock status`, `list`, `break` and `check` commands, a resource
// checking a writer's token), not for holders: a holder knows its own state
// from its guard.
//
// Each takes a corolock::backend of any service: it is part of the seam
// every backend implements (docs/architecture.md, "The admin seam"). Redis
// (one server, Sentinel, Cluster) runs one script on the lock's node; etcd
// reads the lock's key range over the backend's own gateway; ZooKeeper and
// PostgreSQL open a session or connection of their own for the call.
// RedLock answers error::not_supported to every operation (a lock held on
// a majority has no one node to read or break). The same operations on a
// Redis client (on client::lock_backend()) are declared in client.hpp.
//
// Breaking a lock is unsafe by design: the holder keeps running until its
// watchdog notices (at most one renewal period), so for that long two
// processes may both believe they hold it. Fencing tokens are what protect
// the resource in that window; break is for clearing a lock whose holder is
// known to be gone, sooner than its lease would.
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/lock_holder.hpp>
#include <corolock/lock_type.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock {

// One owner among several holding a lock at once (a semaphore's holders,
// a shared mutex's readers).
struct lock_owner_status {
    std::string owner;                 // the handle's owner_id()
    std::int64_t levels = 0;           // its grants not released
    std::uint64_t permits = 0;         // the permits they hold together (0: a reader)
    std::chrono::milliseconds ttl{0};  // its lease left, by the server's clock
    std::optional<lock_holder> holder; // absent when none is recorded
};

// At most this many owners are listed in lock_status::holders.
inline constexpr std::size_t max_listed_lock_owners = 16;

struct lock_status {
    // True when some owner holds the lock now (a semaphore: some permits
    // are held under a live lease).
    bool held = false;
    // The kind (lock_type.hpp). On Redis a name whose hash is gone reports
    // mutex, or fair_mutex while its waiting queue is still there.
    lock_type type = lock_type::mutex;
    // The holder's owner id (a mutex handle's owner_id(); a shared mutex's
    // writer); empty when not held, and for a semaphore (see holders).
    std::string owner;
    // Remaining lease as the server sees it (with a lock-delay: the lease
    // left plus the delay, what the server still keeps). Zero when not held; -1 ms when
    // the key exists without a TTL (never the case for corolock's own locks
    // on Redis). A semaphore: the longest lease left among its holders.
    // etcd: the holder's lease, in whole seconds as etcd reports it (-1 ms
    // without a live lease). ZooKeeper and PostgreSQL: -1 ms when held (the
    // holder lasts as long as its session, which has no TTL to read).
    std::chrono::milliseconds ttl{0};
    // Re-entry count: how many levels the holder has acquired and not
    // released. A semaphore: the live grants of all its holders. etcd,
    // ZooKeeper and PostgreSQL keep re-entry in the holder's process: 1 when
    // held.
    std::int64_t levels = 0;
    // The last fencing token minted for this name by anyone, held or not;
    // 0 when no token was ever minted. etcd and ZooKeeper: the holder's
    // latest token (its key's mod revision, its node's mzxid), 0 when not
    // held. PostgreSQL: the name's fence, held or not.
    std::uint64_t last_token = 0;
    // Who holds it. Absent when not held, or when the hash records no holder
    // (written by a corolock older than the holder field, or by hand); a
    // semaphore's holders have theirs in `holders`.
    std::optional<lock_holder> holder;

    // Lock-delay (lock_options::lock_delay): the delay the holder asked
    // for (zero: none, or a backend that does not record it), and how much
    // longer the name stays unavailable because its holder's lease ended
    // without a clean release (zero: not in lock-delay). A name in
    // lock-delay reports held = true, with the holder it had.
    std::chrono::milliseconds lock_delay{0};
    std::chrono::milliseconds delayed_for{0};

    // A fair mutex: the entries in its waiting queue, including those of
    // dead waiters not pruned yet (a script prunes them when they reach the
    // head). A shared mutex: 1 while a waiting writer's marker holds new
    // readers back. 0 for the other kinds on Redis. etcd, ZooKeeper and
    // PostgreSQL: the contenders waiting in line behind the holder.
    std::uint64_t queued = 0;
    // A semaphore: its capacity (the latest acquirer's), the permits held
    // under a live lease, and (below) the owners holding them. 0 otherwise.
    std::uint32_t capacity = 0;
    std::uint64_t permits_in_use = 0;
    // How many owners hold the lock: 1 for a held mutex or fair mutex; a
    // shared mutex's live readers, plus 1 for its writer.
    std::uint64_t holder_count = 0;
    // A semaphore's owners with live grants, ordered by owner id, or a
    // shared mutex's live readers, soonest lease end first (their holder
    // records are not kept); at most max_listed_lock_owners. Empty for the
    // exclusive kinds (their one holder is owner/holder above).
    std::vector<lock_owner_status> holders;
};

// What async_list_locks puts in the lock_list_options fields left zero.
struct lock_list_defaults {
    static constexpr std::size_t count_per_step = 100;
    static constexpr std::size_t max_steps = 10000;
    static constexpr std::size_t max_locks = 10000;
    static constexpr std::chrono::seconds max_time{10};
};

// What async_list_locks looks at, and the bounds that keep it short on a
// large keyspace. Zero means the default (lock_list_defaults).
struct lock_list_options {
    // Which lock names: a Redis glob (SCAN MATCH: *, ?, [abc], \ escapes).
    // Empty means every name. A pattern with '{' or '}' is invalid (no
    // lock name has braces).
    std::string pattern{};
    std::size_t count_per_step = 0;  // SCAN COUNT
    std::size_t max_steps = 0;       // SCAN calls at most
    std::size_t max_locks = 0;       // locks reported at most
    // The whole listing's time. Each command is bounded by
    // config.command_timeout as well.
    std::chrono::steady_clock::duration max_time{};
};

struct listed_lock {
    std::string name;
    lock_status status;  // held is always true; every kind is listed
};

struct lock_list {
    std::vector<listed_lock> locks;  // in SCAN order
    // A bound of lock_list_options ended the scan early: there may be more.
    bool truncated = false;
};

namespace detail {
class lock_backend;
using lock_status_handler = boost::asio::any_completion_handler<void(error_code, lock_status)>;
using lock_list_handler = boost::asio::any_completion_handler<void(error_code, lock_list)>;
using check_token_handler = boost::asio::any_completion_handler<void(error_code, bool)>;
// Compiled once (src/core/admin.cpp): check the arguments, then call the
// backend's seam (core/backend.hpp). `b` may be null (a moved-from backend).
COROLOCK_API void lock_status_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                      lock_status_handler handler);
COROLOCK_API void break_lock_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                     lock_status_handler handler);
COROLOCK_API void release_owner_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                        std::string owner,
                        boost::asio::any_completion_handler<void(error_code)> handler);
COROLOCK_API void list_locks_impl(const std::shared_ptr<lock_backend>& b, lock_list_options options,
                     lock_list_handler handler);
COROLOCK_API void check_token_impl(const std::shared_ptr<lock_backend>& b, std::string name,
                      std::uint64_t token, check_token_handler handler);

// The initiation of every operation below (see detail/completion.hpp):
// erases the handler and calls the operation's compiled function `start`.
// It holds the backend, so a deferred operation outlives a temporary handle
// (client::lock_backend()).
template <class Signature, class... Args>
struct initiate_admin {
    using executor_type = boost::asio::any_io_executor;
    using function = void (*)(const std::shared_ptr<lock_backend>&, Args...,
                              boost::asio::any_completion_handler<Signature>);
    std::shared_ptr<lock_backend> b;
    executor_type ex;  // the backend's; empty without one
    function start;
    executor_type get_executor() const noexcept {
        return ex ? ex : executor_type(boost::asio::system_executor());
    }
    template <class Handler>
    void operator()(Handler&& handler, Args... args) const {
        start(b, std::move(args)...,
              erase_keeping_work<Signature>(std::forward<Handler>(handler), ex));
    }
};
}  // namespace detail

// The token an operation below takes when given none is every async_*'s,
// detail::default_token (deferred): `co_await async_check_token(b, name, t)`
// in a coroutine, errors thrown as system_error.

// Reads a lock's state: one atomic script run on Redis (read-only, so it is
// retried once if the connection drops with it written), one range of the
// lock's keys on etcd, the lock's directory on ZooKeeper, pg_locks and the
// name's row on PostgreSQL.
//
// Completes with the status, or with: error::invalid_argument for a bad
// name (see validate_lock_name); error::wrong_type when the name's key holds
// something that is not a corolock lock (Redis); the backend's connection
// errors (timeout, not_connected, connection_lost, client_stopped);
// error::not_supported on RedLock; operation_aborted on cancellation.
//
// Cancellation (terminal and partial): the operation completes at once with
// operation_aborted; the read may still run, which is harmless here.
template <class CompletionToken = detail::default_token>
auto async_lock_status(const backend& b, std::string_view name, CompletionToken&& token = {}) {
    using signature = void(error_code, lock_status);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<signature, std::string>{detail::backend_access::impl(b), b.get_executor(),
                                                       &detail::lock_status_impl},
        token, std::string(name));
}

// Force-releases a lock whoever holds it. Redis, any kind: deletes the
// lock's hash and publishes on its unlock channel, so waiters everywhere
// wake at once rather than at the lease's end; the fencing counter is kept,
// so tokens go on rising; a fair mutex's queue is kept too (its live
// waiters keep their places, and the queue's head takes the lock at once).
// etcd: revokes the holder's lease (or deletes its key). ZooKeeper: deletes
// the holder's node. PostgreSQL: ends the holder's session
// (pg_terminate_backend; needs the right to signal it, else
// error::no_permission). Waiters elsewhere keep their places. Completes
// with what was removed, as async_lock_status would have reported it just
// before (held == false when nothing was held). Errors as for
// async_lock_status.
//
// Not idempotent: it is never re-sent after a connection loss, because a
// second run could break the *next* holder. A connection_lost or timeout
// result means it may or may not have run; check with async_lock_status.
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted, but a request already written may still break the lock.
template <class CompletionToken = detail::default_token>
auto async_break_lock(const backend& b, std::string_view name, CompletionToken&& token = {}) {
    using signature = void(error_code, lock_status);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<signature, std::string>{detail::backend_access::impl(b), b.get_executor(),
                                                       &detail::break_lock_impl},
        token, std::string(name));
}

// Releases every level (a semaphore: every grant) that `owner` holds on the
// lock, and nothing else: the owner-checked form of async_break_lock ("break
// it only if it is still held by X"). On Redis it reads the lock's kind
// first, then runs that kind's own release, so a fair mutex passes to its
// queue's head and a semaphore's other holders keep their permits (a shared
// mutex's other readers their shares). On etcd, ZooKeeper and PostgreSQL it
// breaks the lock as async_break_lock does, only if `owner` is its holder.
// Completes with success when the owner's hold was released (waiters are
// woken), error::expired when nobody holds it, error::not_owner when others
// hold it but not `owner` (untouched), error::invalid_argument for an empty
// owner, or the errors of async_lock_status.
//
// Redis: idempotent, so it is retried once after a connection loss. Because
// it is queued behind every command the client has already queued, it also
// undoes an acquire by the same owner that is still in flight.
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted; a request already written may still run.
template <class CompletionToken = detail::default_token>
auto async_release_owner(const backend& b, std::string_view name, std::string_view owner,
                         CompletionToken&& token = {}) {
    using signature = void(error_code);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<signature, std::string, std::string>{
            detail::backend_access::impl(b), b.get_executor(), &detail::release_owner_impl},
        token, std::string(name), std::string(owner));
}

// Lists the locks held now, of every kind, with their holders. Redis: SCAN
// (never KEYS) over the lock keys ("corolock:{name}" hashes; fence counters,
// a fair mutex's queue and entries, and other keys are skipped) whose name
// matches options.pattern, then one status script per key found (pipelined
// with the rest of the step; on a Cluster, every primary). etcd: ranges over
// the backend's prefix, read at one revision. ZooKeeper: the lock
// directories under the root. PostgreSQL: the advisory locks granted
// (pg_locks) joined with the names of corolock_locks. A lock taken or
// released during the listing may or may not appear.
//
// Completes with the list, or with: error::invalid_argument for a bad
// pattern; the errors of async_lock_status. A key that turns out not to be
// a corolock lock (WRONGTYPE) is left out.
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted; requests already written still run (all read-only).
//
// With g++ 12, pass options as a named variable inside a co_await, not as a
// braced temporary ({.pattern = "x"}): g++ 12 destroys it twice.
template <class CompletionToken = detail::default_token>
auto async_list_locks(const backend& b, lock_list_options options, CompletionToken&& token = {}) {
    using signature = void(error_code, lock_list);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<signature, lock_list_options>{detail::backend_access::impl(b), b.get_executor(),
                                                             &detail::list_locks_impl},
        token, std::move(options));
}

// The sequencer check (Chubby's CheckSequencer): whether `token` is still
// the current holder's grant of `name`, for a resource that cannot check
// fences itself to ask before it accepts a write. The answer of
// async_lock_status, read more cheaply where the backend can (on Redis one
// small read-only script: for a mutex or fair mutex a GET and an HMGET):
// true when the lock is held and `token` is its latest
// fencing token (lock_status::last_token); false when it is free, or held
// under another grant (a later holder's, or the same holder's later
// re-entry: ask with the guard's latest token). A shared mutex's reader or
// a semaphore's holder is current only while its grant is the latest
// minted. The answer is true when read: a lease can end right after, so a
// resource that must never take a stale write fences it where the data
// lives (docs/safety.md).
//
// Completes with the answer, or with the errors of async_lock_status
// (error::not_supported on RedLock, whose tokens are no fencing tokens).
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted; the read may still run.
template <class CompletionToken = detail::default_token>
auto async_check_token(const backend& b, std::string_view name, std::uint64_t token,
                       CompletionToken&& completion = {}) {
    using signature = void(error_code, bool);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<signature, std::string, std::uint64_t>{
            detail::backend_access::impl(b), b.get_executor(), &detail::check_token_impl},
        completion, std::string(name), token);
}

}  // namespace corolock
