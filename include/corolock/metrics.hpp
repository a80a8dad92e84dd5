// Metrics of one client, and an observer for its lock events.
//
// client::metrics() returns a snapshot of counters the client keeps with
// relaxed atomics: it may be read from any thread at any time, and costs the
// lock machinery no lock and no allocation. to_prometheus() renders a
// snapshot in the Prometheus text exposition format. A config::observer is
// told about each event as it happens. docs/metrics.md defines every figure.
#pragma once

#include <corolock/export.hpp>

#include <corolock/error.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corolock {

// Durations in fixed, log-spaced buckets (1, 2.5, 5 per decade, 0.1 ms to
// 10 s), as Prometheus histograms count them: an observation d goes into
// the first bucket whose bound is >= d; above the last bound, into the
// overflow bucket (le="+Inf").
struct duration_histogram {
    using duration = std::chrono::nanoseconds;
    static constexpr std::array<duration, 16> bounds{
        duration(100'000),       duration(250'000),       duration(500'000),
        duration(1'000'000),     duration(2'500'000),     duration(5'000'000),
        duration(10'000'000),    duration(25'000'000),    duration(50'000'000),
        duration(100'000'000),   duration(250'000'000),   duration(500'000'000),
        duration(1'000'000'000), duration(2'500'000'000), duration(5'000'000'000),
        duration(10'000'000'000)};

    // Observations per bucket (not cumulative); the last is the overflow.
    std::array<std::uint64_t, bounds.size() + 1> buckets{};
    duration sum{};

    // The bucket an observation goes into (bounds.size(): the overflow).
    static constexpr std::size_t bucket_for(duration d) noexcept {
        std::size_t i = 0;
        while (i < bounds.size() && d > bounds[i]) ++i;
        return i;
    }
    std::uint64_t count() const noexcept {
        std::uint64_t n = 0;
        for (auto b : buckets) n += b;
        return n;
    }
};

// One reading of a client's metrics. Counters only rise over the client's
// life; commands_in_flight is a gauge.
struct metrics_snapshot {
    std::uint64_t acquisitions = 0;            // acquires granted, re-entries included
    std::uint64_t contended_acquisitions = 0;  // of those, the ones that waited for another owner
    duration_histogram wait;     // per grant: from the acquire's start to its grant
    duration_histogram handoff;  // per grant after a wake-up: from the wake-up to the grant
    std::uint64_t renewals_sent = 0;
    std::uint64_t renewals_failed = 0;       // did not extend the lease
    std::uint64_t leases_lost = 0;
    std::uint64_t releases_found_gone = 0;   // expired, not_owner or lock_lost
    std::uint64_t reconnects = 0;            // connections made after the first
    std::uint64_t commands_in_flight = 0;    // queued or written, not yet answered
    // Redis Cluster only (zero elsewhere): redirections followed and map
    // reads (docs/topologies.md).
    std::uint64_t cluster_moved = 0;         // MOVED replies: the slot's owner changed
    std::uint64_t cluster_ask = 0;           // ASK replies: a slot in migration
    std::uint64_t cluster_retries = 0;       // TRYAGAIN and CLUSTERDOWN replies waited out
    std::uint64_t cluster_map_refreshes = 0; // slot map reads after the first
    // RedLock only (zero elsewhere): acquire rounds over the nodes, and the
    // ones that did not gather a majority (docs/redlock.md).
    std::uint64_t redlock_rounds = 0;
    std::uint64_t redlock_rounds_failed = 0;
    // Leader election (election.hpp; zero on backends without it):
    // leaderships held now (a gauge), terms won, terms resigned, terms lost.
    std::uint64_t leaderships_held = 0;
    std::uint64_t terms_won = 0;
    std::uint64_t resignations = 0;
    std::uint64_t leaderships_lost = 0;
};

// Label name and value pairs for to_prometheus, e.g. {{"client", "billing"}}.
// Names must match [a-zA-Z_][a-zA-Z0-9_]* (others are skipped); values may be
// any bytes (escaped, and made valid UTF-8).
using metric_labels = std::vector<std::pair<std::string, std::string>>;

// The snapshot in the Prometheus text exposition format (version 0.0.4):
// HELP and TYPE lines, then one line per sample, every family named
// corolock_*; histograms as _bucket{le="..."} (cumulative, le="+Inf" equal
// to _count), _sum and _count, in seconds.
COROLOCK_API std::string to_prometheus(const metrics_snapshot& m, const metric_labels& labels = {});

// A label value escaped as the text format wants it (\\, \", \n), with bytes
// that are not well-formed UTF-8 replaced by U+FFFD.
COROLOCK_API std::string prometheus_label_value(std::string_view value);

// Told about a client's lock events as they happen, for an application to
// export them (set it in config::observer). Every callback runs on the
// client's strand (a thread running the client's executor, one callback at a
// time, in the middle of the client's own work): it must return quickly and
// never block. It may read client::metrics(). An exception it throws is
// caught and logged at error level, and never reaches the lock machinery.
// The defaults do nothing; override what you need.
class COROLOCK_API observer {
public:
    using duration = std::chrono::steady_clock::duration;

    virtual ~observer() = default;

    // An acquire was granted (before its caller resumes). `waited`: from the
    // acquire's start to the grant; `contended`: it had to wait for another
    // owner (see metrics_snapshot::contended_acquisitions).
    virtual void on_acquired(std::string_view /*lock*/, duration /*waited*/, bool /*contended*/) {}
    // A held lease was lost: its guards' lost signals fire now. `why` in words.
    virtual void on_lost(std::string_view /*lock*/, std::string_view /*why*/) {}
    // A renewal did not extend the lease: `ec` is the command's error, or
    // error::expired / not_owner when it found the lock gone, or
    // error::lock_lost when it was confirmed after the lease's deadline.
    virtual void on_renewal_failed(std::string_view /*lock*/, error_code /*ec*/) {}
    // A release of a granted level found the lock gone (expired, not_owner,
    // lock_lost): the work before it was not protected to the end.
    virtual void on_release_found_gone(std::string_view /*lock*/, error_code /*ec*/) {}
    // The client connected again after losing its connection.
    virtual void on_reconnected() {}
    // Leader election (election.hpp): a campaign won the term `epoch` of
    // `election` (before the campaign's caller resumes); the term was
    // resigned (before resign()'s caller resumes; or a leadership dropped);
    // the term was lost (its lease could have ended).
    virtual void on_elected(std::string_view /*election*/, std::uint64_t /*epoch*/) {}
    virtual void on_resigned(std::string_view /*election*/, std::uint64_t /*epoch*/) {}
    virtual void on_leadership_lost(std::string_view /*election*/, std::uint64_t /*epoch*/) {}
};

}  // namespace corolock
