#include <corolock/metrics.hpp>

#include "core/logging.hpp"
#include "core/metrics_recorder.hpp"
#include "core/utf8.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace corolock {

namespace detail {

void log_observer_failure(spdlog::logger& log, const char* event, const char* what) noexcept {
    try {
        log.error("observer's {} threw: {}", event, escaped{what});
    } catch (...) {
    }
}

void metrics_recorder::granted(observer* o, spdlog::logger& log, std::string_view lock,
                               std::chrono::steady_clock::duration waited,
                               bool contended) noexcept {
    add(acquisitions);
    if (contended) add(contended_acquisitions);
    wait.record(waited);
    notify(o, log, "on_acquired", [&](observer& x) { x.on_acquired(lock, waited, contended); });
}

void metrics_recorder::lost(observer* o, spdlog::logger& log, std::string_view lock,
                            std::string_view why) noexcept {
    add(leases_lost);
    notify(o, log, "on_lost", [&](observer& x) { x.on_lost(lock, why); });
}

void metrics_recorder::renewal_failed(observer* o, spdlog::logger& log, std::string_view lock,
                                      error_code ec) noexcept {
    add(renewals_failed);
    notify(o, log, "on_renewal_failed", [&](observer& x) { x.on_renewal_failed(lock, ec); });
}

void metrics_recorder::release_found_gone(observer* o, spdlog::logger& log, std::string_view lock,
                                          error_code ec) noexcept {
    add(releases_found_gone);
    notify(o, log, "on_release_found_gone",
           [&](observer& x) { x.on_release_found_gone(lock, ec); });
}

void metrics_recorder::term_won(observer* o, spdlog::logger& log, std::string_view election,
                                std::uint64_t epoch) noexcept {
    add(terms_won);
    add(leaders);
    notify(o, log, "on_elected", [&](observer& x) { x.on_elected(election, epoch); });
}

void metrics_recorder::term_resigned(observer* o, spdlog::logger& log, std::string_view election,
                                     std::uint64_t epoch) noexcept {
    add(resignations);
    leaders.fetch_sub(1, std::memory_order_relaxed);
    notify(o, log, "on_resigned", [&](observer& x) { x.on_resigned(election, epoch); });
}

void metrics_recorder::term_lost(observer* o, spdlog::logger& log, std::string_view election,
                                 std::uint64_t epoch) noexcept {
    add(leaderships_lost);
    leaders.fetch_sub(1, std::memory_order_relaxed);
    notify(o, log, "on_leadership_lost",
           [&](observer& x) { x.on_leadership_lost(election, epoch); });
}

metrics_snapshot metrics_recorder::snapshot() const noexcept {
    metrics_snapshot m;
    auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    m.acquisitions = get(acquisitions);
    m.contended_acquisitions = get(contended_acquisitions);
    m.wait = wait.read();
    m.handoff = handoff.read();
    m.renewals_sent = get(renewals_sent);
    m.renewals_failed = get(renewals_failed);
    m.leases_lost = get(leases_lost);
    m.releases_found_gone = get(releases_found_gone);
    m.leaderships_held = get(leaders);
    m.terms_won = get(terms_won);
    m.resignations = get(resignations);
    m.leaderships_lost = get(leaderships_lost);
    return m;
}

}  // namespace detail

namespace {

// Nanoseconds as exact decimal seconds: 250000 -> "0.00025", 10^10 -> "10".
std::string seconds_text(std::uint64_t ns) {
    std::string out = std::to_string(ns / 1'000'000'000);
    auto frac = std::to_string(ns % 1'000'000'000);
    frac.insert(0, 9 - frac.size(), '0');
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (!frac.empty()) out += "." + frac;
    return out;
}

bool valid_label_name(std::string_view n) {
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (n.empty() || !alpha(n[0])) return false;
    // "le" is the histograms' own; "__" names are reserved by Prometheus.
    if (n == "le" || n.substr(0, 2) == "__") return false;
    for (char c : n)
        if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
    return true;
}


class writer {
public:
    explicit writer(const metric_labels& labels) {
        for (const auto& [name, value] : labels) {
            if (!valid_label_name(name)) continue;
            if (!labels_.empty()) labels_ += ',';
            labels_ += name + "=\"" + prometheus_label_value(value) + "\"";
        }
    }

    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }

    void sample(std::string_view name, std::string_view value, std::string_view le = {}) {
        out_ += name;
        if (!labels_.empty() || !le.empty()) {
            out_ += '{';
            out_ += labels_;
            if (!le.empty()) {
                if (!labels_.empty()) out_ += ',';
                out_ += "le=\"";
                out_ += le;
                out_ += '"';
            }
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }

    void scalar(std::string_view name, std::string_view type, std::string_view help,
                std::uint64_t value) {
        family(name, type, help);
        sample(name, std::to_string(value));
    }

    void histogram(const std::string& name, std::string_view help, const duration_histogram& h) {
        family(name, "histogram", help);
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < duration_histogram::bounds.size(); ++i) {
            cumulative += h.buckets[i];
            sample(name + "_bucket", std::to_string(cumulative),
                   seconds_text(static_cast<std::uint64_t>(duration_histogram::bounds[i].count())));
        }
        cumulative += h.buckets.back();
        sample(name + "_bucket", std::to_string(cumulative), "+Inf");
        const auto sum_ns = std::max<std::int64_t>(h.sum.count(), 0);
        sample(name + "_sum", seconds_text(static_cast<std::uint64_t>(sum_ns)));
        sample(name + "_count", std::to_string(cumulative));
    }

    std::string take() { return std::move(out_); }

private:
    std::string labels_;
    std::string out_;
};

}  // namespace

std::string prometheus_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (std::size_t i = 0; i < value.size();) {
        std::uint32_t cp = 0;
        const std::size_t len = detail::utf8_sequence(value, i, cp);
        if (len == 0) {
            out += "\xEF\xBF\xBD";  // U+FFFD
            ++i;
            continue;
        }
        const char c = value[i];
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out.append(value.substr(i, len));
        i += len;
    }
    return out;
}

std::string to_prometheus(const metrics_snapshot& m, const metric_labels& labels) {
    writer w(labels);
    w.scalar("corolock_acquisitions_total", "counter",
             "Acquires granted, re-entries included.", m.acquisitions);
    w.scalar("corolock_contended_acquisitions_total", "counter",
             "Acquires granted after waiting for another owner.", m.contended_acquisitions);
    w.histogram("corolock_acquire_wait_seconds",
                "Time from an acquire's start to its grant, per granted acquire.", m.wait);
    w.histogram("corolock_handoff_seconds",
                "Time from a waiter's wake-up (an unlock message) to its grant.", m.handoff);
    w.scalar("corolock_renewals_total", "counter", "Lease renewals sent by the watchdog.",
             m.renewals_sent);
    w.scalar("corolock_renewal_failures_total", "counter",
             "Renewals that did not extend the lease.", m.renewals_failed);
    w.scalar("corolock_leases_lost_total", "counter", "Held leases lost.", m.leases_lost);
    w.scalar("corolock_releases_found_gone_total", "counter",
             "Releases that found the lock expired or owned by another.", m.releases_found_gone);
    w.scalar("corolock_reconnects_total", "counter", "Connections made after the first.",
             m.reconnects);
    w.scalar("corolock_commands_in_flight", "gauge", "Commands queued or awaiting a reply.",
             m.commands_in_flight);
    w.scalar("corolock_cluster_moved_total", "counter",
             "Redis Cluster MOVED redirections followed.", m.cluster_moved);
    w.scalar("corolock_cluster_ask_total", "counter",
             "Redis Cluster ASK redirections followed (a slot in migration).", m.cluster_ask);
    w.scalar("corolock_cluster_retries_total", "counter",
             "Redis Cluster TRYAGAIN and CLUSTERDOWN replies waited out.", m.cluster_retries);
    w.scalar("corolock_cluster_map_refreshes_total", "counter",
             "Redis Cluster slot map reads after the first.", m.cluster_map_refreshes);
    w.scalar("corolock_redlock_rounds_total", "counter",
             "RedLock acquire rounds over the nodes.", m.redlock_rounds);
    w.scalar("corolock_redlock_rounds_failed_total", "counter",
             "RedLock rounds that did not gather a majority in time.", m.redlock_rounds_failed);
    w.scalar("corolock_leaderships_held", "gauge", "Election terms won and not yet ended.",
             m.leaderships_held);
    w.scalar("corolock_terms_won_total", "counter", "Election campaigns won.", m.terms_won);
    w.scalar("corolock_resignations_total", "counter", "Election terms resigned.",
             m.resignations);
    w.scalar("corolock_leaderships_lost_total", "counter",
             "Election terms lost (their lease could have ended).", m.leaderships_lost);
    return w.take();
}

}  // namespace corolock
