// The counters behind client::metrics(): written on the client's strand,
// read from any thread. Relaxed atomics only: each figure is exact on its
// own, and a reading taken while the client works may be a few events apart
// between figures (a histogram's count is the sum of its buckets, so that
// one always agrees with itself).
#pragma once

#include <corolock/error.hpp>
#include <corolock/metrics.hpp>

#include <atomic>
#include <exception>
#include <string_view>

namespace spdlog { class logger; }

namespace corolock::detail {

class histogram_recorder {
public:
    using duration = duration_histogram::duration;

    void record(duration d) noexcept {
        if (d.count() < 0) d = duration::zero();
        buckets_[duration_histogram::bucket_for(d)].fetch_add(1, std::memory_order_relaxed);
        sum_ns_.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
    }
    duration_histogram read() const noexcept {
        duration_histogram h;
        for (std::size_t i = 0; i < h.buckets.size(); ++i)
            h.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
        h.sum = duration(static_cast<duration::rep>(sum_ns_.load(std::memory_order_relaxed)));
        return h;
    }

private:
    std::array<std::atomic<std::uint64_t>, duration_histogram::bounds.size() + 1> buckets_{};
    std::atomic<std::uint64_t> sum_ns_{0};
};

struct metrics_recorder {
    static void add(std::atomic<std::uint64_t>& counter) noexcept {
        counter.fetch_add(1, std::memory_order_relaxed);
    }

    // The lock layer's counters; the connection's (reconnects, commands in
    // flight) are the backend's to add.
    metrics_snapshot snapshot() const noexcept;

    std::atomic<std::uint64_t> acquisitions{0}, contended_acquisitions{0}, renewals_sent{0},
        renewals_failed{0}, leases_lost{0}, releases_found_gone{0};
    histogram_recorder wait, handoff;
    // Leader election: leaders is a gauge (terms won and not yet ended).
    std::atomic<std::uint64_t> leaders{0}, terms_won{0}, resignations{0}, leaderships_lost{0};

    // Count an event and tell the user's observer (config::observer,
    // backend_config::observer; null: nobody) in one step, so that the
    // figures and what the observer hears cannot drift apart. Strand only;
    // never throw (an observer's exception is logged, see notify()).
    void granted(observer* o, spdlog::logger& log, std::string_view lock,
                 std::chrono::steady_clock::duration waited, bool contended) noexcept;
    void lost(observer* o, spdlog::logger& log, std::string_view lock,
              std::string_view why) noexcept;
    void renewal_failed(observer* o, spdlog::logger& log, std::string_view lock,
                        error_code ec) noexcept;
    void release_found_gone(observer* o, spdlog::logger& log, std::string_view lock,
                            error_code ec) noexcept;
    // A term of an election began, was resigned, was lost (each term ends
    // once: resigned or lost).
    void term_won(observer* o, spdlog::logger& log, std::string_view election,
                  std::uint64_t epoch) noexcept;
    void term_resigned(observer* o, spdlog::logger& log, std::string_view election,
                       std::uint64_t epoch) noexcept;
    void term_lost(observer* o, spdlog::logger& log, std::string_view election,
                   std::uint64_t epoch) noexcept;
};

// Logs an observer's exception; never throws.
void log_observer_failure(spdlog::logger& log, const char* event, const char* what) noexcept;

// Calls `f(*o)` when an observer is set: one branch when none is. Whatever
// the observer throws is logged and dropped.
template <class F>
void notify(observer* o, spdlog::logger& log, const char* event, F&& f) noexcept {
    if (o == nullptr) return;
    try {
        f(*o);
    } catch (const std::exception& e) {
        log_observer_failure(log, event, e.what());
    } catch (...) {
        log_observer_failure(log, event, "an exception not derived from std::exception");
    }
}

}  // namespace corolock::detail
