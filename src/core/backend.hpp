// The seam between the protocol-free lock core and the backends.
//
// The core (this folder) owns what every backend shares: a handle's state
// (lock_state: its levels, its tenure, its lost signal), the guard, the
// public mutex's validation and normalisation of options, the acquire state
// machine, the waiter lists and the watchdog schedule. A backend (src/redis,
// src/etcd, ...) implements lock_backend: it makes a handle's state (its own
// subclass of lock_state, with its keys or paths), runs acquires with the
// core's machine, releases levels and renews tenures over its protocol, and
// counts the clean-up it does in the background (core/background_work.hpp)
// so that drain() can wait for it.
//
// Dependencies point one way: backends include core headers, never the
// reverse. Everything a backend does with a lock_state happens on its strand.
#pragma once

#include "core/inner_executor.hpp"
#include "core/tenure.hpp"

#include <corolock/admin.hpp>
#include <corolock/error.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>
#include <corolock/lock_type.hpp>
#include <corolock/locked_sql.hpp>
#include <corolock/metrics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/container/small_vector.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace spdlog { class logger; }
namespace corolock { class observer; }

namespace corolock::detail {

class lock_backend;
class election_service;
struct metrics_recorder;

// Why this build cannot open a URL of `scheme` (lower case: "zk",
// "postgresql", "postgres"): its backend was left out when corolock was
// built. Empty when it can (src/connect.cpp).
std::string left_out_backend(std::string_view scheme);


// What kind of lock a handle is, with its fixed parameters. Every kind
// shares the core's tenure, guard, watchdog and lost signal; a backend that
// offers only some kinds refuses the others in make_state().
// Eight bytes: a Redis handle keeps it (a byte per waiter counts, S4).
struct lock_spec {
    using kind_t = corolock::lock_type;  // the one kind enum, the public API's
    std::uint32_t capacity = 0;     // semaphore: the permits in all
    kind_t kind = kind_t::mutex;
    bool writer_preference = true;  // shared_mutex: a waiting writer holds back new readers
};

// What one acquire asks for beyond its lock_options.
struct acquire_request {
    std::uint32_t permits = 1;  // semaphore: permits to take
    bool shared = false;        // shared_mutex: a reader's level
    // shared_mutex: a refused writer marks itself waiting (not a try). Set
    // by the backend from its try_once.
    bool waits = true;
};

// Checks and completes options for an acquire of any kind: the defaults
// filled in (renew_interval, replicas_timeout). On error, `why` says what is
// wrong.
error_code normalize_options(lock_options& o, std::string& why);

struct lock_state;
// The state of one mutex handle (one owner), shared by the handle and its
// guards. A backend derives from it to add what its protocol needs (keys,
// a lease id, ...), and makes it in lock_backend::make_state().
struct lock_state : std::enable_shared_from_this<lock_state> {
    using clock = std::chrono::steady_clock;

    lock_state(std::shared_ptr<lock_backend> b, std::string lock_name, std::string owner_id);
    lock_state(const lock_state&) = delete;
    lock_state& operator=(const lock_state&) = delete;

    const std::shared_ptr<lock_backend> backend;
    const std::string name;
    const std::string owner;
    const std::uint64_t watch_id;  // this handle's id in a watchdog schedule

    // --- strand only ---
    std::uint64_t next_level = 1;
    // Ids of the levels held now: usually one, kept inline.
    boost::container::small_vector<std::uint64_t, 1> levels;
    // The tenure the levels belong to (kept after it ends, for reuse). Its
    // terms are the one home of the lease, the renewal interval and the
    // watchdog setting while the handle holds the lock.
    std::shared_ptr<tenure> current;
    std::uint64_t tenures = 0;     // tenures begun; the next one's epoch is this + 1
    std::uint64_t lost_epoch = 0;  // the newest tenure that was lost (0: none)
    // The live tenure: null when no level is held.
    tenure* live() const noexcept { return levels.empty() ? nullptr : current.get(); }
    // A condition variable: cancel() on lost. Made by the first until_lost()
    // wait, so that a held lock nobody watches does not carry a timer.
    std::unique_ptr<boost::asio::steady_timer> lost_signal;
    boost::asio::steady_timer& lost_timer();
    void signal_lost() noexcept {
        if (lost_signal) lost_signal->cancel();
    }

    // --- any thread ---
    std::atomic<std::size_t> held{0};

protected:
    // Not virtual: every state is made by make_shared of its own type, whose
    // control block destroys it as that type, and a vtable pointer would be
    // a word more per waiter and per held lock (S4, S5).
    ~lock_state() = default;
};

// One connection to a lock service, as the core sees it.
class lock_backend {
public:
    using strand_type = boost::asio::strand<inner_executor>;
    using clock = std::chrono::steady_clock;
    using acquire_handler = boost::asio::any_completion_handler<void(error_code, guard)>;
    using release_handler = boost::asio::any_completion_handler<void(error_code)>;

    virtual ~lock_backend() = default;

    // The executor completions default to (the user's).
    virtual boost::asio::any_io_executor get_executor() const noexcept = 0;
    // The strand every lock_state of this backend lives on.
    virtual const strand_type& strand() const noexcept = 0;
    // Nothing can be sent any more (stopped, or the lock layer was).
    virtual bool stopped() const noexcept = 0;
    virtual spdlog::logger& log() const noexcept = 0;
    // The user's observer (config::observer, backend_config::observer), told
    // of this backend's lock events through metrics_recorder; null: none.
    virtual observer* event_observer() const noexcept = 0;
    // Ends every connection and background task. Idempotent, never throws.
    virtual void stop() noexcept = 0;
    // The backend's URL scheme ("redis", "etcd", ...), for messages.
    virtual std::string_view scheme() const noexcept = 0;
    virtual metrics_snapshot metrics() const noexcept = 0;
    // The counters metrics() reads, which the lock and election layers add to
    // (on strand()).
    virtual metrics_recorder& recorder() noexcept = 0;

    // A new handle's state; the name is valid. Any thread. Throws
    // system_error(error::invalid_argument) for a kind this backend does not
    // offer.
    virtual std::shared_ptr<lock_state> make_state(std::string name, const lock_spec& spec) = 0;
    // What the server locks for `name`: two names with one key exclude each
    // other. The name itself, except where the server locks a hash of it
    // (PostgreSQL's advisory key): a multi_lock refuses two names of one key,
    // which would otherwise wait for each other.
    virtual std::string exclusion_key(std::string_view name) const { return std::string(name); }
    std::shared_ptr<lock_state> make_state(std::string name) {
        return make_state(std::move(name), lock_spec{});
    }
    // Whether acquires of a handle of `spec` honour lock_options::lock_delay
    // (core/lock_delay.hpp). Where not, the core refuses a nonzero delay with
    // error::not_supported before any request (docs/safety.md, "Lock-delay").
    virtual bool offers_lock_delay(const lock_spec&) const noexcept { return false; }

    // Starts an acquire of `st` with normalised options. Any thread: the
    // backend hops to its strand. The handler is completed once, on its
    // associated executor (or directly when `direct`, see completion.hpp),
    // never inside this call.
    // `req` fits the handle's kind (the public type checked it).
    virtual void acquire(const std::shared_ptr<lock_state>& st, const lock_options& opts,
                         const acquire_request& req, bool try_once, acquire_handler handler,
                         bool direct) = 0;

    // Strand only. Releases one level (owner-checked); `t` is the level's
    // tenure: a release of a lost tenure's level never reports success.
    virtual void release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                         std::shared_ptr<const tenure> t, release_handler handler,
                         bool direct) = 0;
    // Strand only. The same with nobody waiting for the answer (a dropped
    // guard).
    virtual void release_in_background(const std::shared_ptr<lock_state>& st,
                                       std::uint64_t level) = 0;
    // Any thread. The holder gives tenure `t` of `st` up as lost (a RedLock
    // whose quorum is gone): its lost signal fires, and the clean-up on the
    // server keeps a lock-delay's record, which a release would delete. A
    // later release of its levels finds them gone. Default: nothing, for
    // backends that offer no lock-delay.
    virtual void abandon_tenure(const std::shared_ptr<lock_state>& st,
                                std::shared_ptr<const tenure> t, const char* why);

    // Any thread. Runs a caller's statements in one transaction with the
    // lock of `st`'s live tenure `t` (corolock/locked_sql.hpp); completes as
    // acquire() does. Backends without SQL answer error::invalid_argument.
    virtual void execute_locked(const std::shared_ptr<lock_state>& st, std::shared_ptr<tenure> t,
                                std::vector<sql_statement> statements, sql_handler handler,
                                bool direct);

    // Any thread. Completes once the background clean-up begun before this
    // call is done (see core/background_work.hpp), on the handler's
    // associated executor (or directly when `direct`), never inside this call.
    virtual void drain(clock::duration bound, release_handler handler, bool direct) = 0;

    // The admin seam (corolock/admin.hpp): a lock seen from outside, by an
    // operator or a resource checking a token. Any thread; `name` is valid
    // (core/admin.cpp checked it). Each handler is completed once, on its
    // associated executor, never inside the call; cancellation (terminal,
    // partial) through the handler's slot completes it with
    // operation_aborted. A backend that cannot do one leaves it to these
    // defaults, which answer error::not_supported.
    using status_handler = boost::asio::any_completion_handler<void(error_code, lock_status)>;
    using list_handler = boost::asio::any_completion_handler<void(error_code, lock_list)>;
    // One lock's state, read-only.
    virtual void admin_status(std::string name, status_handler handler);
    // What the sequencer check reads (async_check_token; core/admin.cpp
    // applies its rule): a status of which only `held` and `last_token`
    // count, read-only. The default reads the whole status; a backend with
    // a cheaper read of those two overrides it.
    virtual void admin_token_state(std::string name, status_handler handler);
    // The locks held now whose name matches options.pattern, within its bounds.
    virtual void admin_list(lock_list_options options, list_handler handler);
    // Removes the holder whoever it is; answers what was removed.
    virtual void admin_break(std::string name, status_handler handler);
    // Removes the hold of `owner` (not empty) only: success, or
    // error::expired (nobody holds it), error::not_owner (others do).
    virtual void admin_release_owner(std::string name, std::string owner, release_handler handler);

    // Leader election beyond the fair mutex (core/election_service.hpp);
    // null where the backend has none (corolock::election answers
    // error::not_supported).
    virtual election_service* elections() noexcept { return nullptr; }
    // Whether this backend's plain mutex already serves waiters first come,
    // first served (a server-side queue): an election then queues its
    // candidates on it instead of the fair mutex (docs/election.md).
    virtual bool mutex_serves_in_order() const noexcept { return false; }
};

// A fresh 128-bit owner id from the OS CSPRNG, as 32 hex digits.
std::string random_owner_id();

}  // namespace corolock::detail
