// corolock::election: leader election on one name, a recipe over a first
// come, first served mutex (docs/election.md).
//
//   corolock::election e{backend, "scheduler"};
//   auto term = co_await e.campaign("host-a:8080", {.lease = 10s});
//   co_await (run_scheduler(term.epoch()) || term.until_lost());
//   co_await term.resign();
//
// A campaign is an acquire of the name's fair mutex, or of its plain mutex
// where that one is first come, first served already (etcd, ZooKeeper),
// followed by the write of the leader's value; the epoch is the grant's
// fencing token, so it follows the lock token's rules: strictly larger than
// every epoch of the name before it. Observers (any process, candidate or
// not) read the leader once (async_leader) or follow each change
// (async_observe), woken by the backend (a pub/sub channel in the name's
// slot, etcd and ZooKeeper watches, PostgreSQL's LISTEN/NOTIFY).
//
// Backends: Redis (one server, Sentinel, Cluster), etcd, ZooKeeper,
// PostgreSQL. RedLock answers error::not_supported to every operation.
#pragma once

#include <corolock/export.hpp>

#include <corolock/backend.hpp>
#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_holder.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace corolock {

// The longest leader value a campaign or proclaim accepts, in bytes.
inline constexpr std::size_t max_leader_value_length = 64 * 1024;

// A leader as read from the server.
struct leader_info {
    std::string value;
    // The term's fencing token: the grant's token of the name's fair mutex.
    std::uint64_t epoch = 0;
    // Who leads (host, pid, label, since): the lock's holder record; absent
    // when the record has another shape.
    std::optional<lock_holder> holder;
};

// What async_leader and async_observe report: the leader, or none.
using leader_state = std::optional<leader_info>;

class leadership;
class client;

namespace detail {
class lock_backend;
struct election_state;
struct term_state;
using campaign_signature = void(error_code, leadership);
using leader_signature = void(error_code, leader_state);
using done_signature = void(error_code);

COROLOCK_API void campaign_impl(const std::shared_ptr<election_state>& e, std::string value,
                                lock_options opts,
                                boost::asio::any_completion_handler<campaign_signature> h);
COROLOCK_API void leader_impl(const std::shared_ptr<election_state>& e, bool observe,
                              boost::asio::any_completion_handler<leader_signature> h);
COROLOCK_API void proclaim_impl(const std::shared_ptr<term_state>& t, std::string value,
                                boost::asio::any_completion_handler<done_signature> h);
COROLOCK_API void resign_impl(const std::shared_ptr<term_state>& t,
                              boost::asio::any_completion_handler<done_signature> h);
COROLOCK_API boost::asio::any_io_executor election_executor(
    const std::shared_ptr<election_state>& e) noexcept;
COROLOCK_API boost::asio::any_io_executor term_executor(
    const std::shared_ptr<term_state>& t) noexcept;

// The initiations (detail/completion.hpp): one compiled function each.
struct initiate_election {
    using executor_type = boost::asio::any_io_executor;
    std::shared_ptr<election_state> e;
    executor_type get_executor() const noexcept { return election_executor(e); }
    template <class Handler>
    void operator()(Handler&& h, std::string value, lock_options opts) const {
        campaign_impl(e, std::move(value), opts,
                      erase_keeping_work<campaign_signature>(std::forward<Handler>(h),
                                                             get_executor()));
    }
    template <class Handler>
    void operator()(Handler&& h, bool observe) const {
        leader_impl(e, observe,
                    erase_keeping_work<leader_signature>(std::forward<Handler>(h),
                                                         get_executor()));
    }
};
struct initiate_term {
    using executor_type = boost::asio::any_io_executor;
    std::shared_ptr<term_state> t;
    executor_type get_executor() const noexcept { return term_executor(t); }
    template <class Handler>
    void operator()(Handler&& h, std::string value) const {
        proclaim_impl(t, std::move(value),
                      erase_keeping_work<done_signature>(std::forward<Handler>(h),
                                                         get_executor()));
    }
    template <class Handler>
    void operator()(Handler&& h) const {
        resign_impl(t, erase_keeping_work<done_signature>(std::forward<Handler>(h),
                                                          get_executor()));
    }
};
}  // namespace detail

// One term of leadership, won by a campaign. Move-only. Its destructor
// resigns in the background (never blocks, never throws) when the term was
// neither resigned nor lost.
class COROLOCK_API leadership {
public:
    using clock = std::chrono::steady_clock;

    leadership() noexcept = default;
    leadership(leadership&&) noexcept = default;
    leadership& operator=(leadership&& other) noexcept;
    leadership(const leadership&) = delete;
    leadership& operator=(const leadership&) = delete;
    ~leadership();

    // True while this term is held (won, not resigned, not moved from); a
    // lost term is still held until resigned: check lost().
    explicit operator bool() const noexcept;

    // The term's fencing token: pass it to whatever the leader writes.
    std::uint64_t epoch() const noexcept;
    // The value last proclaimed by this leader (the campaign's at first).
    const std::string& value() const noexcept;
    // As guard::lease_deadline() and guard::lost().
    clock::time_point lease_deadline() const noexcept;
    bool lost() const noexcept;

    // As guard::async_until_lost: completes with error::lock_lost when the
    // term is lost (its lease could have ended on the server).
    template <class CompletionToken = detail::default_token>
    auto async_until_lost(CompletionToken&& token = {}) const {
        return term_guard().async_until_lost(std::forward<CompletionToken>(token));
    }
    boost::asio::awaitable<void> until_lost() const;

    // Replaces the leader's value, only while this term leads: checked on
    // the server against the lock's owner and this epoch, in one script that
    // also tells the observers. Completes with success, error::lock_lost
    // (the term was lost, or the server holds no such term any more),
    // error::released (resigned, or an empty leadership),
    // error::invalid_argument (a value over max_leader_value_length), or a
    // connection error. Bounded by the command timeout; not cancellable.
    template <class CompletionToken = detail::default_token>
    auto async_proclaim(std::string new_value, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, detail::done_signature>(
            detail::initiate_term{term_}, token, std::move(new_value));
    }
    boost::asio::awaitable<void> proclaim(std::string new_value);

    // Ends the term: releases the name's fair mutex, whose release hands it
    // to the next candidate at once (woken by the release itself), then
    // removes the leader record (owner- and epoch-checked) and tells the
    // observers. Completes as guard::async_release (error::lock_lost after
    // a loss, error::released when resigned already). Idempotent.
    template <class CompletionToken = detail::default_token>
    auto async_resign(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, detail::done_signature>(
            detail::initiate_term{term_}, token);
    }
    // Coroutine form: returns the code async_resign completes with.
    boost::asio::awaitable<error_code> resign();

private:
    friend struct detail::term_state;
    explicit leadership(std::shared_ptr<detail::term_state> t) noexcept : term_(std::move(t)) {}
    const guard& term_guard() const noexcept;

    std::shared_ptr<detail::term_state> term_;
};

class COROLOCK_API election {
public:
    // Throws boost::system::system_error(error::invalid_argument) for a name
    // validate_lock_name refuses. Never throws for a backend without
    // election: its operations answer error::not_supported.
    election(const backend& b, std::string name);
    // On a Redis client's server (client.hpp; declared only here).
    election(client& c, std::string name);
    election(election&&) noexcept = default;
    election& operator=(election&&) noexcept;
    election(const election&) = delete;
    election& operator=(const election&) = delete;
    ~election();

    const std::string& name() const noexcept;

    // Waits to become leader, first come first served among candidates
    // (the name's fair mutex), for at most opts.wait (error::wait_timeout),
    // then writes `value` as the leader's and tells the observers. opts are
    // the lock's: the lease, the renewal, the wait. Completes with the term,
    // or with error::not_supported (a backend without election),
    // error::invalid_argument (bad options, a value over
    // max_leader_value_length, or a campaign of this election already
    // running or leading), error::wrong_type (the name is locked as another
    // kind), a connection error, or operation_aborted. Cancellation
    // (terminal): the wait ends, the queue place is given up, and a term won
    // meanwhile is resigned at once; nothing is left on the server.
    template <class CompletionToken = detail::default_token>
    auto async_campaign(std::string value, lock_options opts = {},
                        CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, detail::campaign_signature>(
            detail::initiate_election{state_}, token, std::move(value), opts);
    }
    // Coroutine form: the term, or boost::system::system_error.
    boost::asio::awaitable<leadership> campaign(std::string value, lock_options opts = {});

    // Reads the current leader once (nullopt: none). Needs no campaign.
    template <class CompletionToken = detail::default_token>
    auto async_leader(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, detail::leader_signature>(
            detail::initiate_election{state_}, token, false);
    }

    // The first call completes with the current state; each later call
    // with the next change: a newer term, a new value proclaimed in the
    // same term, or no leader after a leader. A slow observer may skip
    // terms, but never reports an epoch older than one it reported. Woken
    // by the name's channel; a wait with a leader is capped at the lease
    // left on the server, so a leader that dies is seen gone at its lease
    // end. One observe at a time per election. Cancellation (terminal):
    // operation_aborted.
    template <class CompletionToken = detail::default_token>
    auto async_observe(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, detail::leader_signature>(
            detail::initiate_election{state_}, token, true);
    }

private:
    std::shared_ptr<detail::election_state> state_;
};

}  // namespace corolock
