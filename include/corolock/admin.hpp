// Operator tools for a lock name: read its state, or force-release it; and
// list the locks held now.
//
// These are for people and scripts looking at a lock from outside (the
// `corolock status`, `corolock break` and `corolock list` commands), not for
// holders: a holder knows its own state from its guard. Status and break run
// one script on the client's connection, so they are bounded by
// config.command_timeout; list is bounded by its lock_list_options.
//
// Each takes a corolock::client, or a Redis corolock::backend of any
// topology (one server, Sentinel, Cluster: a Cluster cannot be a client).
// On a Cluster, status and break go to the primary serving the lock's slot
// and list scans every primary of the slot map. On a backend of another
// service (etcd) they complete with error::invalid_argument.
//
// Breaking a lock is unsafe by design: the holder keeps running until its
// watchdog notices (at most one renewal period), so for that long two
// processes may both believe they hold it. Fencing tokens are what protect
// the resource in that window; break is for clearing a lock whose holder is
// known to be gone, sooner than its lease would.
#pragma once

#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/lock_holder.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corolock {

// Which kind of lock a name holds: the lock hash's `kind` field
// (docs/protocol.md). A name whose hash is gone reports mutex, or fair_mutex
// while its waiting queue is still there.
enum class lock_type : std::uint8_t { mutex, fair_mutex, shared_mutex, semaphore };

// The protocol's name of a kind, as the CLI prints it: "mutex", "fair",
// "shared", "semaphore".
std::string_view lock_type_name(lock_type t) noexcept;

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
    lock_type type = lock_type::mutex;
    // The holder's owner id (a mutex handle's owner_id(); a shared mutex's
    // writer); empty when not held, and for a semaphore (see holders).
    std::string owner;
    // Remaining lease as the server sees it. Zero when not held; -1 ms when
    // the key exists without a TTL (never the case for corolock's own locks).
    // A semaphore: the longest lease left among its holders.
    std::chrono::milliseconds ttl{0};
    // Re-entry count: how many levels the holder has acquired and not
    // released. A semaphore: the live grants of all its holders.
    std::int64_t levels = 0;
    // The last fencing token minted for this name by anyone, held or not;
    // 0 when no token was ever minted.
    std::uint64_t last_token = 0;
    // Who holds it. Absent when not held, or when the hash records no holder
    // (written by a corolock older than the holder field, or by hand); a
    // semaphore's holders have theirs in `holders`.
    std::optional<lock_holder> holder;

    // A fair mutex: the entries in its waiting queue, including those of
    // dead waiters not pruned yet (a script prunes them when they reach the
    // head). A shared mutex: 1 while a waiting writer's marker holds new
    // readers back. 0 for the other kinds.
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
using lock_status_handler = boost::asio::any_completion_handler<void(error_code, lock_status)>;
void lock_status_impl(client& c, std::string name, lock_status_handler handler);
void break_lock_impl(client& c, std::string name, lock_status_handler handler);
void release_owner_impl(client& c, std::string name, std::string owner,
                        boost::asio::any_completion_handler<void(error_code)> handler);
using lock_list_handler = boost::asio::any_completion_handler<void(error_code, lock_list)>;
void list_locks_impl(client& c, lock_list_options options, lock_list_handler handler);
// The same on a backend (Redis of any topology; etcd: invalid_argument).
void lock_status_impl(const backend& b, std::string name, lock_status_handler handler);
void break_lock_impl(const backend& b, std::string name, lock_status_handler handler);
void list_locks_impl(const backend& b, lock_list_options options, lock_list_handler handler);

// The initiation of every operation below (see detail/completion.hpp):
// erases the handler and calls the operation's compiled function `start`.
// Target: client or const backend.
template <class Target, class Signature, class... Args>
struct initiate_admin {
    using executor_type = boost::asio::any_io_executor;
    using function = void (*)(Target&, Args..., boost::asio::any_completion_handler<Signature>);
    Target* c;
    function start;
    executor_type get_executor() const noexcept { return c->get_executor(); }
    template <class Handler>
    void operator()(Handler&& handler, Args... args) const {
        start(*c, std::move(args)...,
              erase_keeping_work<Signature>(std::forward<Handler>(handler), get_executor()));
    }
};
}  // namespace detail

// Reads a lock's state in one atomic script run (read-only, so it is retried
// once if the connection drops with it written).
//
// Completes with the status, or with: error::invalid_argument for a bad
// name (see validate_lock_name); error::wrong_type when the name's key holds
// something that is not a corolock lock; the connection errors of
// client::async_exec (timeout, not_connected, connection_lost,
// client_stopped); operation_aborted on cancellation.
//
// Cancellation (terminal and partial): the operation completes at once with
// operation_aborted; the script may still run, which is harmless here.
template <class CompletionToken>
auto async_lock_status(client& c, std::string_view name, CompletionToken&& token) {
    using signature = void(error_code, lock_status);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<client, signature, std::string>{&c, &detail::lock_status_impl},
        token, std::string(name));
}
template <class CompletionToken>
auto async_lock_status(const backend& b, std::string_view name, CompletionToken&& token) {
    using signature = void(error_code, lock_status);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<const backend, signature, std::string>{&b,
                                                                      &detail::lock_status_impl},
        token, std::string(name));
}

// Force-releases a lock whoever holds it, of any kind: deletes the lock's
// hash and publishes on its unlock channel, so waiters everywhere wake at
// once rather than at the lease's end. The fencing counter is kept, so
// tokens go on rising. A fair mutex's queue is kept too: its live waiters
// keep their places, and the message (a "*" one) wakes every waiter, so the
// queue's head takes the lock at once. Completes with what was removed, as
// async_lock_status would have reported it just before (held == false when
// nothing was held; a semaphore hash whose leases had all ended is deleted
// all the same). Errors as for async_lock_status.
//
// Not idempotent: it is never re-sent after a connection loss, because a
// second run could break the *next* holder. A connection_lost or timeout
// result means it may or may not have run; check with async_lock_status.
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted, but a script already written may still break the lock.
template <class CompletionToken>
auto async_break_lock(client& c, std::string_view name, CompletionToken&& token) {
    using signature = void(error_code, lock_status);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<client, signature, std::string>{&c, &detail::break_lock_impl},
        token, std::string(name));
}
template <class CompletionToken>
auto async_break_lock(const backend& b, std::string_view name, CompletionToken&& token) {
    using signature = void(error_code, lock_status);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<const backend, signature, std::string>{&b,
                                                                      &detail::break_lock_impl},
        token, std::string(name));
}

// Releases every level (a semaphore: every grant) that `owner` holds on the
// lock, and nothing else: the owner-checked form of async_break_lock ("break
// it only if it is still held by X"). It reads the lock's kind first, then
// runs that kind's own release, so a fair mutex passes to its queue's head
// and a semaphore's other holders keep their permits (a shared mutex's
// other readers their shares). Completes with
// success when the owner's hold was released (waiters are woken),
// error::expired when nobody holds it, error::not_owner when others hold it
// but not `owner` (untouched), or the errors of async_lock_status.
//
// Idempotent, so it is retried once after a connection loss. Because it is
// queued behind every command the client has already queued, it also undoes
// an acquire by the same owner that is still in flight. (A process that gave
// up on its own acquire need not: client::async_drain waits for the
// library's own clean-up of it.)
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted; a script already written may still run.
template <class CompletionToken>
auto async_release_owner(client& c, std::string_view name, std::string_view owner,
                         CompletionToken&& token) {
    using signature = void(error_code);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<client, signature, std::string, std::string>{
            &c, &detail::release_owner_impl},
        token, std::string(name), std::string(owner));
}

// Lists the locks held now, of every kind, with their holders: SCAN (never
// KEYS) over the lock keys ("corolock:{name}" hashes; fence counters, a fair
// mutex's queue and entries, and other keys are skipped) whose name matches options.pattern, then one status script per
// key found (pipelined with the rest of the step). A lock taken or released
// during the scan may or may not appear, as SCAN guarantees nothing more.
//
// Completes with the list, or with: error::invalid_argument for a bad
// pattern; the connection errors of client::async_exec; operation_aborted on
// cancellation. A key that turns out not to be a corolock lock (WRONGTYPE) is
// left out.
//
// Cancellation (terminal and partial): completes at once with
// operation_aborted; commands already written still run (all read-only).
//
// With g++ 12, pass options as a named variable inside a co_await, not as a
// braced temporary ({.pattern = "x"}): g++ 12 destroys it twice.
template <class CompletionToken>
auto async_list_locks(client& c, lock_list_options options, CompletionToken&& token) {
    using signature = void(error_code, lock_list);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<client, signature, lock_list_options>{&c,
                                                                     &detail::list_locks_impl},
        token, std::move(options));
}
template <class CompletionToken>
auto async_list_locks(const backend& b, lock_list_options options, CompletionToken&& token) {
    using signature = void(error_code, lock_list);
    return boost::asio::async_initiate<CompletionToken, signature>(
        detail::initiate_admin<const backend, signature, lock_list_options>{
            &b, &detail::list_locks_impl},
        token, std::move(options));
}

}  // namespace corolock
