// The lock layer's per-client machinery, on the client's strand:
//  - the unlock-channel subscriptions and local waiters (unlock_waiters),
//  - the watchdog (watchdog_schedule plus one timer),
//  - script execution with the NOSCRIPT fallback (script_call.hpp),
//  - releases handed over by dropped guards, and the waits for them
//    (background_work: drain()).
// redis_lock_state is the shared state of one mutex handle (one owner).
#pragma once

#include "redis/connection/client_impl.hpp"
#include "redis/lock/fair_scripts.hpp"
#include "redis/lock/handoff.hpp"
#include "redis/lock/lock_kind.hpp"
#include "redis/lock/redis_backend.hpp"
#include "redis/lock/script_call.hpp"
#include "redis/lock/scripts.hpp"
#include "core/background_work.hpp"
#include "core/backend.hpp"
#include "core/tenure.hpp"
#include "redis/lock/waiters.hpp"
#include "core/watchdog_schedule.hpp"
#include <corolock/guard.hpp>
#include <corolock/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/container/small_vector.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <set>
#include <span>
#include <string_view>
#include <initializer_list>
#include <string>
#include <vector>

namespace corolock::detail {

class lock_service;
class replica_acks;

// A Redis lock handle's state: the core's, plus the client, the keys and
// the kind (mutex, semaphore, ...: lock_kind.hpp).
struct redis_lock_state final : lock_state {
    // `b` is the client's own backend (redis_backend::shared()): it shares
    // ownership of the client, so the state keeps the client alive without
    // a pointer of its own (every byte here is a byte per waiter, S4).
    // Throws system_error(invalid_argument) for a kind Redis does not offer.
    redis_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                     const lock_spec& s = {});

    client_impl& client() const noexcept {
        return static_cast<const redis_backend&>(*backend).client();
    }
    // The kind is found from the spec at each use (a switch), rather than
    // kept: every byte here is a byte per waiter (S4).
    const lock_kind& kind() const noexcept { return lock_kind::for_valid_spec(spec); }
    const lock_keys keys;
    const lock_spec spec;
};

class lock_service : public connection_listener,
                     public std::enable_shared_from_this<lock_service> {
public:
    using clock = std::chrono::steady_clock;
    using script_handler = detail::script_handler;

    explicit lock_service(std::shared_ptr<client_impl> c);

    // The service of a client, created on first use. Strand only.
    static std::shared_ptr<lock_service> of(client_impl& c);

    // detail::run_script (script_call.hpp) on this service's client.
    void run_script(const script& s, std::shared_ptr<script_call> call, bool idempotent,
                    bool priority = false, bool by_source = false);
    // The same for keys and arguments that are copied and kept (admin calls,
    // clean-up after a lost lease: the rare paths). Serialized before it
    // returns.
    void run_script(const script& s, std::span<const std::string_view> keys,
                    std::span<const std::string_view> args, bool idempotent,
                    script_handler handler, bool by_source = false);
    void run_script(const script& s, std::initializer_list<std::string_view> keys,
                    std::initializer_list<std::string_view> args, bool idempotent,
                    script_handler handler, bool by_source = false) {
        run_script(s, std::span(keys.begin(), keys.size()), std::span(args.begin(), args.size()),
                   idempotent, std::move(handler), by_source);
    }

    // Registers a level granted by an acquire sent at `sent` that asked the
    // server for `granted` (the script made the TTL at least that): begins a
    // tenure with the terms `asked`, or joins them to the live tenure's.
    // Starts or refreshes the watchdog. Returns the level's tenure.
    std::shared_ptr<tenure> on_acquired(const std::shared_ptr<redis_lock_state>& st, std::uint64_t level,
                                        clock::time_point sent, clock::duration granted,
                                        const lease_terms& asked);

    // The live tenure is lost (`why` is logged): its guards' lost signals
    // fire now, renewals stop, and an owner-checked clean-up of each of the
    // tenure's own levels is queued, so it reaches the server before any
    // later acquire of the handle (never every level of the owner: a grant
    // the owner got since is not this tenure's).
    void lose_tenure(const std::shared_ptr<redis_lock_state>& st, const char* why);

    // Drops a level locally (stopping renewal synchronously when it was the
    // last), then runs the owner-checked release script. `t` is the level's
    // tenure: a release of a lost tenure's level never reports success.
    // The handler completes on its associated executor (by dispatch), or by a
    // direct call when `direct` (see detail/completion.hpp) allows it.
    // `granted`: the level was handed to a caller, so a release that finds
    // the lock gone counts in the metrics.
    using release_handler = boost::asio::any_completion_handler<void(error_code)>;
    void release_level(const std::shared_ptr<redis_lock_state>& st, std::uint64_t level,
                       std::shared_ptr<const tenure> t, release_handler handler, bool direct,
                       bool granted = true);
    // The same with nobody waiting for the answer (a dropped guard, a level
    // granted too late): a background job (see work()) until it comes, done
    // for `parent` when that is counted (an abandoned acquire's give-back).
    // `give_back`: the level never reached a caller (it may not be granted).
    void release_in_background(const std::shared_ptr<redis_lock_state>& st, std::uint64_t level,
                               bool give_back = false, const background_work::job& parent = {});

    // Waiters.
    void add_waiter(unlock_waiters::waiter& w, std::string_view channel);
    void remove_waiter(unlock_waiters::waiter& w, bool acquired);
    void rearm_waiter(unlock_waiters::waiter& w) noexcept { waiters_.rearm(w); }
    // A fair mutex's waiters, by owner id (a view of the handle's, alive
    // while registered): a release that names one as the waiter it handed
    // the lock to (">owner level token seq", see fair_scripts.hpp) calls its
    // wake() while fair_grant_in_delivery() points at that grant. The wake()
    // must not add or remove fair waiters. Adding twice, or removing a
    // waiter that is not registered, does nothing.
    void add_fair_waiter(std::string_view owner, unlock_waiters::waiter& w);
    void remove_fair_waiter(std::string_view owner, unlock_waiters::waiter& w) noexcept;
    const fair_grant* fair_grant_in_delivery() const noexcept { return delivering_; }

    // When a local waiter last saw the holder's lease running out (the time
    // point of its TTL cap); min() when no waiter of the channel saw one.
    // Kept while the channel has waiters, dropped with the last of them.
    clock::time_point expiry_hint(std::string_view channel) const;
    void note_expiry_hint(std::string_view channel, clock::time_point t);
    // Until when this process's acquires of the channel's lock hold back, so
    // that waiters in other processes get the lock this process just
    // released: the releaser's own process is awake and would otherwise win
    // nearly every race for the unlock message (cross-process starvation).
    // min() when not yielding.
    clock::time_point yield_until(std::string_view channel);

    // Timed waits of acquire operations (a retry's backoff, a waiter's cap
    // at the lock's TTL or its wait deadline): one timer for all of them,
    // instead of a timer and a pending wait per waiter. Strand only.
    //
    // An acquire in progress, as the service sees it: something that waits
    // (a timed wait) and something to abandon when the client stops (a stop
    // hook, linked intrusively, so registering allocates nothing).
    struct hook_node {
        hook_node* prev = this;  // unlinked: a loop on itself
        hook_node* next = this;
        static void unlink(hook_node& n) noexcept;
        static void link_before(hook_node& n, hook_node& at) noexcept;
    };
    class wait_target : private hook_node {
    public:
        // The wait's time came. Resumes by posting, never inline.
        virtual void wait_over() = 0;
        // The client stopped: answer the caller now.
        virtual void on_client_stopped() = 0;

        wait_target() = default;
        wait_target(const wait_target&) = delete;
        wait_target& operator=(const wait_target&) = delete;

    protected:
        // The implementer unlinks its stop hook before it lets go of the
        // service (see acquire_op).
        ~wait_target() = default;

    private:
        friend class lock_service;
    };
    using wait_list = std::multimap<clock::time_point, std::shared_ptr<wait_target>>;
    // The list keeps the target alive until its time or remove_wait().
    wait_list::iterator add_wait(clock::time_point until, std::shared_ptr<wait_target> target);
    // Takes a wait out before its time (a wake-up, cancellation) and hands
    // back its target, which the list no longer keeps alive.
    std::shared_ptr<wait_target> remove_wait(wait_list::iterator pos) noexcept;
    // Moves a wait's time to `until` if that is sooner. Returns its new position.
    wait_list::iterator hasten_wait(wait_list::iterator pos, clock::time_point until) noexcept;

    // Acquire operations to abandon on stop(). Unregistering an operation
    // that is not registered does nothing.
    void register_stop_hook(wait_target& op) noexcept;
    void unregister_stop_hook(wait_target& op) noexcept;

    // Background clean-up: releases nobody waits for, lost tenures' clean-up,
    // abandoned acquires with a script in flight; and the drains of it.
    background_work& work() noexcept { return *work_; }
    std::size_t background_releases() const noexcept { return work_->outstanding(); }
    const unlock_waiters& waiters() const noexcept { return waiters_; }
    // Takes a waiter out without the UNSUBSCRIBE that remove_waiter() may
    // send: for a destructor, when that failed. Allocates nothing.
    void forget_waiter(unlock_waiters::waiter& w) noexcept { waiters_.remove(w, false); }
    const watchdog_schedule& schedule() const noexcept { return schedule_; }
    std::uint64_t renew_batches() const noexcept { return renew_batches_; }
    // Replica acknowledgement on side connections, opened on first use.
    replica_acks& acks();
    bool stopped() const noexcept { return stopped_; }

    // connection_listener
    void on_connected() override;
    void on_disconnected() override;
    void on_push(const reply& r) override;
    void on_stopped() override;
    void on_abandoned() noexcept override;

private:
    class release_call;
    class renew_call;

    // Re-arms the one watchdog timer for the whole schedule (O(n), once per
    // tick).
    void arm_watchdog();
    // After a change to one entry: arms earlier if that entry is due before
    // the timer would fire (O(1)). A timer left armed for a time when nothing
    // is due any more only costs one early tick, which re-arms it properly.
    void arm_watchdog_for(std::uint64_t watch_id);
    void arm_watchdog_at(clock::time_point next);
    void on_watchdog_tick();
    // Renews (or, with the watchdog off, only checks) every held tenure at
    // once, ahead of other traffic: after a reconnect.
    void verify_held();
    void send_renewal(const std::shared_ptr<redis_lock_state>& st, bool priority);
    // Warns once when the server's eviction policy can evict lock keys.
    void check_eviction_policy();
    // A release's reply: `receivers` got the unlock message (-1: unknown,
    // the release failed); `tracked`: the release was counted in flight.
    void on_release_reply(std::string_view channel, bool tracked, std::int64_t receivers,
                          clock::time_point sent);
    void arm_handoff_timer(std::string_view channel, clock::time_point at);
    void send_subscribe(std::string_view channel, bool subscribe, bool priority);
    void arm_wait_timer();
    void on_wait_timer();
    // A fair mutex's handoff message: wakes the waiter it names, if local.
    void on_fair_grant(std::string_view payload);

    std::weak_ptr<client_impl> client_;
    client_impl& impl_;
    unlock_waiters waiters_;
    std::unordered_map<std::string, clock::time_point, string_hash, std::equal_to<>> expiry_hints_;
    handoff_table handoffs_;  // per-channel fairness between processes
    std::unordered_multimap<std::string_view, unlock_waiters::waiter*> fair_waiters_;
    const fair_grant* delivering_ = nullptr;  // see fair_grant_in_delivery()
    watchdog_schedule schedule_;
    std::map<std::uint64_t, std::weak_ptr<redis_lock_state>> watched_;
    // The node of the last lock let go, reused by the next one taken: a lock
    // taken and released over and over allocates no node after the first.
    decltype(watched_)::node_type spare_watched_;
    // The tenure of the last hold that ended, kept for the next handle's
    // first hold: a lock taken under fresh names, one handle each, then
    // allocates no tenure. Reused only when nothing else refers to it (the
    // ending handle, reacquiring, takes it back). Strand only.
    std::shared_ptr<tenure> spare_tenure_;
    void watch(const std::shared_ptr<redis_lock_state>& st);
    void unwatch(std::uint64_t watch_id) noexcept;
    boost::asio::steady_timer watchdog_timer_;
    clock::time_point armed_at_ = clock::time_point::max();
    wait_list waits_;
    boost::asio::steady_timer wait_timer_;
    bool wait_timer_armed_ = false;  // a wait is pending (or its completion queued)
    hook_node stop_hooks_;  // the list's sentinel
    std::shared_ptr<background_work> work_;
    std::shared_ptr<replica_acks> acks_;  // null until a lock asks for replicas
    std::uint64_t renew_batches_ = 0;
    bool stopped_ = false;
    bool eviction_checked_ = false;
};


}  // namespace corolock::detail
