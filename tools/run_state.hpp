// One corolock run's state, shared by its flow (run_command.cpp) and the
// coroutines that watch beside it (run_watch.cpp).
#pragma once

#include "cli.hpp"
#include "run_child.hpp"
#include "run_lock.hpp"

#include <corolock/backend.hpp>
#include <corolock/client.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/signal_set.hpp>

#include <spdlog/spdlog.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace corolock::cli {

enum class phase { starting, running, finishing };

struct run_state {
    run_state(const run_options& opts, client* c, detail::etcd::admin* e, const backend& b,
              boost::asio::signal_set& fwd, boost::asio::signal_set& chld)
        : o(opts), redis(c), etcd(e), locks(b), forwarded(fwd), sigchld(chld) {}

    const run_options& o;
    client* redis;               // a Redis URL: the client behind `locks`
    std::vector<client>* nodes = nullptr;  // several --url: RedLock's, one per node
    detail::etcd::admin* etcd;   // an etcd URL: for the first look at the lock
    store_admin* store = nullptr;  // a zk:// or postgresql:// URL: the same
    const backend& locks;        // the lock's backend, either way
    boost::asio::signal_set& forwarded;
    boost::asio::signal_set& sigchld;
    std::shared_ptr<spdlog::logger> log;

    phase current = phase::starting;
    int pending_signal = 0;                 // received while starting
    boost::asio::cancellation_signal cancel_start; // cancels the PING or the acquire
    child_process child;
    spawn_options spawn;
    bool lost = false;
    const held_lock* held = nullptr;        // while running: for -vv's renewal notes
    const std::set<int>* inherited_fds = nullptr;

    template <class... Args>
    void note(spdlog::format_string_t<Args...> fmt, Args&&... args) {
        if (log) log->info(fmt, std::forward<Args>(args)...);
    }
    template <class... Args>
    void detail(spdlog::format_string_t<Args...> fmt, Args&&... args) {
        if (log) log->debug(fmt, std::forward<Args>(args)...);
    }
    // "lock 'NAME'" or "locks 'A', 'B'" (elect: "the leadership of
    // 'NAME'"), printable, for messages.
    std::string name() const {
        std::string out = o.elect() ? "the leadership of " : o.several() ? "locks " : "lock ";
        for (std::size_t i = 0; i < o.names.size(); ++i)
            out += (i > 0 ? ", '" : "'") + printable(o.names[i]) + "'";
        return out;
    }
    // The command, for messages: "run" or "elect".
    std::string command() const { return o.elect() ? "elect" : "run"; }
    // "pid 123" or "process group 123".
    std::string target() const {
        return (child.own_group() ? "process group " : "pid ") + std::to_string(child.pid());
    }
};

// ---- beside the flow (run_watch.cpp) ----

// The one receiver of SIGINT/SIGTERM/SIGHUP, for the whole run: what a
// signal does depends on the phase.
boost::asio::awaitable<void> signal_pump(run_state& s);
// The child's wait status, once it has exited.
boost::asio::awaitable<int> wait_for_child(run_state& s);
// Runs detached beside the wait for the child, and is never cancelled: it
// acts only while the child runs, so when the child is gone it has nothing
// left to do, and its pending wait dies with the event loop. (Cancelling it
// instead would race: a cancellation emitted before the wait's cancellation
// handler is installed is silently lost, which left the run hanging.)
boost::asio::awaitable<void> handle_loss(run_state& s, const held_lock& g);
// -vv: every renewal, seen as the guard's lease deadline moving forward (the
// library has no renewal callback; its deadline is what a renewal changes).
boost::asio::awaitable<void> note_renewals(run_state& s);
// Gives a level back, bounded by the client's command timeout. Returns the
// release's result.
boost::asio::awaitable<error_code> release(held_lock& g);
// A release given at most `bound`: returns its result, or
// operation_aborted when it had not finished by then (it may still finish
// while corolock exits; the lease's end frees the lock otherwise).
boost::asio::awaitable<error_code> bounded_release(held_lock& g, duration bound);
// An acquire given up (a signal, --wait's end, --no-wait, an error) may
// leave clean-up to the backend: on Redis the release of a grant whose
// script was still on its way, on etcd the guarded delete of the acquire's key
// (its key would otherwise wait ahead of every later waiter). The process
// is about to exit, so it waits for that, bounded by the request timeout.
boost::asio::awaitable<void> drain_abandoned(run_state& s);
// RedLock: one PING to every node at once. Returns ok as soon as a majority
// answered (the others are left to answer in the background, -v notes it),
// or, once a majority is out of reach, reports the unreachable nodes and
// returns the exit status. A signal (cancel_start) ends it early.
boost::asio::awaitable<int> check_majority_reachable(run_state& s);

}  // namespace corolock::cli
