// The RedLock backend: one lock name held on a majority of N independent
// Redis nodes (docs/redlock.md), behind the core's seam, so that
// corolock::mutex, its guard, lost signal and cancellation work unchanged.
//
// Composition: each node is a Redis backend of its own (any URL corolock
// accepts), and a RedLock handle holds one corolock::mutex per node. A round
// tries the mutex on every node at once (its acquire script, its owner
// check), each bounded by the per-node timeout (a cancelled try gives a late
// grant back, as every corolock acquire does). redlock_quorum decides; a
// failed round releases everywhere at once. A contended waiter waits on
// every node's unlock channel (node_watch) and starts its next round when
// any node that refused it publishes a release. While held, every node's own watchdog renews its key; this backend reads
// the node guards' deadlines and lost flags at each check and publishes the
// quorum's deadline (the earliest moment a majority could expire the key) as
// the RedLock tenure's.
//
// The mutex kind only; a re-entry joins the live tenure without a round.
#pragma once

#include "core/backend.hpp"
#include "core/metrics_recorder.hpp"
#include "redlock/quorum.hpp"

#include <corolock/backend.hpp>
#include <corolock/guard.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace corolock::detail {

struct redlock_options {
    using duration = std::chrono::steady_clock::duration;
    // A node that has not answered a round's try within this is counted
    // failed (its late grant is given back).
    duration node_timeout = std::chrono::milliseconds(200);
    // A round failed without a refusal (nodes down or slow), or with nodes
    // that cannot wake the waiter: the next one after a random delay in
    // [retry_min, retry_max].
    duration retry_min = std::chrono::milliseconds(50);
    duration retry_max = std::chrono::milliseconds(250);
    // Woken by an unlock message: the next round after a random delay in
    // [0, wake_jitter], so that waiters woken together do not split the
    // nodes between them.
    duration wake_jitter = std::chrono::milliseconds(5);
};

struct redlock_lock_state final : lock_state {
    redlock_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                       const std::vector<corolock::backend>& nodes);

    std::vector<mutex> members;  // one per node, in the nodes' order
    // --- strand only: the live tenure's ---
    std::vector<guard> node_guards;  // per node; empty where not held
    // Per node: cancels the tenure's wait for that node's lost signal.
    std::vector<std::shared_ptr<boost::asio::cancellation_signal>> node_waits;
    redlock_quorum quorum;
    std::unique_ptr<boost::asio::steady_timer> check_timer;
};

class redlock_backend final : public lock_backend,
                              public std::enable_shared_from_this<redlock_backend> {
public:
    // `nodes`: 1 or more independent Redis backends (3 or 5 for RedLock).
    // `events`: the user's observer of the RedLock's lock events (null:
    // none); its nodes have their own (connect_redlock).
    redlock_backend(boost::asio::any_io_executor ex, std::vector<backend> nodes,
                    redlock_options opts, std::shared_ptr<observer> events = {});

    boost::asio::any_io_executor get_executor() const noexcept override { return executor_; }
    const strand_type& strand() const noexcept override { return strand_; }
    bool stopped() const noexcept override { return stopped_.load(std::memory_order_acquire); }
    spdlog::logger& log() const noexcept override { return backend_access::impl(nodes_.front())->log(); }
    observer* event_observer() const noexcept override { return observer_.get(); }
    void stop() noexcept override;
    std::string_view scheme() const noexcept override { return "redlock"; }
    // Its own acquire, loss and release figures and rounds; the nodes'
    // renewals, reconnects and commands in flight, summed (docs/redlock.md).
    metrics_snapshot metrics() const noexcept override;
    metrics_recorder& recorder() noexcept override { return metrics_; }

    using lock_backend::make_state;
    std::shared_ptr<lock_state> make_state(std::string name, const lock_spec& spec) override;
    // Where every node honours it: each node's record keeps the delay.
    bool offers_lock_delay(const lock_spec& spec) const noexcept override;
    void acquire(const std::shared_ptr<lock_state>& st, const lock_options& opts,
                 const acquire_request& req, bool try_once, acquire_handler handler,
                 bool direct) override;
    void release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                 std::shared_ptr<const tenure> t, release_handler handler, bool direct) override;
    void release_in_background(const std::shared_ptr<lock_state>& st,
                               std::uint64_t level) override;
    void drain(clock::duration bound, release_handler handler, bool direct) override;

    const redlock_options& options() const noexcept { return opts_; }
    std::size_t size() const noexcept { return nodes_.size(); }

private:
    const strand_type& node_strand(std::size_t i) const noexcept {
        return backend_access::impl(nodes_[i])->strand();
    }
    class round_op;
    friend class round_op;
    // Strand only: every acquire under way ends with client_stopped
    // (redlock_acquire.cpp).
    void abandon_rounds();
    // A round was granted: begin the tenure (or join a re-entry to it).
    guard on_granted(const std::shared_ptr<redlock_lock_state>& st, const lease_terms& terms,
                     std::vector<guard> node_guards);
    // Re-reads the node guards into the quorum, publishes its deadline, and
    // loses the tenure when a majority can no longer be confirmed.
    void check(const std::shared_ptr<redlock_lock_state>& st, std::uint64_t epoch);
    void lose_tenure(const std::shared_ptr<redlock_lock_state>& st, const char* why);
    // Ends the tenure locally and releases every node's guard at once;
    // `done` (may be empty) hears success, or lock_lost for a lost tenure.
    void end_tenure(const std::shared_ptr<redlock_lock_state>& st, release_handler done,
                    bool direct);
    // A node's try was answered and its answer handled (a guard it carried
    // that no round kept is dropped by then, so that node's drain counts
    // its give-back). Strand only.
    void on_try_settled();
    // Every node's drain, once no try is out (or `bound` has passed).
    void drain_nodes(clock::duration bound, release_handler handler, bool direct);

    boost::asio::any_io_executor executor_;
    strand_type strand_;
    std::vector<backend> nodes_;
    redlock_options opts_;
    std::atomic<bool> stopped_{false};
    std::map<std::uint64_t, std::weak_ptr<redlock_lock_state>> holding_;  // strand only
    // Acquires in progress, answered client_stopped by stop(). Strand only.
    std::map<std::uint64_t, std::weak_ptr<round_op>> ops_;
    std::uint64_t next_op_ = 0;
    // Node tries sent and not yet settled, and the drains waiting for none
    // to be out: an answer on its way to the strand may carry a grant to
    // give back, which no node's drain can see yet. Strand only.
    std::size_t tries_out_ = 0;
    std::vector<std::function<void()>> settled_waiters_;
    metrics_recorder metrics_;
    std::shared_ptr<observer> observer_;
    std::atomic<std::uint64_t> rounds_{0}, rounds_failed_{0};
};

// Releases every node's guard at once; `done` (may be empty) hears, after
// the last answer, how many succeeded and why the others did not: a node
// that found the key gone or another owner's (the lease_gone condition)
// before one that did not answer.
using redlock_release_done =
    boost::asio::any_completion_handler<void(std::size_t, error_code)>;
void release_everywhere(std::vector<guard> guards, redlock_release_done done);

// A RedLock backend over `urls` (each a Redis URL, any topology), opened
// with `settings` (each node gets its holder label and logger; the observer
// hears the RedLock's lock events, and its nodes' renewal failures and
// reconnections). Throws system_error(invalid_argument) for fewer than one
// URL, or what a node's URL throws.
std::shared_ptr<lock_backend> connect_redlock(boost::asio::any_io_executor ex,
                                              const std::vector<std::string>& urls,
                                              const backend_config& settings,
                                              redlock_options opts = {});

}  // namespace corolock::detail
