// Histogram bucketing and the Prometheus text rendering (metrics.hpp), with
// a small parser of the text exposition format that checks every line.
#include "core/logging.hpp"
#include "core/metrics_recorder.hpp"
#include <corolock/metrics.hpp>

#include <catch2/catch.hpp>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using corolock::duration_histogram;
using corolock::metrics_snapshot;
using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;

namespace {

struct sample {
    std::string name;
    std::map<std::string, std::string> labels;
    std::string value;
};

struct exposition {
    std::map<std::string, std::string> types;  // family -> type
    std::map<std::string, std::string> helps;
    std::vector<sample> samples;
};

bool name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

// Parses one label set "{a="x",b="y"}" starting at text[i] == '{'; fails
// the test on anything the format does not allow.
std::map<std::string, std::string> parse_labels(const std::string& text, std::size_t& i) {
    std::map<std::string, std::string> out;
    REQUIRE(text[i] == '{');
    ++i;
    while (i < text.size() && text[i] != '}') {
        std::string name;
        while (i < text.size() && name_char(text[i], name.empty())) name += text[i++];
        INFO(text);
        REQUIRE_FALSE(name.empty());
        REQUIRE(text.substr(i, 2) == "=\"");
        i += 2;
        std::string value;
        for (;;) {
            REQUIRE(i < text.size());
            const char c = text[i++];
            if (c == '"') break;
            REQUIRE(c != '\n');
            if (c == '\\') {
                REQUIRE(i < text.size());
                const char e = text[i++];
                REQUIRE((e == '\\' || e == '"' || e == 'n'));
                value += e == 'n' ? '\n' : e;
            } else {
                value += c;
            }
        }
        REQUIRE(out.emplace(name, value).second);  // no label twice
        if (text[i] == ',') ++i;
    }
    REQUIRE(i < text.size());
    ++i;  // '}'
    return out;
}

bool is_number(const std::string& v) {
    if (v == "+Inf" || v == "-Inf" || v == "NaN") return true;
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    return !v.empty() && end == v.c_str() + v.size();
}

// Every line is a HELP, a TYPE, or a sample `name{labels} value`; every
// sample belongs to a family whose TYPE came first.
exposition parse_exposition(const std::string& text) {
    exposition out;
    REQUIRE_FALSE(text.empty());
    REQUIRE(text.back() == '\n');
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        INFO("line: " << line);
        REQUIRE_FALSE(line.empty());
        if (line[0] == '#') {
            std::istringstream words(line);
            std::string hash, kind, family;
            words >> hash >> kind >> family;
            REQUIRE((kind == "HELP" || kind == "TYPE"));
            std::string rest;
            std::getline(words, rest);
            REQUIRE(rest.size() > 1);
            if (kind == "TYPE") {
                REQUIRE((rest == " counter" || rest == " gauge" || rest == " histogram"));
                REQUIRE(out.types.emplace(family, rest.substr(1)).second);
            } else {
                REQUIRE(out.helps.emplace(family, rest.substr(1)).second);
            }
            continue;
        }
        sample s;
        std::size_t i = 0;
        while (i < line.size() && name_char(line[i], s.name.empty())) s.name += line[i++];
        REQUIRE_FALSE(s.name.empty());
        if (i < line.size() && line[i] == '{') s.labels = parse_labels(line, i);
        REQUIRE(i < line.size());
        REQUIRE(line[i] == ' ');
        s.value = line.substr(i + 1);
        REQUIRE(is_number(s.value));
        std::string family = s.name;
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
            const std::string x = suffix;
            if (family.size() > x.size() && family.ends_with(x) &&
                out.types.count(family.substr(0, family.size() - x.size())) != 0 &&
                out.types.at(family.substr(0, family.size() - x.size())) == "histogram")
                family.resize(family.size() - x.size());
        }
        REQUIRE(out.types.count(family) == 1);
        REQUIRE(out.helps.count(family) == 1);
        out.samples.push_back(std::move(s));
    }
    return out;
}

std::vector<const sample*> named(const exposition& e, const std::string& name) {
    std::vector<const sample*> out;
    for (const auto& s : e.samples)
        if (s.name == name) out.push_back(&s);
    return out;
}

std::string value_of(const exposition& e, const std::string& name) {
    const auto found = named(e, name);
    REQUIRE(found.size() == 1);
    return found[0]->value;
}

// The histogram's buckets are cumulative, their bounds rise and end in
// +Inf, and +Inf equals _count.
void check_histogram(const exposition& e, const std::string& name, std::uint64_t count) {
    const auto buckets = named(e, name + "_bucket");
    REQUIRE(buckets.size() == duration_histogram::bounds.size() + 1);
    double last_le = -1;
    std::uint64_t last = 0;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        const auto& le = buckets[i]->labels.at("le");
        const auto n = std::stoull(buckets[i]->value);
        CHECK(n >= last);
        last = n;
        if (i + 1 == buckets.size()) {
            CHECK(le == "+Inf");
        } else {
            const double bound = std::stod(le);
            CHECK(bound > last_le);
            CHECK(bound == Approx(std::chrono::duration<double>(duration_histogram::bounds[i]).count()));
            last_le = bound;
        }
    }
    CHECK(buckets.back()->value == value_of(e, name + "_count"));
    CHECK(std::stoull(value_of(e, name + "_count")) == count);
}

}  // namespace

TEST_CASE("metrics: an observation goes into the first bucket whose bound is >= it",
          "[metrics]") {
    using H = duration_histogram;
    CHECK(H::bucket_for(ns(0)) == 0);
    CHECK(H::bucket_for(100us) == 0);  // le is inclusive
    CHECK(H::bucket_for(100us + ns(1)) == 1);
    CHECK(H::bucket_for(250us) == 1);
    CHECK(H::bucket_for(1ms) == 3);
    CHECK(H::bucket_for(3ms) == 5);
    CHECK(H::bucket_for(1s) == 12);
    CHECK(H::bucket_for(10s) == 15);
    CHECK(H::bucket_for(10s + ns(1)) == 16);  // the overflow
    CHECK(H::bucket_for(std::chrono::hours(24)) == 16);
    for (std::size_t i = 1; i < H::bounds.size(); ++i) CHECK(H::bounds[i - 1] < H::bounds[i]);
}

TEST_CASE("metrics: the recorder counts and sums what it records", "[metrics]") {
    corolock::detail::histogram_recorder r;
    r.record(50us);
    r.record(3ms);
    r.record(3ms);
    r.record(20s);
    r.record(ns(-5));  // a clock that went backwards counts as zero
    const auto h = r.read();
    CHECK(h.count() == 5);
    CHECK(h.buckets[0] == 2);
    CHECK(h.buckets[5] == 2);
    CHECK(h.buckets[16] == 1);
    CHECK(h.sum == 50us + 6ms + 20s);
}

TEST_CASE("metrics: the Prometheus text is well-formed, with cumulative buckets", "[metrics]") {
    metrics_snapshot m;
    m.acquisitions = 7;
    m.contended_acquisitions = 2;
    m.renewals_sent = 11;
    m.renewals_failed = 1;
    m.leases_lost = 1;
    m.releases_found_gone = 3;
    m.reconnects = 4;
    m.commands_in_flight = 5;
    m.cluster_moved = 6;
    m.cluster_ask = 8;
    m.cluster_retries = 9;
    m.cluster_map_refreshes = 10;
    m.redlock_rounds = 11;
    m.redlock_rounds_failed = 12;
    m.leaderships_held = 1;
    m.terms_won = 13;
    m.resignations = 9;
    m.leaderships_lost = 3;
    corolock::detail::histogram_recorder wait, handoff;
    for (ns d : {ns(50us), ns(300us), ns(3ms), ns(3ms), ns(1s), ns(20s), ns(400ms)}) wait.record(d);
    handoff.record(250us);
    m.wait = wait.read();
    m.handoff = handoff.read();

    const auto text = corolock::to_prometheus(m);
    INFO(text);
    const auto e = parse_exposition(text);
    CHECK(value_of(e, "corolock_acquisitions_total") == "7");
    CHECK(value_of(e, "corolock_contended_acquisitions_total") == "2");
    CHECK(value_of(e, "corolock_renewals_total") == "11");
    CHECK(value_of(e, "corolock_renewal_failures_total") == "1");
    CHECK(value_of(e, "corolock_leases_lost_total") == "1");
    CHECK(value_of(e, "corolock_releases_found_gone_total") == "3");
    CHECK(value_of(e, "corolock_reconnects_total") == "4");
    CHECK(value_of(e, "corolock_commands_in_flight") == "5");
    CHECK(e.types.at("corolock_commands_in_flight") == "gauge");
    CHECK(value_of(e, "corolock_cluster_moved_total") == "6");
    CHECK(value_of(e, "corolock_cluster_ask_total") == "8");
    CHECK(value_of(e, "corolock_cluster_retries_total") == "9");
    CHECK(value_of(e, "corolock_cluster_map_refreshes_total") == "10");
    CHECK(value_of(e, "corolock_redlock_rounds_total") == "11");
    CHECK(value_of(e, "corolock_redlock_rounds_failed_total") == "12");
    CHECK(value_of(e, "corolock_leaderships_held") == "1");
    CHECK(e.types.at("corolock_leaderships_held") == "gauge");
    CHECK(value_of(e, "corolock_terms_won_total") == "13");
    CHECK(value_of(e, "corolock_resignations_total") == "9");
    CHECK(value_of(e, "corolock_leaderships_lost_total") == "3");
    CHECK(e.types.at("corolock_acquisitions_total") == "counter");
    CHECK(e.types.at("corolock_acquire_wait_seconds") == "histogram");
    check_histogram(e, "corolock_acquire_wait_seconds", 7);
    check_histogram(e, "corolock_handoff_seconds", 1);
    CHECK(value_of(e, "corolock_acquire_wait_seconds_sum") == "21.40635");
    CHECK(value_of(e, "corolock_handoff_seconds_sum") == "0.00025");
    // Bucket by bucket: le="0.0001" holds 50us; le="0.0005" adds 300us.
    const auto buckets = named(e, "corolock_acquire_wait_seconds_bucket");
    CHECK(buckets[0]->labels.at("le") == "0.0001");
    CHECK(buckets[0]->value == "1");
    CHECK(buckets[2]->value == "2");
    CHECK(buckets[5]->value == "4");
    CHECK(buckets[15]->labels.at("le") == "10");
    CHECK(buckets[15]->value == "6");
    CHECK(buckets[16]->value == "7");
}

TEST_CASE("metrics: an empty snapshot renders zeros", "[metrics]") {
    const auto e = parse_exposition(corolock::to_prometheus({}));
    check_histogram(e, "corolock_acquire_wait_seconds", 0);
    CHECK(value_of(e, "corolock_acquire_wait_seconds_sum") == "0");
    CHECK(value_of(e, "corolock_acquisitions_total") == "0");
}

TEST_CASE("metrics: labels go on every sample, escaped and valid UTF-8", "[metrics]") {
    const std::string odd = std::string("a\"b\\c\nd\xff") + "\xc3\xa9";
    const corolock::metric_labels labels{
        {"client", odd}, {"job", "nightly"}, {"bad-name", "x"}, {"le", "y"}, {"__x", "z"}};
    const auto text = corolock::to_prometheus({}, labels);
    INFO(text);
    const auto e = parse_exposition(text);
    for (const auto& s : e.samples) {
        INFO(s.name);
        CHECK(s.labels.at("client") == "a\"b\\c\nd\xEF\xBF\xBD\xc3\xa9");
        CHECK(s.labels.at("job") == "nightly");
        CHECK(s.labels.count("bad-name") == 0);
        CHECK(s.labels.count("__x") == 0);
        const bool bucket = s.name.ends_with("_bucket");
        CHECK(s.labels.size() == (bucket ? 3u : 2u));  // le only on buckets
    }
    check_histogram(e, "corolock_handoff_seconds", 0);
    CHECK(corolock::prometheus_label_value("plain") == "plain");
    CHECK(corolock::prometheus_label_value("\xe2\x82") == "\xEF\xBF\xBD\xEF\xBF\xBD");
}

namespace {
struct recording_observer final : corolock::observer {
    std::vector<std::string> events;
    void on_acquired(std::string_view lock, duration, bool contended) override {
        events.push_back("acquired " + std::string(lock) + (contended ? " contended" : ""));
    }
    void on_lost(std::string_view lock, std::string_view why) override {
        events.push_back("lost " + std::string(lock) + ": " + std::string(why));
    }
    void on_renewal_failed(std::string_view lock, corolock::error_code) override {
        events.push_back("renewal failed " + std::string(lock));
    }
    void on_release_found_gone(std::string_view lock, corolock::error_code) override {
        events.push_back("gone " + std::string(lock));
        throw std::runtime_error("an observer that throws");
    }
    void on_elected(std::string_view e, std::uint64_t epoch) override {
        events.push_back("elected " + std::string(e) + " " + std::to_string(epoch));
    }
    void on_resigned(std::string_view e, std::uint64_t epoch) override {
        events.push_back("resigned " + std::string(e) + " " + std::to_string(epoch));
    }
    void on_leadership_lost(std::string_view e, std::uint64_t epoch) override {
        events.push_back("lost leadership " + std::string(e) + " " + std::to_string(epoch));
    }
};
}  // namespace

TEST_CASE("metrics: the recorder counts an event and tells the observer in one step",
          "[metrics][observer]") {
    corolock::detail::metrics_recorder m;
    recording_observer o;
    auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
    spdlog::logger log("recorder-test", sink);
    m.granted(&o, log, "a", std::chrono::milliseconds(3), true);
    m.granted(nullptr, log, "b", std::chrono::milliseconds(1), false);  // nobody told
    m.lost(&o, log, "a", "the lease ran out");
    m.renewal_failed(&o, log, "a", corolock::error::expired);
    m.release_found_gone(&o, log, "a", corolock::error::lock_lost);  // its throw is logged
    CHECK(o.events == std::vector<std::string>{"acquired a contended", "lost a: the lease ran out",
                                               "renewal failed a", "gone a"});
    const auto s = m.snapshot();
    CHECK(s.acquisitions == 2);
    CHECK(s.contended_acquisitions == 1);
    CHECK(s.wait.count() == 2);
    CHECK(s.leases_lost == 1);
    CHECK(s.renewals_failed == 1);
    CHECK(s.releases_found_gone == 1);
    const auto lines = sink->last_formatted();
    REQUIRE(lines.size() == 1);
    CHECK(lines.front().find("on_release_found_gone") != std::string::npos);
}

TEST_CASE("metrics: terms won, resigned and lost move the leader gauge and tell the observer",
          "[metrics][observer][election]") {
    corolock::detail::metrics_recorder m;
    recording_observer o;
    auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
    spdlog::logger log("recorder-test", sink);
    m.term_won(&o, log, "e", 5);
    m.term_won(&o, log, "f", 7);
    CHECK(m.snapshot().leaderships_held == 2);
    m.term_resigned(&o, log, "e", 5);
    m.term_lost(&o, log, "f", 7);
    CHECK(o.events == std::vector<std::string>{"elected e 5", "elected f 7", "resigned e 5",
                                               "lost leadership f 7"});
    const auto s = m.snapshot();
    CHECK(s.leaderships_held == 0);
    CHECK(s.terms_won == 2);
    CHECK(s.resignations == 1);
    CHECK(s.leaderships_lost == 1);
}

TEST_CASE("logging: the default logger is spdlog's \"corolock\", quiet until spdlog raises it",
          "[logging]") {
    const auto mine = corolock::detail::default_logger();
    CHECK(spdlog::get("corolock") == mine);
    CHECK(corolock::detail::logger_or_default(nullptr) == mine);
    auto given = std::make_shared<spdlog::logger>("given");
    CHECK(corolock::detail::logger_or_default(given) == given);
    const auto before = mine->level();
    if (std::getenv("COROLOCK_LOG_LEVEL") == nullptr) CHECK(before == spdlog::level::off);
    spdlog::set_level(spdlog::level::info);  // what an application does
    CHECK(mine->level() == spdlog::level::info);
    mine->set_level(before);  // quiet again for the other cases
}
