// The history checker: parsing, rebuilding holders, and the invariant rules
// documented in history.hpp.
#include "support/history.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace corolock::test::history {

namespace {

constexpr long long never = std::numeric_limits<long long>::max();

long long now_mono_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// ---- JSON lines -----------------------------------------------------------

void append_escaped(std::string& out, const std::string& s) {
    out += '"';
    for (const char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            } else {
                out += c;
            }
        }
    }
    out += '"';
}

// A JSON value of a flat object: a string, or the text of a number or literal.
struct json_value {
    bool is_string = false;
    std::string text;
};

class line_parser {
public:
    explicit line_parser(std::string_view s) : s_(s) {}

    std::vector<std::pair<std::string, json_value>> object() {
        std::vector<std::pair<std::string, json_value>> fields;
        skip_ws();
        expect('{');
        skip_ws();
        if (peek() == '}') {
            ++i_;
        } else {
            for (;;) {
                skip_ws();
                std::string key = string();
                skip_ws();
                expect(':');
                skip_ws();
                json_value v;
                if (peek() == '"') {
                    v.is_string = true;
                    v.text = string();
                } else {
                    v.text = scalar();
                }
                fields.emplace_back(std::move(key), std::move(v));
                skip_ws();
                if (peek() == ',') { ++i_; continue; }
                expect('}');
                break;
            }
        }
        skip_ws();
        if (i_ != s_.size()) fail("trailing characters");
        return fields;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw std::runtime_error(what + " at column " + std::to_string(i_ + 1));
    }
    char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
    void skip_ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
    }
    void expect(char c) {
        if (peek() != c) fail(std::string("expected '") + c + "'");
        ++i_;
    }
    std::string string() {
        expect('"');
        std::string out;
        for (;;) {
            if (i_ >= s_.size()) fail("unterminated string");
            const char c = s_[i_++];
            if (c == '"') return out;
            if (c != '\\') { out += c; continue; }
            if (i_ >= s_.size()) fail("unterminated escape");
            const char e = s_[i_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case 'r': out += '\r'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'u': {
                if (i_ + 4 > s_.size()) fail("short \\u escape");
                const unsigned cp = static_cast<unsigned>(std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16));
                i_ += 4;
                // Only what to_json writes (control characters) and ASCII.
                if (cp >= 0x80) fail("\\u escape beyond ASCII");
                out += static_cast<char>(cp);
                break;
            }
            default: fail("bad escape");
            }
        }
    }
    std::string scalar() {
        const std::size_t start = i_;
        while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ' ') ++i_;
        if (i_ == start) fail("missing value");
        return std::string(s_.substr(start, i_ - start));
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

long long to_integer(const json_value& v, const std::string& key) {
    if (v.is_string) throw std::runtime_error("field \"" + key + "\" must be a number");
    std::size_t used = 0;
    long long n = 0;
    try {
        n = std::stoll(v.text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != v.text.size()) throw std::runtime_error("field \"" + key + "\" is not an integer");
    return n;
}

event parse_line(std::string_view line) {
    event e;
    bool have_ev = false, have_t = false, have_pid = false;
    for (auto& [key, v] : line_parser(line).object()) {
        if (key == "ev") {
            if (!v.is_string) throw std::runtime_error("field \"ev\" must be a string");
            e.ev = v.text;
            have_ev = true;
        } else if (key == "lock") {
            if (!v.is_string) throw std::runtime_error("field \"lock\" must be a string");
            e.lock = v.text;
        } else if (key == "error") {
            e.error = v.text;
        } else if (key == "t") {
            e.t = to_integer(v, key);
            have_t = true;
        } else if (key == "pid") {
            e.pid = to_integer(v, key);
            have_pid = true;
        } else if (key == "task") {
            e.task = static_cast<int>(to_integer(v, key));
        } else if (key == "token") {
            const long long n = to_integer(v, key);
            if (n < 0) throw std::runtime_error("field \"token\" is negative");
            e.token = static_cast<std::uint64_t>(n);
        } else if (key == "deadline") {
            e.deadline = to_integer(v, key);
        } else if (key == "lease_ns") {
            e.lease_ns = to_integer(v, key);
        } else if (key == "prev") {
            e.prev = to_integer(v, key);
        } else if (key == "permits") {
            e.permits = to_integer(v, key);
        } else if (key == "capacity") {
            e.capacity = to_integer(v, key);
        } else if (key == "shared") {
            e.shared = to_integer(v, key) != 0;
        }
    }
    if (!have_ev || !have_t || !have_pid) throw std::runtime_error("needs \"ev\", \"t\" and \"pid\"");
    return e;
}

// ---- Rebuilding holders ---------------------------------------------------

const std::set<std::string>& holder_kinds() {
    static const std::set<std::string> kinds{
        "lease", "increment_invoked", "increment_ok", "increment_failed", "write_invoked",
        "write_accepted", "write_rejected", "write_failed", "release_invoked", "release_ok",
        "release_failed", "lost", "proclaim_ok", "proclaim_failed"};
    return kinds;
}

const std::set<std::string>& harness_kinds() {
    static const std::set<std::string> kinds{"paused", "resumed", "killed", "server_paused",
                                             "server_resumed", "server_restarted"};
    return kinds;
}

struct increment_rec {
    long long invoked = -1;
    long long done = -1;   // increment_ok
    bool failed = false;
};

struct write_rec {
    long long invoked = -1;
    long long done = -1;
    std::string outcome;   // accepted, rejected, failed; "" while pending
    std::string error;     // a failed write's error name
    long long prev = -1;
    std::string source;
};

struct holder {
    long long pid = 0;
    int task = 0;
    std::string lock;
    std::uint64_t token = 0;
    long long invoked = -1;
    long long ok = 0;
    long long lease_ns = 0;
    long long permits = 1;
    long long capacity = 0;  // 0: a lock
    bool shared = false;     // a shared mutex's reader
    std::vector<std::pair<long long, long long>> deadlines;  // (logged at, deadline)
    long long release_invoked = -1;
    long long release_done = -1;
    std::string release_outcome;
    long long lost = -1;
    std::vector<increment_rec> increments;
    std::vector<write_rec> writes;
    std::string source;

    long long window_end = 0;       // strict: a lease event counts only if logged in time
    long long strict_deadline = 0;  // the deadline the window ran to
    std::string who() const {
        return "pid " + std::to_string(pid) + " task " + std::to_string(task) + " token " +
               std::to_string(token) + " (" + source + ")";
    }
};

std::string ms(long long ns) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
    return buf;
}

// The deadline in force at time `at`: the acquire's deadline, moved by lease
// events logged no later than `slack` after the deadline they extend (a
// renewal confirmed after the lease ran out does not revive it).
long long deadline_at(const holder& h, long long at, long long slack) {
    long long cur = h.deadlines.empty() ? h.ok : h.deadlines.front().second;
    for (std::size_t i = 1; i < h.deadlines.size(); ++i) {
        const auto [logged, d] = h.deadlines[i];
        if (logged > at) break;
        if (logged > cur + slack) break;
        cur = std::max(cur, d);
    }
    return cur;
}

struct pause_interval {
    long long from;
    long long to;  // never: not resumed (killed, or paused to the end)
};

bool paused_during(const std::map<long long, std::vector<pause_interval>>& pauses, long long pid,
                   long long from, long long to) {
    const auto it = pauses.find(pid);
    if (it == pauses.end()) return false;
    for (const auto& p : it->second) {
        if (p.from <= to && p.to >= from) return true;
    }
    return false;
}

// The permits rule: a sweep over the non-empty windows' ends (-permits)
// and starts (+permits); at one instant an end goes first (windows are
// half-open). Each moment the sum first exceeds the capacity is reported
// once, with the windows then in force.
template <class Violation>
void check_permits(const std::string& lock, const std::vector<holder*>& hs, long long capacity,
                   Violation&& violation) {
    std::vector<std::tuple<long long, int, const holder*>> steps;  // (t, 0 end / 1 start, h)
    for (const holder* h : hs) {
        if (h->window_end <= h->ok) continue;
        steps.emplace_back(h->ok, 1, h);
        steps.emplace_back(h->window_end, 0, h);
    }
    std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
        return std::make_pair(std::get<0>(a), std::get<1>(a)) <
               std::make_pair(std::get<0>(b), std::get<1>(b));
    });
    std::set<const holder*> inside;
    long long held = 0;
    bool over = false;
    for (const auto& [t, start, h] : steps) {
        held += start ? h->permits : -h->permits;
        if (start) inside.insert(h);
        else inside.erase(h);
        if (held <= capacity) {
            over = false;
            continue;
        }
        if (over) continue;
        over = true;
        std::string who;
        for (const holder* in : inside)
            who += "\n    " + std::to_string(in->permits) + " by " + in->who();
        violation("permits", "lock \"" + lock + "\": " + std::to_string(held) +
                                 " permits inside safe windows of a capacity of " +
                                 std::to_string(capacity) + " when the window of " + h->who() +
                                 " starts:" + who);
    }
}

// The readers rule of a shared mutex: no writer's non-empty window
// overlaps another actor's (windows are half-open). A sweep in start order
// keeps the windows still open.
template <class Violation>
void check_readers(const std::string& lock, const std::vector<holder*>& hs,
                   Violation&& violation) {
    std::vector<const holder*> open;  // hs is sorted by acquire_ok
    for (const holder* h : hs) {
        if (h->window_end <= h->ok) continue;
        std::erase_if(open, [&](const holder* o) { return o->window_end <= h->ok; });
        for (const holder* o : open) {
            if (o->shared && h->shared) continue;
            if (o->pid == h->pid && o->task == h->task) continue;  // a downgrade
            violation("readers", "lock \"" + lock + "\": window of " +
                                     std::string(h->shared ? "reader " : "writer ") + h->who() +
                                     " starts " + ms(o->window_end - h->ok) +
                                     " before the window of " +
                                     std::string(o->shared ? "reader " : "writer ") + o->who() +
                                     " ends");
        }
        open.push_back(h);
    }
}

// Tokens rise in window order over the pairs that must not overlap.
template <class Pair, class Violation>
void check_window_tokens(const std::string& lock, const std::vector<holder*>& hs,
                         const Pair& exclusive_pair, Violation&& violation) {
    for (const holder* a : hs) {
        if (a->window_end <= a->ok) continue;
        for (const holder* b : hs) {
            if (b->window_end <= b->ok || a->window_end > b->ok || !exclusive_pair(a, b)) continue;
            if (b->token <= a->token)
                violation("I2", "lock \"" + lock + "\": safe window of " + b->who() +
                                    " follows that of " + a->who() + " with a smaller token");
        }
    }
}

}  // namespace

// ---- Public pieces ---------------------------------------------------------

long long default_observe_slack_ns() {
    constexpr long long fallback_ms = 250;
    const char* env = std::getenv("COROLOCK_LOST_ALLOWANCE_MS");
    if (env == nullptr || *env == '\0') return fallback_ms * 1'000'000;
    const std::string text(env);
    long long value_ms = -1;
    std::size_t used = 0;
    try {
        value_ms = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || value_ms < 0 || value_ms > 3'600'000)
        throw std::invalid_argument("COROLOCK_LOST_ALLOWANCE_MS=\"" + text +
                                    "\": expected a whole number of ms from 0 to 3600000");
    return value_ms * 1'000'000;
}

std::string to_json(const event& e) {
    std::string out = "{\"ev\":";
    append_escaped(out, e.ev);
    out += ",\"pid\":" + std::to_string(e.pid) + ",\"task\":" + std::to_string(e.task);
    if (!e.lock.empty()) {
        out += ",\"lock\":";
        append_escaped(out, e.lock);
    }
    out += ",\"token\":" + std::to_string(e.token) + ",\"t\":" + std::to_string(e.t);
    if (e.deadline != 0) out += ",\"deadline\":" + std::to_string(e.deadline);
    if (e.lease_ns != 0) out += ",\"lease_ns\":" + std::to_string(e.lease_ns);
    if (e.prev >= 0) out += ",\"prev\":" + std::to_string(e.prev);
    if (e.permits != 0) out += ",\"permits\":" + std::to_string(e.permits);
    if (e.capacity != 0) out += ",\"capacity\":" + std::to_string(e.capacity);
    if (e.shared) out += ",\"shared\":1";
    if (!e.error.empty()) {
        out += ",\"error\":";
        append_escaped(out, e.error);
    }
    out += '}';
    return out;
}

std::vector<event> parse_history(std::string_view jsonl, const std::string& source, int* truncated) {
    std::vector<event> out;
    std::size_t pos = 0;
    int line_no = 0;
    while (pos < jsonl.size()) {
        ++line_no;
        const std::size_t nl = jsonl.find('\n', pos);
        if (nl == std::string_view::npos) {
            // A write cut short by a kill: the line never got its newline.
            if (truncated) ++*truncated;
            break;
        }
        const std::string_view line = jsonl.substr(pos, nl - pos);
        pos = nl + 1;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        try {
            event e = parse_line(line);
            e.source = source + ":" + std::to_string(line_no);
            out.push_back(std::move(e));
        } catch (const std::exception& ex) {
            throw std::runtime_error(source + ":" + std::to_string(line_no) + ": " + ex.what());
        }
    }
    return out;
}

std::vector<event> load_history(const std::string& path, int* truncated) {
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    if (fs::is_directory(path)) {
        for (const auto& entry : fs::directory_iterator(path)) {
            if (entry.is_regular_file() && entry.path().extension() == ".jsonl")
                files.push_back(entry.path().string());
        }
        std::sort(files.begin(), files.end());
    } else {
        files.push_back(path);
    }
    std::vector<event> all;
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + f);
        std::stringstream buf;
        buf << in.rdbuf();
        auto evs = parse_history(buf.str(), fs::path(f).filename().string(), truncated);
        all.insert(all.end(), std::make_move_iterator(evs.begin()), std::make_move_iterator(evs.end()));
    }
    return all;
}

event_writer::event_writer(std::string path) : path_(std::move(path)) {}

void event_writer::write(const event& e) {
    std::ofstream out(path_, std::ios::app);
    out << to_json(e) << '\n';
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + path_);
}

void event_writer::fault(const std::string& ev, long long pid) {
    event e;
    e.ev = ev;
    e.pid = pid;
    e.task = -1;
    e.t = now_mono_ns();
    write(e);
}

fenced_register::outcome fenced_register::write(std::uint64_t token) noexcept {
    const std::uint64_t prev = highest_;
    if (token > prev) {
        highest_ = token;
        return {true, prev};
    }
    return {false, prev};
}

std::size_t check_result::count(const std::string& invariant) const {
    const auto it = violations.find(invariant);
    return it == violations.end() ? 0 : it->second.size();
}

std::string check_result::report() const {
    std::ostringstream out;
    out << "history: " << holders << " holders, " << completed_sections << " completed sections, "
        << releases_ok << " releases ok, " << lost_signals << " lost signals, " << writes_accepted
        << " writes accepted, " << writes_rejected << " rejected (" << late_writes_rejected << " of "
        << late_writes << " late writes rejected)";
    if (lost_signals_checked > 0) {
        out << "; lost - deadline in [" << ms(lost_minus_deadline_min_ns) << ", "
            << ms(lost_minus_deadline_max_ns) << "]";
    }
    out << '\n';
    for (const auto& [inv, list] : violations) {
        out << inv << ": " << list.size() << " violation(s)\n";
        std::size_t shown = 0;
        for (const auto& v : list) {
            if (++shown > 20) {
                out << "  ... and " << (list.size() - 20) << " more\n";
                break;
            }
            out << "  " << v << '\n';
        }
    }
    for (const auto& n : notes) out << "note: " << n << '\n';
    return out.str();
}

// ---- The checker -----------------------------------------------------------

check_result check_history(const std::vector<event>& input, const check_options& options) {
    check_result r;
    auto violation = [&r](const std::string& inv, std::string msg) {
        r.violations[inv].push_back(std::move(msg));
    };
    const long long slack = options.observe_slack_ns;
    auto drift = [&options](long long lease) {
        return options.drift_ns ? options.drift_ns(lease) : lease / 100 + 2'000'000;
    };

    // Events per actor in time order (a stable sort keeps file order for ties).
    std::vector<event> events = input;
    std::stable_sort(events.begin(), events.end(), [](const event& a, const event& b) {
        return std::tie(a.pid, a.task, a.t) < std::tie(b.pid, b.task, b.t);
    });

    std::vector<holder> holders;
    std::map<long long, std::vector<pause_interval>> pauses;
    std::map<long long, long long> killed_at;  // pid: when the harness killed it
    std::map<long long, long long> last_seen;  // pid -> its own last event

    {
        std::map<std::pair<long long, int>, long long> pending_invoke;
        std::map<std::tuple<long long, int, std::uint64_t>, std::size_t> by_token;
        std::map<long long, long long> paused_since;
        // Harness events are per pid; order them by time across files first.
        std::vector<const event*> harness;
        for (const auto& e : events) {
            if (harness_kinds().count(e.ev)) {
                harness.push_back(&e);
                continue;
            }
            last_seen[e.pid] = std::max(last_seen[e.pid], e.t);
            const auto actor = std::make_pair(e.pid, e.task);
            if (e.ev == "acquire_invoked") {
                pending_invoke[actor] = e.t;
            } else if (e.ev == "acquire_failed") {
                pending_invoke.erase(actor);
            } else if (e.ev == "acquire_ok") {
                holder h;
                h.pid = e.pid;
                h.task = e.task;
                h.lock = e.lock;
                h.token = e.token;
                h.ok = e.t;
                h.lease_ns = e.lease_ns;
                h.source = e.source;
                h.permits = e.permits == 0 ? 1 : e.permits;
                h.capacity = e.capacity;
                h.shared = e.shared;
                if (h.permits < 1 || h.capacity < 0 || (h.capacity > 0 && h.permits > h.capacity))
                    violation("format", "acquire_ok with " + std::to_string(h.permits) +
                                            " permits of a capacity of " +
                                            std::to_string(h.capacity) + " at " + e.source);
                h.deadlines.emplace_back(e.t, e.deadline);
                const auto it = pending_invoke.find(actor);
                if (it == pending_invoke.end()) {
                    violation("format", "acquire_ok without acquire_invoked at " + e.source);
                } else {
                    h.invoked = it->second;
                    pending_invoke.erase(it);
                }
                if (e.token == 0) violation("format", "acquire_ok without a token at " + e.source);
                if (e.deadline == 0 || e.lease_ns <= 0)
                    violation("format", "acquire_ok without deadline or lease_ns at " + e.source);
                const auto key = std::make_tuple(e.pid, e.task, e.token);
                if (by_token.count(key) && options.check_i2) {
                    violation("I2", "the same actor got token " + std::to_string(e.token) +
                                        " twice, at " + holders[by_token[key]].source + " and " +
                                        e.source);
                }
                by_token[key] = holders.size();
                holders.push_back(std::move(h));
            } else if (holder_kinds().count(e.ev)) {
                const auto it = by_token.find(std::make_tuple(e.pid, e.task, e.token));
                if (it == by_token.end()) {
                    violation("format", e.ev + " for token " + std::to_string(e.token) +
                                            " that this actor never acquired, at " + e.source);
                    continue;
                }
                holder& h = holders[it->second];
                if (e.ev == "lease") {
                    h.deadlines.emplace_back(e.t, e.deadline);
                } else if (e.ev == "increment_invoked") {
                    h.increments.push_back({e.t, -1, false});
                } else if (e.ev == "increment_ok" || e.ev == "increment_failed") {
                    if (h.increments.empty() || h.increments.back().done >= 0 || h.increments.back().failed) {
                        violation("format", e.ev + " without increment_invoked at " + e.source);
                        continue;
                    }
                    if (e.ev == "increment_ok") h.increments.back().done = e.t;
                    else h.increments.back().failed = true;
                } else if (e.ev == "write_invoked") {
                    write_rec w;
                    w.invoked = e.t;
                    w.source = e.source;
                    h.writes.push_back(w);
                } else if (e.ev == "write_accepted" || e.ev == "write_rejected" || e.ev == "write_failed") {
                    if (h.writes.empty() || !h.writes.back().outcome.empty()) {
                        violation("format", e.ev + " without write_invoked at " + e.source);
                        continue;
                    }
                    write_rec& w = h.writes.back();
                    w.done = e.t;
                    w.outcome = e.ev.substr(6);
                    w.error = e.error;
                    w.prev = e.prev;
                    if (e.ev != "write_failed" && e.prev < 0)
                        violation("format", e.ev + " without prev at " + e.source);
                } else if (e.ev == "release_invoked") {
                    if (h.release_invoked < 0) h.release_invoked = e.t;
                } else if (e.ev == "release_ok" || e.ev == "release_failed") {
                    // One release per holder, completed once: a second
                    // outcome is a double completion.
                    if (h.release_done >= 0 || h.release_invoked < 0) {
                        violation("format", e.ev + (h.release_done >= 0
                                                        ? " completes a release a second time, at "
                                                        : " without release_invoked at ") +
                                                e.source);
                        continue;
                    }
                    h.release_done = e.t;
                    h.release_outcome = e.ev == "release_ok" ? "ok" : (e.error.empty() ? "error" : e.error);
                } else if (e.ev == "lost") {
                    if (h.lost >= 0) {
                        violation("format", "a second lost signal for token " +
                                                std::to_string(e.token) + " at " + e.source);
                        continue;
                    }
                    h.lost = e.t;
                }
            } else {
                violation("format", "unknown event \"" + e.ev + "\" at " + e.source);
            }
        }
        std::stable_sort(harness.begin(), harness.end(),
                         [](const event* a, const event* b) { return a->t < b->t; });
        for (const event* e : harness) {
            if (e->ev == "paused") {
                paused_since.emplace(e->pid, e->t);
            } else if (e->ev == "resumed") {
                const auto it = paused_since.find(e->pid);
                if (it != paused_since.end()) {
                    pauses[e->pid].push_back({it->second, e->t});
                    paused_since.erase(it);
                }
            } else if (e->ev == "killed") {
                killed_at.emplace(e->pid, e->t);
                const auto it = paused_since.find(e->pid);
                const long long from = it != paused_since.end() ? it->second : e->t;
                if (it != paused_since.end()) paused_since.erase(it);
                pauses[e->pid].push_back({from, never});
            }
        }
        for (const auto& [pid, since] : paused_since) pauses[pid].push_back({since, never});
    }

    std::sort(holders.begin(), holders.end(), [](const holder& a, const holder& b) {
        return std::tie(a.lock, a.ok, a.pid, a.task) < std::tie(b.lock, b.ok, b.pid, b.task);
    });

    // Safe windows (strict: a lease event extends only if logged in time).
    for (auto& h : holders) {
        long long end = never;
        if (h.release_invoked >= 0) end = std::min(end, h.release_invoked);
        if (h.lost >= 0) end = std::min(end, h.lost);
        long long cur = h.deadlines.front().second;
        for (std::size_t i = 1; i < h.deadlines.size(); ++i) {
            const auto [logged, d] = h.deadlines[i];
            if (logged > cur || logged >= end) break;
            cur = std::max(cur, d);
        }
        h.strict_deadline = cur;
        end = std::min(end, cur);
        if (const auto k = killed_at.find(h.pid); options.kill_ends_window && k != killed_at.end())
            end = std::min(end, k->second);
        h.window_end = std::max(end, h.ok);
    }
    auto inside_window = [](const holder& h, long long from, long long to) {
        return from >= h.ok && to >= 0 && to <= h.window_end && h.window_end > h.ok;
    };

    r.holders = static_cast<int>(holders.size());

    // Group by lock.
    std::map<std::string, std::vector<holder*>> by_lock;
    for (auto& h : holders) by_lock[h.lock].push_back(&h);

    for (auto& [lock, hs] : by_lock) {
        // A semaphore: its holders overlap, up to its capacity in permits.
        long long capacity = 0;
        for (const holder* h : hs) capacity = std::max(capacity, h->capacity);
        const bool counting = capacity > 0;
        // A shared mutex: readers overlap each other, never a writer.
        const bool readers_lock =
            std::any_of(hs.begin(), hs.end(), [](const holder* h) { return h->shared; });
        // Two holders whose windows must not overlap, and whose tokens rise
        // in window order: on a lock, any two; on a shared mutex, two of
        // different actors of which one writes; on a semaphore, none.
        const auto exclusive_pair = [&](const holder* a, const holder* b) {
            if (counting) return false;
            if (!readers_lock) return true;
            return (!a->shared || !b->shared) && (a->pid != b->pid || a->task != b->task);
        };

        // ---- I1: safe windows do not overlap.
        if (options.check_i1 && !counting && !readers_lock) {
            const holder* widest = nullptr;  // the window reaching furthest so far
            for (const holder* h : hs) {    // sorted by acquire_ok
                if (h->window_end <= h->ok) continue;  // empty window
                if (widest && h->ok < widest->window_end) {
                    violation("I1", "lock \"" + lock + "\": window of " + h->who() + " starts " +
                                        ms(widest->window_end - h->ok) + " before the window of " +
                                        widest->who() + " ends");
                }
                if (!widest || h->window_end > widest->window_end) widest = h;
            }
        }

        // ---- permits: at no moment more than the capacity inside windows.
        if (options.check_permits && counting) check_permits(lock, hs, capacity, violation);

        // ---- readers: a writer's window overlaps no other window.
        if (options.check_readers && readers_lock) check_readers(lock, hs, violation);

        // ---- I2: tokens. The oracle's figures are counted even when the
        // rule is off (a test of an honest limit still reports them).
        {
            auto violation = [&](const std::string& inv, std::string msg) {
                if (options.check_i2) r.violations[inv].push_back(std::move(msg));
            };
            std::map<std::uint64_t, const holder*> seen;
            for (const holder* h : hs) {
                const auto [it, fresh] = seen.emplace(h->token, h);
                if (!fresh && (it->second->pid != h->pid || it->second->task != h->task)) {
                    violation("I2", "lock \"" + lock + "\": token " + std::to_string(h->token) +
                                        " issued twice: " + it->second->who() + " and " + h->who());
                }
            }
            // Real-time order: an acquire that completed before another was
            // invoked holds the smaller token. hs is sorted by acquire_ok.
            std::vector<const holder*> by_invoke(hs.begin(), hs.end());
            std::sort(by_invoke.begin(), by_invoke.end(),
                      [](const holder* a, const holder* b) { return a->invoked < b->invoked; });
            std::size_t next = 0;
            const holder* max_done = nullptr;
            for (const holder* b : by_invoke) {
                if (b->invoked < 0) continue;
                while (next < hs.size() && hs[next]->ok < b->invoked) {
                    if (!max_done || hs[next]->token > max_done->token) max_done = hs[next];
                    ++next;
                }
                if (max_done && max_done->token >= b->token) {
                    violation("I2", "lock \"" + lock + "\": " + b->who() + " was invoked after " +
                                        max_done->who() + " completed, yet its token is not larger");
                }
            }
            // Holders with non-empty windows, in window order (on a shared
            // mutex, each pair of which one writes).
            if (readers_lock) check_window_tokens(lock, hs, exclusive_pair, violation);
            const holder* last = nullptr;
            for (const holder* h : hs) {
                if (counting || readers_lock) break;  // overlapping windows have no order
                if (h->window_end <= h->ok) continue;
                if (last && h->token <= last->token) {
                    violation("I2", "lock \"" + lock + "\": safe window of " + h->who() +
                                        " follows that of " + last->who() + " with a smaller token");
                }
                last = h;
            }

            // The oracle.
            struct wref {
                const holder* h;
                const write_rec* w;
            };
            std::vector<wref> writes;
            std::set<long long> written_tokens{0};
            for (const holder* h : hs) {
                for (const auto& w : h->writes) {
                    writes.push_back({h, &w});
                    written_tokens.insert(static_cast<long long>(h->token));
                }
            }
            std::map<long long, const wref*> accepted_prev;
            for (const auto& x : writes) {
                const auto& w = *x.w;
                const std::string what = "write of " + x.h->who() + " at " + w.source;
                const bool in_window = inside_window(*x.h, w.invoked, w.done);
                if (w.outcome == "accepted" || w.outcome == "rejected") {
                    if (w.outcome == "accepted") ++r.writes_accepted;
                    else ++r.writes_rejected;
                    if (!in_window) {
                        ++r.late_writes;
                        if (w.outcome == "rejected") ++r.late_writes_rejected;
                    }
                    const bool should = static_cast<long long>(x.h->token) > w.prev;
                    if (should != (w.outcome == "accepted")) {
                        violation("I2", what + ": oracle " + w.outcome + " token " +
                                            std::to_string(x.h->token) + " over prev " +
                                            std::to_string(w.prev));
                    }
                    if (!written_tokens.count(w.prev)) {
                        violation("I2", what + ": oracle reports prev " + std::to_string(w.prev) +
                                            ", a token nobody wrote");
                    }
                    if (w.outcome == "accepted") {
                        const auto [it, fresh] = accepted_prev.emplace(w.prev, &x);
                        if (!fresh) {
                            violation("I2", what + " and the write of " + it->second->h->who() +
                                                " were both accepted over prev " +
                                                std::to_string(w.prev));
                        }
                    }
                    if (in_window && !counting && w.outcome != "accepted") {
                        violation("I2", what + " ran inside its safe window but was rejected (prev " +
                                            std::to_string(w.prev) + ")");
                    }
                }
            }
            // A stale write is rejected: prev is at least every token accepted
            // before the write was invoked.
            std::vector<const wref*> by_done, by_inv;
            for (const auto& x : writes) {
                if (x.w->outcome == "accepted") by_done.push_back(&x);
                if (x.w->outcome == "accepted" || x.w->outcome == "rejected") by_inv.push_back(&x);
            }
            std::sort(by_done.begin(), by_done.end(),
                      [](const wref* a, const wref* b) { return a->w->done < b->w->done; });
            std::sort(by_inv.begin(), by_inv.end(),
                      [](const wref* a, const wref* b) { return a->w->invoked < b->w->invoked; });
            std::size_t k = 0;
            const wref* best = nullptr;
            for (const wref* x : by_inv) {
                while (k < by_done.size() && by_done[k]->w->done < x->w->invoked) {
                    if (!best || by_done[k]->h->token > best->h->token) best = by_done[k];
                    ++k;
                }
                if (best && static_cast<long long>(best->h->token) > x->w->prev) {
                    violation("I2", "write of " + x->h->who() + " at " + x->w->source +
                                        " reports prev " + std::to_string(x->w->prev) +
                                        " although token " + std::to_string(best->h->token) +
                                        " was accepted before it was sent" +
                                        (x->w->outcome == "accepted" ? " (a stale write got in)" : ""));
                }
            }
        }

        // ---- I3: no release or renewal touched a newer holder.
        if (options.check_i3 && !counting) {
            for (const holder* h : hs) {
                for (const holder* k : hs) {
                    if (k == h || k->ok <= h->ok || !exclusive_pair(h, k)) continue;
                    if (h->release_outcome == "ok" && h->release_invoked >= 0 &&
                        k->ok < h->release_invoked) {
                        violation("I3", "lock \"" + lock + "\": release of " + h->who() +
                                            " succeeded although " + k->who() + " acquired " +
                                            ms(h->release_invoked - k->ok) +
                                            " before that release was sent");
                    }
                    for (std::size_t i = 1; i < h->deadlines.size(); ++i) {
                        const long long sent_no_earlier = h->deadlines[i].second - h->lease_ns;
                        if (sent_no_earlier > k->ok) {
                            violation("I3", "lock \"" + lock + "\": a renewal of " + h->who() +
                                                " sent after " + k->who() + " acquired succeeded");
                            break;
                        }
                    }
                }
            }
        }
    }

    // ---- I5: honest deadlines; lost before the server could expire the key.
    int lost_checked = 0;
    for (const auto& h : holders) {
        if (h.lost >= 0) ++r.lost_signals;
        if (!options.check_i5) continue;
        for (const auto& [logged, d] : h.deadlines) {
            if (d > logged + h.lease_ns) {
                violation("I5", "deadline of " + h.who() + " lies " + ms(d - logged - h.lease_ns) +
                                    " beyond the time it was reported plus the lease");
            }
        }
        const long long horizon = h.lost >= 0 ? h.lost
                                  : h.release_invoked >= 0 ? h.release_invoked
                                                           : never;
        const long long d = deadline_at(h, horizon, slack);
        const long long expiry = d + drift(h.lease_ns);
        if (paused_during(pauses, h.pid, d - slack, expiry + slack)) continue;
        if (h.lost >= 0) {
            const long long late = h.lost - d;
            if (lost_checked++ == 0) r.lost_minus_deadline_min_ns = r.lost_minus_deadline_max_ns = late;
            r.lost_minus_deadline_min_ns = std::min(r.lost_minus_deadline_min_ns, late);
            r.lost_minus_deadline_max_ns = std::max(r.lost_minus_deadline_max_ns, late);
            if (h.lost > expiry + slack && (h.release_invoked < 0 || h.release_invoked > expiry + slack)) {
                violation("I5", "lost signal of " + h.who() + " fired " + ms(h.lost - expiry) +
                                    " after the earliest server-side expiry (allowance for the" +
                                    " worker's log: " + ms(slack) + ")");
            }
        } else if (h.release_invoked < 0 || h.release_invoked > expiry + slack) {
            const auto seen = last_seen.find(h.pid);
            if (seen != last_seen.end() && seen->second > expiry + slack) {
                violation("I5", "lease of " + h.who() + " could expire on the server at " +
                                    ms(expiry - h.ok) + " after acquire_ok, but no lost signal fired" +
                                    " (the process was still logging " + ms(seen->second - expiry) +
                                    " later)");
            }
        }
    }

    r.lost_signals_checked = lost_checked;

    // ---- The counter.
    for (const auto& [lock, final_value] : options.counters) {
        long long n = 0, unconfirmed = 0, unprotected = 0;
        const auto it = by_lock.find(lock);
        if (it != by_lock.end()) {
            for (const holder* h : it->second) {
                for (const auto& inc : h->increments) {
                    if (inc.done >= 0) {
                        ++n;
                        if (!inside_window(*h, inc.invoked, inc.done)) ++unprotected;
                    } else {
                        ++unconfirmed;
                    }
                }
            }
        }
        if (unprotected > 0) {
            r.notes.push_back("counter of \"" + lock + "\" not checked: " + std::to_string(unprotected) +
                              " increment(s) ran outside their safe window (final " +
                              std::to_string(final_value) + ", " + std::to_string(n) + " confirmed)");
            continue;
        }
        if (final_value < n || final_value > n + unconfirmed) {
            violation("counter", "lock \"" + lock + "\": counter is " + std::to_string(final_value) +
                                     " after " + std::to_string(n) + " confirmed increments" +
                                     (unconfirmed ? " and " + std::to_string(unconfirmed) + " unconfirmed" : ""));
        }
    }
    for (const auto& h : holders)
        for (const auto& inc : h.increments) r.completed_sections += inc.done >= 0 ? 1 : 0;

    for (const auto& h : holders) {
        if (h.release_outcome == "ok") ++r.releases_ok;
        holder_info info;
        info.pid = h.pid;
        info.task = h.task;
        info.lock = h.lock;
        info.token = h.token;
        info.acquire_invoked = h.invoked;
        info.acquire_ok = h.ok;
        info.window_end = h.window_end;
        info.deadline = h.strict_deadline;
        info.release_invoked = h.release_invoked;
        info.release_outcome = h.release_outcome;
        info.lost = h.lost;
        if (!h.writes.empty()) {
            const auto& w = h.writes.back();
            info.write_outcome = w.outcome.empty() ? "pending" : w.outcome;
            info.write_error = w.error;
            info.write_invoked = w.invoked;
            info.write_done = w.done;
        }
        r.holder_list.push_back(std::move(info));
    }
    std::sort(r.holder_list.begin(), r.holder_list.end(),
              [](const holder_info& a, const holder_info& b) { return a.acquire_ok < b.acquire_ok; });
    return r;
}

}  // namespace corolock::test::history
