#include "bench.hpp"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <stdexcept>

namespace bench {

run_mode parse_mode(std::string_view s) {
    if (s == "full") return run_mode::full;
    if (s == "quick") return run_mode::quick;
    if (s == "smoke") return run_mode::smoke;
    throw std::invalid_argument("unknown mode: " + std::string(s));
}

std::string_view to_string(run_mode m) {
    switch (m) {
    case run_mode::full: return "full";
    case run_mode::quick: return "quick";
    case run_mode::smoke: return "smoke";
    }
    return "?";
}

std::string json_quote(std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char esc[8];
                std::snprintf(esc, sizeof esc, "\\u%04x", c);
                out += esc;
            } else {
                out.push_back(ch);
            }
        }
    }
    out.push_back('"');
    return out;
}

std::string json_number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[32];
    // %.6g keeps figures readable; these are measurements, not identities.
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

void metrics::number(std::string key, double v) { items_.emplace_back(std::move(key), json_number(v)); }
void metrics::count(std::string key, std::uint64_t v) {
    items_.emplace_back(std::move(key), std::to_string(v));
}
void metrics::text(std::string key, std::string_view v) { items_.emplace_back(std::move(key), json_quote(v)); }
void metrics::flag(std::string key, bool v) { items_.emplace_back(std::move(key), v ? "true" : "false"); }
void metrics::list(std::string key, const std::vector<double>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) s += ",";
        s += json_number(v[i]);
    }
    s += "]";
    items_.emplace_back(std::move(key), std::move(s));
}
void metrics::raw(std::string key, std::string literal) {
    items_.emplace_back(std::move(key), std::move(literal));
}

double metrics::get(std::string_view key) const {
    for (const auto& [k, v] : items_) {
        if (k != key) continue;
        if (v == "true") return 1;
        if (v == "false") return 0;
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (end != v.c_str() && *end == '\0') return d;
        return std::nan("");
    }
    return std::nan("");
}

void metrics::print_lines() const {
    for (const auto& [k, v] : items_) std::printf("%s\t%s\n", k.c_str(), v.c_str());
    std::fflush(stdout);
}

std::int64_t mono_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double percentile_sorted(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return std::nan("");
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

summary summarize(std::vector<double> values) {
    summary s;
    s.n = values.size();
    if (values.empty()) {
        s.mean = s.p50 = s.p90 = s.p99 = s.max = std::nan("");
        return s;
    }
    std::sort(values.begin(), values.end());
    s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    s.p50 = percentile_sorted(values, 0.50);
    s.p90 = percentile_sorted(values, 0.90);
    s.p99 = percentile_sorted(values, 0.99);
    s.max = values.back();
    return s;
}

void add_summary(metrics& m, const std::string& prefix, const summary& s) {
    m.count(prefix + "_n", s.n);
    m.number(prefix + "_mean_us", s.mean);
    m.number(prefix + "_p50_us", s.p50);
    m.number(prefix + "_p90_us", s.p90);
    m.number(prefix + "_p99_us", s.p99);
    m.number(prefix + "_max_us", s.max);
}

std::size_t rss_bytes() {
    // statm: size resident shared text lib data dt, in pages.
    std::ifstream in("/proc/self/statm");
    std::size_t size = 0, resident = 0;
    in >> size >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

double cpu_seconds() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    auto secs = [](const timeval& tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
    };
    return secs(ru.ru_utime) + secs(ru.ru_stime);
}

}  // namespace bench
