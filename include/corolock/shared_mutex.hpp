// corolock::shared_mutex: a readers-writer lease lock on one Redis name.
//
// A handle is one owner, as with mutex. Through it, acquire() takes the
// exclusive level (a writer) and acquire_shared() a shared one (a reader);
// each returns a guard of its own (release, lost signal, fencing token). The
// levels of one handle share its lease and watchdog, like a mutex's
// re-entries; each reader owner's lease is its own, so a crashed reader's
// share ends at its lease end without cutting the other readers short.
//
// Policy (shared_mutex_options::writer_preference, on by default): a writer
// that waits holds back new readers, so a stream of readers cannot starve
// it; readers already in finish. A waiting writer that dies stops holding
// readers back within min(lease, 2 s). With the option off, readers get in
// whenever no writer holds, and writers may starve. Every handle of one
// name should use the same policy (each acquire applies its own handle's).
//
// A handle holding the exclusive level may take shared levels (re-entry)
// and then release the exclusive one: a downgrade without a gap, which
// downgrade() does in one call. The reverse, an exclusive acquire by a
// handle that holds only shared levels, fails with error::upgrade_refused:
// two readers upgrading at once would each wait for the other's share
// forever. Release the shared level and acquire the exclusive one instead.
//
// A writer's release wakes every waiting reader at once; the last reader's
// release wakes the waiting writers. docs/safety.md ("The shared mutex")
// states the guarantees; docs/protocol.md the keys and scripts. Redis only:
// other backends refuse it with error::invalid_argument. A shared mutex
// and any other kind on the same name refuse each other (error::wrong_type).
// lock_options::replicas is the mutex's only.
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/lock_handle.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>

namespace corolock {

// Redis's own client (client.hpp), which is a backend too; declared only, so
// that a lock header does not compile the Redis client for other backends.
class client;

struct shared_mutex_options {
    // A waiting writer holds back new readers (see above).
    bool writer_preference = true;
};

class COROLOCK_API shared_mutex : public detail::lock_handle {
public:
    // As mutex's constructors; also throws system_error(invalid_argument)
    // for a backend that has no shared mutex.
    shared_mutex(const backend& b, std::string name, shared_mutex_options o = {});
    shared_mutex(client& c, std::string name, shared_mutex_options o = {});

    // Levels (shared and exclusive) this handle holds now (locally known).
    std::size_t held_levels() const noexcept { return levels(); }

    // The exclusive level, as mutex::async_acquire (options, cancellation,
    // associated executor), and error::upgrade_refused when this handle
    // holds only shared levels. A writer that is still waiting when it is
    // cancelled or times out takes its marker back at once.
    template <class CompletionToken = detail::default_token>
    auto async_acquire(lock_options opts, CompletionToken&& token = {}) {
        return initiate({}, opts, std::forward<CompletionToken>(token));
    }
    // A shared level, likewise.
    template <class CompletionToken = detail::default_token>
    auto async_acquire_shared(lock_options opts, CompletionToken&& token = {}) {
        return initiate({.shared = true}, opts, std::forward<CompletionToken>(token));
    }
    // Try once: error::lock_held when another owner writes or readers hold
    // (exclusive), or when another owner writes or (with writer preference)
    // a writer waits (shared). A try never marks itself waiting.
    template <class CompletionToken = detail::default_token>
    auto async_try_acquire(lock_options opts, CompletionToken&& token = {}) {
        return initiate({.try_once = true}, opts, std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = detail::default_token>
    auto async_try_acquire_shared(lock_options opts, CompletionToken&& token = {}) {
        return initiate({.try_once = true, .shared = true}, opts,
                        std::forward<CompletionToken>(token));
    }

    // Coroutine conveniences: acquire throws boost::system::system_error on
    // failure; try_acquire returns an empty optional on lock_held.
    boost::asio::awaitable<guard> acquire(lock_options opts = {}) { return acquire_or_throw({}, opts); }
    boost::asio::awaitable<guard> acquire_shared(lock_options opts = {}) {
        return acquire_or_throw({.shared = true}, opts, "acquire_shared");
    }
    boost::asio::awaitable<std::optional<guard>> try_acquire(lock_options opts = {}) {
        return try_or_throw({}, opts);
    }
    boost::asio::awaitable<std::optional<guard>> try_acquire_shared(lock_options opts = {}) {
        return try_or_throw({.shared = true}, opts, "try_acquire_shared");
    }

    // Downgrade: takes a shared level while `exclusive` (this handle's
    // exclusive guard) holds, then releases `exclusive`, so that no other
    // writer gets in between. Returns the shared guard. Throws
    // system_error: lock_lost when `exclusive` is lost already, else the
    // shared acquire's or the release's error (the shared level is then
    // dropped too: it belonged to the same, lost, tenure).
    boost::asio::awaitable<guard> downgrade(guard& exclusive, lock_options opts = {});
};

}  // namespace corolock
