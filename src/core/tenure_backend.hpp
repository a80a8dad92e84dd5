// What every backend whose tenures the core keeps (ZooKeeper, ...) shares,
// in one base class: the executor and strand, the logger, the observer and
// the metrics, the background work and drain(), the stopped flag, the map
// of held states, stop()'s sweep, a release nobody waits for, and each
// held state's deadline timer, from the grant to the loss (docs/
// architecture.md, "One tenure").
//
// A backend derives from tenure_backend, its states from tenure_state, and
// writes its protocol: acquire (an attempt, and the wait or watch between
// attempts), the renewals, release, and these hooks:
//
//  - give_back(st): the tenure ended (its last level released with nobody
//    waiting, or lost): send the server what frees the lock, in the
//    background (work()).
//  - deadline_now(st), deadline_recheck(), deadline_passed(st, now): where
//    the live tenure's deadline comes from, how often it is read again, and
//    why it was lost past it.
//  - on_tenure_end(st): the protocol's part of ending a tenure (its watch,
//    its lease's holder list).
//  - wake_for_stop(), stop_protocol(): stop()'s waiters woken, then its
//    sessions or connections ended.
//
// The tenure's rules themselves (a level added or taken off, a loss) are
// core/tenure.hpp's; the backend calls hold() after begin_or_join began a
// tenure, and lose_tenure() when its protocol says the lock is gone.
// Strand only, unless said otherwise.
#pragma once

#include "core/background_work.hpp"
#include "core/backend.hpp"
#include "core/metrics_recorder.hpp"

#include <corolock/backend.hpp>

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <map>
#include <memory>

namespace corolock::detail {

// A handle's state in a tenure_backend: the live tenure's deadline timer.
struct tenure_state : lock_state {
    using lock_state::lock_state;

    // Made at the first tenure's arm; cancelled when a tenure ends.
    std::unique_ptr<boost::asio::steady_timer> deadline_timer;

protected:
    ~tenure_state() = default;
};

class tenure_backend : public lock_backend,
                       public std::enable_shared_from_this<tenure_backend> {
public:
    // Any thread, like the overrides below unless said.
    boost::asio::any_io_executor get_executor() const noexcept final { return executor_; }
    const strand_type& strand() const noexcept final { return strand_; }
    bool stopped() const noexcept final { return stopped_.load(std::memory_order_acquire); }
    spdlog::logger& log() const noexcept final { return *logger_; }
    observer* event_observer() const noexcept final { return observer_.get(); }
    metrics_snapshot metrics() const noexcept override { return metrics_.snapshot(); }
    metrics_recorder& recorder() noexcept final { return metrics_; }
    background_work& work() noexcept { return *work_; }

    // Marks the backend stopped, then on the strand: wake_for_stop(), every
    // held state's deadline timer cancelled and lost signal fired (its
    // until_lost() waits end), stop_protocol(), the background work's
    // drains answered client_stopped. Idempotent, never throws.
    void stop() noexcept final;
    void drain(clock::duration bound, release_handler handler, bool direct) final;
    // The level taken off; the tenure's last one ends it and give_back().
    void release_in_background(const std::shared_ptr<lock_state>& st,
                               std::uint64_t level) final;

    // The live tenure of `st` is lost (once): lose_live (logged, counted),
    // the tenure ended, the lost signal, give_back().
    void lose_tenure(const std::shared_ptr<tenure_state>& st, const char* why);

protected:
    tenure_backend(boost::asio::any_io_executor ex, const backend_config& settings);

    // A tenure of `st` began (begin_or_join said so): held until it ends.
    void hold(const std::shared_ptr<tenure_state>& st);
    // Ends the live tenure of `st` here (no message to the server): its
    // levels gone, its deadline timer cancelled, on_tenure_end().
    void end_tenure(const std::shared_ptr<tenure_state>& st) noexcept;
    // Arms the deadline timer of `st`'s live tenure `epoch`: at
    // deadline_now(st), or sooner every deadline_recheck(). Past the
    // deadline the tenure is lost; before it, the deadline is published
    // again and the timer re-armed. A re-arm replaces the wait before it.
    void arm_deadline(std::shared_ptr<tenure_state> st, std::uint64_t epoch);
    // A release's answer known on the strand, posted (a failure counted as
    // a release that found its lock gone, and told to the observer).
    void answer_release(const lock_state& st, release_handler h, bool direct, error_code ec);
    // For each held state (a copy of the map: `f` may end tenures).
    template <class F>
    void for_each_held(F&& f) {
        auto holding = holding_;
        for (auto& [id, weak] : holding)
            if (auto st = weak.lock()) f(st);
    }

    // --- the protocol's hooks ---
    virtual void give_back(const std::shared_ptr<tenure_state>& st) = 0;
    virtual clock::time_point deadline_now(const tenure_state& st) const noexcept;
    virtual clock::duration deadline_recheck() const noexcept { return clock::duration::zero(); }
    virtual const char* deadline_passed(const tenure_state& st, clock::time_point now) const;
    virtual void on_tenure_end(const std::shared_ptr<tenure_state>&) noexcept {}
    virtual void wake_for_stop() {}
    virtual void stop_protocol() noexcept {}

    const boost::asio::any_io_executor executor_;
    const strand_type strand_;
    const std::shared_ptr<spdlog::logger> logger_;
    const std::shared_ptr<observer> observer_;  // backend_config::observer
    metrics_recorder metrics_;
    const std::shared_ptr<background_work> work_;

private:
    std::atomic<bool> stopped_{false};
    std::map<std::uint64_t, std::weak_ptr<tenure_state>> holding_;
};

}  // namespace corolock::detail
