// The etcd backend: corolock's mutex on etcd's lease + revision + watch, in
// the way of etcd's own concurrency.Mutex, improved (docs/backends.md).
//
// A lock NAME is the key prefix  <prefix><len(NAME)>:<NAME>/  (the length
// keeps names binary-safe: "a" and "a/b" never share a prefix). A handle's
// tenure is one key under it,  <lock prefix><owner id>,  attached to the
// backend's lease for the lease duration asked for (lease_pool.hpp: one
// lease per duration, shared by all of the backend's locks of it, one
// keep-alive for all of them):
//
//  - acquire: one txn: "if my key has no create revision, put it with the
//    lease; then range the prefix, first by create revision". The owner is
//    the key with the lowest create revision. Only the backend's first
//    acquire of a duration grants the lease (and one after it was lost or
//    revoked when idle).
//  - wait: the waiter's predecessor is the last key created before its own.
//    One watch on the lock's prefix per process, shared by every local
//    waiter and holder of that lock, delivers the predecessor's deletion to
//    the one waiter behind it (no herd). A waiter's wait is also capped at a
//    third of its lease: it looks again then, and starts over if its lease
//    was lost, which also covers a watch that broke.
//  - grant after waiting: a txn "if my key still has its create revision,
//    put it again" both checks that the key survived the wait (etcd 3.4's
//    own Lock could report success after its session expired) and mints the
//    fencing token: the revision of that put.
//  - fencing token: the revision of the write that confirmed ownership (the
//    creating put, or that confirming put, or a re-entry's put): etcd's
//    revision is one counter for the whole cluster, and each grant's write
//    comes after every earlier holder's last write, so tokens rise.
//  - lease deadline: the lease's (lease_pool.hpp): when its last grant or
//    keep-alive that etcd confirmed was *sent*, plus min(lease, granted
//    TTL), minus the drift allowance. The server cannot expire the lease
//    before that. A tenure without the watchdog keeps the deadline it was
//    granted with; past it the tenure is lost and its key deleted.
//  - watchdog: one timer per lease sends its keep-alives and watches its
//    deadline, never waiting for a keep-alive's answer, so one that hangs
//    cannot delay the lost signal. A lease lost (its deadline passed
//    unconfirmed, or etcd says it is gone) loses every tenure under it,
//    each guard's lost signal firing, and is revoked. A tenure without the
//    watchdog has a deadline timer of its own. The shared watch also
//    reports the holder's key deleted (a `break`, a revoked lease) at once.
//  - release: the tenure's last level deletes its key in one txn guarded by
//    the key's create revision, so it removes that tenure's key and no
//    other. A cancelled acquire deletes its key the same way, in the
//    background; drain() waits for such deletes, and for abandoned
//    acquires still on their way to one.
//  - value: each key holds the holder record "<since µs> <pid> <host>
//    <label>" (core/holder_record.hpp, the format the Redis hash's holder
//    field has), for people (corolock status, corolock list); the protocol
//    never reads it. etcd reports no time, so since is the writing client's
//    wall clock: written at the key's creation, and again by the confirming
//    put, so that a holder's since is when its tenure began and a waiter's
//    when it began waiting. A re-entry's put writes the value unchanged.
#pragma once

#include "core/background_work.hpp"
#include "core/backend.hpp"
#include "core/metrics_recorder.hpp"

#include <corolock/backend.hpp>
#include "etcd/etcd_elections.hpp"
#include "etcd/gateway.hpp"
#include "etcd/lease_pool.hpp"

#include <boost/asio/steady_timer.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace corolock::detail::etcd {

struct backend_options {
    gateway_options gateway;
    std::string prefix = "corolock/";  // every key corolock writes starts with it
    // Recorded in each key's value (core/holder_record.hpp); not in the URL.
    std::string holder_label;
};

// Parses etcd://[user[:password]@]host:port[,host:port...][/prefix][?query]
// (etcds:// for TLS). The query may set connect_timeout_ms (per endpoint
// tried) and request_timeout_ms (a whole request, queueing included), both
// gateway_options' defaults otherwise, and for etcds:// ca_file=PATH. On failure returns error::invalid_url and the reason
// (never the password) in why.
error_code parse_url(std::string_view url, backend_options& out, std::string& why);

// The key prefix of a lock name under `prefix`.
std::string lock_prefix(const std::string& prefix, std::string_view name);

class etcd_backend;
class admin;  // etcd_admin.hpp

// A local waiter or holder of a lock, told by the lock's shared watch.
struct prefix_watcher {
    // A key under the prefix was deleted at `revision`.
    virtual void on_deleted(const std::string& key, std::int64_t revision) = 0;
    // The watch was made, broke or restarted: events may have been missed,
    // look again.
    virtual void on_watch_reset() = 0;

protected:
    ~prefix_watcher() = default;
};

struct etcd_lock_state final : lock_state {
    etcd_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                    const std::string& key_prefix);

    const std::string prefix;  // the lock's key prefix
    const std::string key;     // this handle's key: prefix + owner id

    // --- strand only: the live tenure's lease (the pool's) and key ---
    std::int64_t lease_id = 0;
    std::int64_t create_revision = 0;
    std::string value;  // the key's value (its holder record), kept by re-entries
    // The deadline loop of the live tenure ends when its epoch is no longer
    // live.
    std::unique_ptr<boost::asio::steady_timer> deadline_timer;

    // While a tenure is live: its key deleted (a break, a revoked lease)
    // loses it at once.
    struct holder_watch final : prefix_watcher {
        etcd_lock_state* st = nullptr;
        void on_deleted(const std::string& key, std::int64_t revision) override;
        void on_watch_reset() override;
    } holder;
};

class etcd_backend final : public lock_backend,
                           public std::enable_shared_from_this<etcd_backend> {
public:
    etcd_backend(boost::asio::any_io_executor ex, backend_options opts, bool tls,
                 const backend_config& settings = {});
    ~etcd_backend() override;

    void start();

    boost::asio::any_io_executor get_executor() const noexcept override { return executor_; }
    const strand_type& strand() const noexcept override { return strand_; }
    bool stopped() const noexcept override { return stopped_.load(std::memory_order_acquire); }
    spdlog::logger& log() const noexcept override { return *logger_; }
    observer* event_observer() const noexcept override { return observer_.get(); }
    void stop() noexcept override;
    std::string_view scheme() const noexcept override { return tls_ ? "etcds" : "etcd"; }
    metrics_snapshot metrics() const noexcept override;

    using lock_backend::make_state;
    std::shared_ptr<lock_state> make_state(std::string name, const lock_spec& spec) override;
    void acquire(const std::shared_ptr<lock_state>& st, const lock_options& opts,
                 const acquire_request& req, bool try_once,
                 acquire_handler handler, bool direct) override;
    void release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                 std::shared_ptr<const tenure> t, release_handler handler, bool direct) override;
    void release_in_background(const std::shared_ptr<lock_state>& st,
                               std::uint64_t level) override;
    void drain(clock::duration bound, release_handler handler, bool direct) override;
    // The admin seam: etcd_admin.cpp, over this backend's gateway.
    void admin_status(std::string name, status_handler handler) override;
    void admin_list(lock_list_options options, list_handler handler) override;
    void admin_break(std::string name, status_handler handler) override;
    void admin_release_owner(std::string name, std::string owner,
                             release_handler handler) override;
    // Leader election: etcd_elections.cpp. The mutex's keys are served by
    // create revision, first come, first served.
    election_service* elections() noexcept override;
    bool mutex_serves_in_order() const noexcept override { return true; }

    // --- for the acquire operation, on the strand ---
    transport& wire() noexcept { return *gateway_; }
    metrics_recorder& recorder() noexcept override { return metrics_; }
    // Local waiters and holders of a lock share one watch of its prefix.
    // Registers w (until unwatch_prefix); watch_ready() tells when the watch
    // is in place, and w->on_watch_reset() is called then.
    using watcher = prefix_watcher;
    void watch_prefix(const std::string& prefix, watcher* w);
    void unwatch_prefix(const std::string& prefix, watcher* w) noexcept;
    // Whether the prefix's watch is in place (created by etcd).
    bool watch_ready(const std::string& prefix) const;
    // The last revision the prefix's watch has told its watchers of (0: none
    // yet). A watcher registered after a read at revision R has missed
    // nothing when this is at most R.
    std::int64_t watch_seen(const std::string& prefix) const;

    // A tenure of `st` was granted: begin it (or join a re-entry to it).
    std::shared_ptr<tenure> on_granted(const std::shared_ptr<etcd_lock_state>& st,
                                       std::uint64_t level, const lease_terms& terms,
                                       clock::time_point deadline);
    // The live tenure is lost: lost signal now, its key deleted (unless its
    // whole lease is being revoked: delete_key false).
    void lose_tenure(const std::shared_ptr<etcd_lock_state>& st, const char* why,
                     bool delete_key = true);

    // --- the lease pool (lease_pool.hpp), on the strand ---
    // The lease for `duration`, counted as a use until put_back_lease():
    // the pool's, or granted now (one grant for every acquire asking
    // meanwhile). Completes on the strand, never inside this call.
    void obtain_lease(clock::duration duration, handler<std::int64_t> h);
    void put_back_lease(std::int64_t lease_id) noexcept;
    // The lease's local deadline; time_point::min() for a lease lost.
    clock::time_point lease_deadline(std::int64_t lease_id) const noexcept;
    bool lease_alive(std::int64_t lease_id) const noexcept {
        return leases_.alive(lease_id, clock::now());
    }
    // The lease is lost: every tenure under it too, and it is revoked.
    void lose_lease(std::int64_t lease_id, const char* why);

    // Deletes `key` in the background if its create revision is still
    // `create_revision` (a give-back, a cancelled acquire, a lost tenure):
    // a background job until etcd answers, done for `parent` when that is
    // counted (an abandoned acquire's give-back).
    void delete_in_background(const std::string& key, std::int64_t create_revision,
                              const background_work::job& parent = {});
    // Revokes a lease in the background.
    void revoke_in_background(std::int64_t lease_id);
    // Background clean-up (deletes and revokes nobody waits for, abandoned
    // acquires still running) and the drains of it.
    background_work& work() noexcept { return *work_; }
    // A key's value: the holder record, since = now by this machine's clock.
    std::string holder_value() const;

private:
    std::shared_ptr<admin> make_admin() const;
    struct prefix_watch;
    void start_watch(const std::string& prefix);
    friend struct etcd_lock_state::holder_watch;
    void end_tenure(const std::shared_ptr<etcd_lock_state>& st) noexcept;
    void check_key(const std::shared_ptr<etcd_lock_state>& st);
    void arm_deadline(std::shared_ptr<etcd_lock_state> st, std::uint64_t epoch);
    void grant_lease(clock::duration duration);
    void arm_lease(std::int64_t lease_id);
    void on_lease_due(std::int64_t lease_id);
    void send_keepalive(std::int64_t lease_id);
    // Moves the watchdog-run tenures under the lease to its deadline.
    void publish_lease(std::int64_t lease_id);

    boost::asio::any_io_executor executor_;
    strand_type strand_;
    backend_options opts_;
    bool tls_;
    std::string holder_argument_;  // formatted once (holder_argument)
    std::shared_ptr<spdlog::logger> logger_;
    std::shared_ptr<observer> observer_;  // backend_config::observer
    std::shared_ptr<gateway> gateway_;
    metrics_recorder metrics_;
    std::shared_ptr<background_work> work_;  // strand only
    std::atomic<bool> stopped_{false};
    std::map<std::string, std::shared_ptr<prefix_watch>> watches_;  // strand only
    // The handles with a live tenure, by watch_id (for stop() and the
    // lease pool's holders): strand only.
    std::map<std::uint64_t, std::weak_ptr<etcd_lock_state>> holding_;
    lease_pool leases_;  // strand only
    // The acquires waiting for a lease's grant, by duration: strand only.
    std::map<clock::duration, std::vector<handler<std::int64_t>>> lease_waiters_;
    // One timer per lease (keep-alives, deadline, idle grace): strand only.
    std::map<std::int64_t, std::unique_ptr<boost::asio::steady_timer>> lease_timers_;
    etcd_elections elections_{*this, opts_.prefix};
};

// A started etcd backend for `url`, recording holder_label in its keys.
// Throws system_error (invalid_url).
std::shared_ptr<lock_backend> connect(boost::asio::any_io_executor ex, std::string_view url,
                                      const backend_config& settings);

}  // namespace corolock::detail::etcd
