// Shared by the process-level fault tests and the soak test: a fleet of
// lock_worker processes in "cycle" mode against one throwaway redis-server,
// their JSON-lines histories in a private temporary directory, a seeded
// random source, and the harness's own fault events.
#pragma once

#include "support/child_process.hpp"
#include "support/history.hpp"
#include "support/lock_server.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace corolock::test::fault {

using namespace std::chrono_literals;
namespace history = corolock::test::history;

// The schedule's seed: COROLOCK_FAULT_SEED when set, else a fresh one.
// Printed, so any run can be replayed.
inline std::uint64_t fault_seed(const char* test_name) {
    std::uint64_t seed = 0;
    if (const char* s = std::getenv("COROLOCK_FAULT_SEED"); s && *s) {
        seed = std::strtoull(s, nullptr, 10);
    } else {
        seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    }
    std::cout << "[" << test_name << "] COROLOCK_FAULT_SEED=" << seed << std::endl;
    return seed;
}

inline double ms_of(long long ns) { return static_cast<double>(ns) / 1e6; }

// The kernel's state letter for a process ('T' when stopped), '?' if gone.
inline char process_state(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = all.rfind(')');
    return close != std::string::npos && close + 2 < all.size() ? all[close + 2] : '?';
}

// A private directory for one test's histories, removed at the end unless
// COROLOCK_KEEP_HISTORY is set (then its path is printed for inspection).
class history_dir {
public:
    history_dir() {
        static int serial = 0;
        path_ = std::filesystem::temp_directory_path() /
                ("corolock-history-" + std::to_string(::getpid()) + "-" + std::to_string(++serial));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~history_dir() {
        if (std::getenv("COROLOCK_KEEP_HISTORY")) {
            std::cout << "history kept in " << path_.string() << std::endl;
            return;
        }
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    history_dir(const history_dir&) = delete;
    history_dir& operator=(const history_dir&) = delete;
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    std::string path() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

struct fleet_options {
    int workers = 4;
    std::chrono::milliseconds lease{1000};
    std::chrono::milliseconds hold{300};       // critical section pause: hold/2 .. hold
    std::chrono::milliseconds duration{6000};  // how long each worker keeps cycling
    std::string name = "fault";
    // Where worker i connects: urls[i % urls.size()] (e.g. a fault proxy of
    // its own); the server itself when empty.
    std::vector<std::string> urls = {};
    // The conformance suite's split (test/conformance): the lock service at
    // urls (any backend), the counter and the oracle on the fleet's
    // redis_server, passed to each worker as --resource=URL. Off: the
    // fleet's server is both.
    bool separate_resource = false;
    // "K/N": the lock is a semaphore of N permits, each cycle takes K
    // (lock_worker's --semaphore=K/N); empty: a mutex.
    std::string semaphore = {};
    bool fair = false;  // the workers take a corolock::fair_mutex (lock_worker fair-cycle)
    bool rw = false;    // the workers read and write a corolock::shared_mutex (rw-cycle)
    // The workers campaign in a corolock::election, a term a cycle, the
    // term's epoch as its token (elect-cycle).
    bool elect = false;
    // The workers take a corolock::multi_lock on the comma-separated names
    // in `name` (multi-cycle), the odd-numbered workers in reverse order.
    bool multi = false;
    // A pause of rest/2 to rest after each release (lock_worker --rest),
    // for a test that needs a given waiter to take the lock: without it, a
    // worker that releases can win every race (the mutex is not fair).
    std::chrono::milliseconds rest{0};
};

class fleet {
public:
    fleet(redis_server& server, fleet_options opts, std::uint64_t seed)
        : server_(server), opts_(std::move(opts)), seed_(seed), rng_(seed),
          harness_(dir_.file("harness.jsonl")) {}

    const fleet_options& options() const { return opts_; }
    std::mt19937_64& rng() { return rng_; }
    history::event_writer& harness() { return harness_; }
    std::string counter_key() const { return "counter:" + opts_.name; }
    std::string oracle_key() const { return "oracle:" + opts_.name; }
    child_process& worker(std::size_t i) { return *workers_.at(i); }
    std::size_t size() const { return workers_.size(); }
    // Worker i's history (JSON lines), for a test that reads an event the
    // checker does not.
    std::string log_file(std::size_t i) const { return dir_.file("worker-" + std::to_string(i) + ".jsonl"); }

    // Starts the workers and waits until each has printed "running".
    void start() {
        for (int i = 0; i < opts_.workers; ++i) start_one();
    }

    // As start(), but only worker `last` cycles for the whole duration; the
    // others stop `alone_for` earlier, so it has the lock to itself at the
    // end. For a test that needs that worker to acquire again after a
    // fault: the mutex is not fair (docs/safety.md, "What corolock does not
    // do"), and a waiter can lose every race to two workers taking turns
    // for longer than its wait.
    void start_with_last(std::size_t last, std::chrono::milliseconds alone_for) {
        REQUIRE(alone_for < opts_.duration);
        for (int i = 0; i < opts_.workers; ++i)
            start_one(static_cast<std::size_t>(i) == last
                          ? std::nullopt
                          : std::optional<std::chrono::milliseconds>(opts_.duration - alone_for));
    }

    // One more worker (the soak test replaces killed ones), cycling for
    // `duration` (default: the fleet's).
    std::size_t start_one(std::optional<std::chrono::milliseconds> duration = std::nullopt) {
        const std::size_t i = workers_.size();
        std::vector<std::string> argv{
            COROLOCK_TEST_WORKER, mode(), opts_.urls.empty() ? server_.url() : opts_.urls[i % opts_.urls.size()], names_for(i), counter_key(), oracle_key(),
            std::to_string(opts_.lease.count()), std::to_string(opts_.hold.count()),
            std::to_string(duration.value_or(opts_.duration).count()), log_file(i),
            std::to_string(seed_ + i)};
        if (opts_.separate_resource) argv.push_back("--resource=" + server_.url());
        if (!opts_.semaphore.empty()) argv.push_back("--semaphore=" + opts_.semaphore);
        if (opts_.rest.count() > 0) argv.push_back("--rest=" + std::to_string(opts_.rest.count()));
        workers_.push_back(std::make_unique<child_process>(std::move(argv)));
        const auto line = wait_for_line(*workers_.back(), "running", 10s);
        INFO(workers_.back()->output());
        REQUIRE(!line.empty());
        return i;
    }

    std::vector<history::event> events() const {
        int truncated = 0;
        auto evs = history::load_history(dir_.path(), &truncated);
        return evs;
    }

    // A worker that is now inside the pause of its critical section (its
    // log's last event is increment_ok), waiting up to limit for one. The
    // test still checks afterwards, from the history, that it held the lock.
    std::optional<std::size_t> worker_in_section(std::chrono::milliseconds limit,
                                                 const std::vector<std::size_t>& skip = {}) {
        return worker_whose_last_line(limit, skip, in_section);
    }

    // A shared mutex's reader now inside its section (its log's last event
    // is a reader's acquire_ok), waiting up to limit for one.
    std::optional<std::size_t> reader_in_section(std::chrono::milliseconds limit,
                                                 const std::vector<std::size_t>& skip = {}) {
        return worker_whose_last_line(limit, skip, reader_in);
    }

    // Worker i's acquire and release events, the last `max_lines` of them,
    // one JSON line each: for a failure's message.
    std::string history_of(std::size_t i, std::size_t max_lines = 60) const {
        std::deque<std::string> kept;
        std::ifstream in(log_file(i));
        for (std::string line; std::getline(in, line);) {
            if (line.find("\"ev\":\"acquire_") == std::string::npos &&
                line.find("\"ev\":\"release_") == std::string::npos)
                continue;
            kept.push_back(std::move(line));
            if (kept.size() > max_lines) kept.pop_front();
        }
        std::string out;
        for (const auto& line : kept) out += line + "\n";
        return out;
    }

    // The oracle answered the write of the section worker i is in (its
    // latest increment_ok): its log has write_accepted or write_rejected
    // with that token (either way the oracle holds that token or a higher
    // one), waiting up to limit. False on timeout, or when the write failed
    // or the tenure was lost first. The pause tests wait so for a section
    // that began after the paused holder's lease (the lock excludes it
    // before): its token is higher, so the paused holder's late write is
    // refused only once this one landed.
    bool wrote_after_section(std::size_t i, std::chrono::milliseconds limit) const {
        const auto lines = [&] {
            std::vector<std::string> out;
            std::ifstream in(log_file(i));
            for (std::string line; std::getline(in, line);)
                if (!line.empty()) out.push_back(line);
            return out;
        };
        std::string token;  // ",\"token\":N," of the section's increment_ok
        for (const auto& line : lines())
            if (line.find("\"ev\":\"increment_ok\"") != std::string::npos) {
                const auto at = line.find(",\"token\":");
                const auto end = line.find(',', at + 1);
                if (at != std::string::npos && end != std::string::npos)
                    token = line.substr(at, end - at + 1);
            }
        if (token.empty()) return false;
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            for (const auto& line : lines()) {
                if (line.find(token) == std::string::npos) continue;
                if (line.find("\"ev\":\"write_accepted\"") != std::string::npos ||
                    line.find("\"ev\":\"write_rejected\"") != std::string::npos)
                    return true;
                if (line.find("\"ev\":\"write_failed\"") != std::string::npos ||
                    line.find("\"ev\":\"lost\"") != std::string::npos)
                    return false;
            }
            std::this_thread::sleep_for(5ms);
        }
        return false;
    }

    // Stops (SIGSTOP) a worker inside the pause of its critical section,
    // with its oracle write still to come: its log's last event is
    // increment_ok both before and after the stop. A worker stopped with
    // its write already sent would make the test's "late write" one made in
    // time (and its reply would meet its timeout on resume). Another worker
    // is tried when the first had moved on, up to limit. `at` is mono_ns()
    // just before the stop.
    struct paused_worker {
        std::size_t index;
        long long at;
    };
    std::optional<paused_worker> pause_in_section(std::chrono::milliseconds limit,
                                                  const std::vector<std::size_t>& skip = {}) {
        return pause_when(limit, skip, in_section);
    }
    // The same for a shared mutex's reader inside its section: still so
    // once stopped, so that it did not release in between.
    std::optional<paused_worker> pause_reader_in_section(std::chrono::milliseconds limit,
                                                         const std::vector<std::size_t>& skip = {}) {
        return pause_when(limit, skip, reader_in);
    }

    // SIGSTOP, logged (before the signal, so the logged pause covers the
    // real one), and waits until the kernel reports the worker stopped.
    void pause(std::size_t i) {
        harness_.fault("paused", workers_[i]->pid());
        REQUIRE(workers_[i]->signal(SIGSTOP));
        const auto deadline = std::chrono::steady_clock::now() + 2s;
        while (process_state(workers_[i]->pid()) != 'T' && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(1ms);
        REQUIRE(process_state(workers_[i]->pid()) == 'T');
    }
    void resume(std::size_t i) {
        REQUIRE(workers_[i]->signal(SIGCONT));
        harness_.fault("resumed", workers_[i]->pid());
    }
    // SIGKILL; the worker's object (and its output pipe) goes with it, so
    // replacing killed workers does not pile up descriptors in this process.
    void kill9(std::size_t i) {
        harness_.fault("killed", workers_[i]->pid());
        REQUIRE(workers_[i]->kill9(5s));
        workers_[i].reset();
        killed_.push_back(i);
    }
    bool alive(std::size_t i) const { return workers_.at(i) != nullptr; }

    // Waits (bounded) for every worker that was not killed to finish its
    // duration and exit 0; returns the sum of their completed cycles.
    long finish(std::chrono::milliseconds extra = 40s) {
        long cycles = 0;
        for (std::size_t i = 0; i < workers_.size(); ++i) {
            if (std::find(killed_.begin(), killed_.end(), i) != killed_.end()) continue;
            const auto st = workers_[i]->wait_for(opts_.duration + extra);
            INFO("worker " << i << " output:\n" << workers_[i]->output());
            REQUIRE(st.has_value());
            CHECK(child_process::exit_code(*st) == 0);
            const auto line = wait_for_line(*workers_[i], "done ", 1s);
            if (line.size() > 5) cycles += std::stol(line.substr(5));
        }
        return cycles;
    }

    // A multi-lock fleet's names, as given in options().name.
    std::vector<std::string> member_names() const {
        std::vector<std::string> out;
        std::string rest = opts_.name + ",";
        for (auto comma = rest.find(','); comma != std::string::npos; comma = rest.find(',')) {
            out.push_back(rest.substr(0, comma));
            rest.erase(0, comma + 1);
        }
        return out;
    }

    // The final counter value, as options for the checker.
    history::check_options counted() const {
        history::check_options o;
        if (opts_.multi) {  // a counter per member name
            for (const auto& member : member_names()) {
                const auto v = server_.cmd1({"GET", counter_key() + ":" + member});
                o.counters[member] = v.empty() ? 0 : std::stoll(v);
            }
            return o;
        }
        const auto v = server_.cmd1({"GET", counter_key()});
        o.counters[opts_.name] = v.empty() ? 0 : std::stoll(v);
        return o;
    }

    // Runs the checker and prints its report (with the seed) into the test
    // output; the caller asserts.
    history::check_result check(const history::check_options& o) const {
        auto r = history::check_history(events(), o);
        std::cout << r.report() << std::flush;
        return r;
    }

private:
    // A worker's last log line while inside its section: a writer's (or a
    // mutex holder's) after its increment, a reader's after its grant.
    static bool in_section(const std::string& line) {
        return line.find("\"ev\":\"increment_ok\"") != std::string::npos;
    }
    static bool reader_in(const std::string& line) {
        return line.find("\"ev\":\"acquire_ok\"") != std::string::npos &&
               line.find("\"shared\":1") != std::string::npos;
    }
    // Stops a worker whose last line satisfies pred both before and after
    // the stop; another is tried when the first had moved on, up to limit.
    template <class Pred>
    std::optional<paused_worker> pause_when(std::chrono::milliseconds limit,
                                            const std::vector<std::size_t>& skip, Pred pred) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        for (int attempt = 0; attempt < 50; ++attempt) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left <= 0ms) break;
            const auto i = worker_whose_last_line(left, skip, pred);
            if (!i) break;
            const long long at = mono_ns();
            pause(*i);
            if (pred(last_line(*i))) return paused_worker{*i, at};
            resume(*i);
            std::this_thread::sleep_for(10ms);
        }
        return std::nullopt;
    }
    template <class Pred>
    std::optional<std::size_t> worker_whose_last_line(std::chrono::milliseconds limit,
                                                      const std::vector<std::size_t>& skip,
                                                      Pred pred) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            for (std::size_t i = 0; i < workers_.size(); ++i) {
                if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
                if (!workers_[i] || !workers_[i]->running()) continue;
                if (pred(last_line(i))) return i;
            }
            std::this_thread::sleep_for(2ms);
        }
        return std::nullopt;
    }
    // The NAME argument of worker i: a multi-lock's list reversed for odd i.
    std::string names_for(std::size_t i) const {
        if (!opts_.multi || i % 2 == 0) return opts_.name;
        auto parts = member_names();
        std::string out;
        for (auto p = parts.rbegin(); p != parts.rend(); ++p) out += (out.empty() ? "" : ",") + *p;
        return out;
    }
    const char* mode() const {
        if (opts_.multi) return "multi-cycle";
        if (opts_.rw) return "rw-cycle";
        if (opts_.elect) return "elect-cycle";
        return opts_.fair ? "fair-cycle" : "cycle";
    }
    std::string last_line(std::size_t i) const {
        std::ifstream in(log_file(i));
        std::string line, last;
        while (std::getline(in, line))
            if (!line.empty()) last = line;
        return last;
    }

    redis_server& server_;
    fleet_options opts_;
    std::uint64_t seed_;
    std::mt19937_64 rng_;
    history_dir dir_;
    history::event_writer harness_;
    std::vector<std::unique_ptr<child_process>> workers_;
    std::vector<std::size_t> killed_;
};

// A uniformly drawn duration in [lo, hi].
inline std::chrono::milliseconds draw(std::mt19937_64& rng, std::chrono::milliseconds lo,
                                      std::chrono::milliseconds hi) {
    std::uniform_int_distribution<long> d(lo.count(), hi.count());
    return std::chrono::milliseconds(d(rng));
}

// The most holders whose safe windows were open at one moment, of those
// `counted` accepts.
template <class Pred>
int most_at_once(const history::check_result& r, Pred counted) {
    std::vector<std::pair<long long, int>> steps;
    for (const auto& h : r.holder_list) {
        if (h.window_end <= h.acquire_ok || !counted(h)) continue;
        steps.emplace_back(h.acquire_ok, 1);
        steps.emplace_back(h.window_end, -1);
    }
    std::sort(steps.begin(), steps.end());
    int now = 0, most = 0;
    for (const auto& [t, d] : steps) most = std::max(most, now += d);
    return most;
}
inline int most_at_once(const history::check_result& r) {
    return most_at_once(r, [](const history::holder_info&) { return true; });
}

// The holder of the lock at time t according to the checker (acquired
// before t, window or hold not yet given up before t), for pid.
inline const history::holder_info* holder_at(const history::check_result& r, long long pid, long long t) {
    for (const auto& h : r.holder_list) {
        if (h.pid != pid || h.acquire_ok > t) continue;
        if (h.release_invoked >= 0 && h.release_invoked < t) continue;
        return &h;
    }
    return nullptr;
}

// The first acquisition after t (mono ns) by anyone but `not_pid`, or by
// `only_pid` alone, when given; nullptr when there was none.
inline const history::holder_info* first_acquire_after(const history::check_result& r, long long t,
                                                      long long not_pid = -1,
                                                      long long only_pid = -1) {
    const history::holder_info* first = nullptr;
    for (const auto& h : r.holder_list) {
        if (h.acquire_ok <= t || (not_pid >= 0 && h.pid == not_pid) ||
            (only_pid >= 0 && h.pid != only_pid))
            continue;
        if (!first || h.acquire_ok < first->acquire_ok) first = &h;
    }
    return first;
}

// How many acquisitions processes other than `pid` made in (from, to).
inline int acquisitions_by_others(const history::check_result& r, long long pid, long long from,
                                  long long to) {
    int n = 0;
    for (const auto& h : r.holder_list) n += (h.pid != pid && h.acquire_ok > from && h.acquire_ok < to);
    return n;
}

// The processes that acquired after t: recovery after a fault.
inline std::set<long long> acquired_after(const history::check_result& r, long long t) {
    std::set<long long> pids;
    for (const auto& h : r.holder_list)
        if (h.acquire_ok > t) pids.insert(h.pid);
    return pids;
}

// The processes whose first acquire after t was answered by the server:
// granted, or refused until its wait ended (wait_timeout). A transport
// error, or no answer before the log ends, is no answer. The mutex is not
// fair (docs/safety.md): a live waiter may lose every race of its wait, so
// "answered" is what a test can ask of each worker. A process's first
// acquire after t is the first it invoked after t; or, when it invoked none
// (an acquire in flight at t took the rest of its run: a waiter's whole
// wait, on a loaded machine), the one in flight at t, answered after t.
inline std::set<long long> answered_after(const std::vector<history::event>& evs, long long t) {
    auto outcome_of = [&](const history::event& invoked) {
        const history::event* outcome = nullptr;
        for (const auto& e : evs)
            if (e.pid == invoked.pid && e.task == invoked.task && e.t >= invoked.t &&
                (e.ev == "acquire_ok" || e.ev == "acquire_failed") && (!outcome || e.t < outcome->t))
                outcome = &e;
        return outcome;
    };
    std::map<long long, const history::event*> first;     // pid -> its first acquire_invoked after t
    std::map<long long, const history::event*> in_flight;  // pid -> its last acquire_invoked up to t
    for (const auto& e : evs) {
        if (e.ev != "acquire_invoked") continue;
        auto& slot = e.t > t ? first[e.pid] : in_flight[e.pid];
        if (!slot || (e.t > t ? e.t < slot->t : e.t > slot->t)) slot = &e;
    }
    for (const auto& [pid, invoked] : in_flight) {
        if (first.count(pid)) continue;
        const auto* outcome = outcome_of(*invoked);
        if (!outcome || outcome->t > t) first[pid] = invoked;
    }
    std::set<long long> pids;
    for (const auto& [pid, invoked] : first) {
        const auto* outcome = outcome_of(*invoked);
        if (outcome && (outcome->ev == "acquire_ok" || outcome->error == "wait_timeout"))
            pids.insert(pid);
    }
    return pids;
}

// For a failure message: each process's acquires around t and what became
// of them (the events answered_after reads).
inline std::string acquires_around(const std::vector<history::event>& evs, long long t) {
    std::string out;
    for (const auto& e : evs) {
        if (e.ev != "acquire_invoked" && e.ev != "acquire_ok" && e.ev != "acquire_failed") continue;
        if (e.t < t - 6'000'000'000LL) continue;  // the last few seconds before t, and after
        out += "pid " + std::to_string(e.pid) + " " + e.ev +
               (e.error.empty() ? std::string() : " (" + e.error + ")") + " at " +
               std::to_string((e.t - t) / 1'000'000) + " ms from the last fault\n";
    }
    return out;
}

// How many times, after t, the lock passed from one process to another.
inline int handovers_after(const history::check_result& r, long long t) {
    std::vector<const history::holder_info*> held;
    for (const auto& h : r.holder_list) held.push_back(&h);
    std::sort(held.begin(), held.end(),
              [](const auto* a, const auto* b) { return a->acquire_ok < b->acquire_ok; });
    int n = 0;
    for (std::size_t i = 1; i < held.size(); ++i)
        n += held[i]->acquire_ok > t && held[i]->pid != held[i - 1]->pid ? 1 : 0;
    return n;
}

// A holder paused past its lease: a worker stopped (SIGSTOP) inside its
// section (fleet::pause_in_section), left stopped for its lease plus
// `extra`, and resumed (SIGCONT) only once another worker has written after
// it, so that its late write comes after that one and must be refused.
struct paused_holder {
    std::size_t index = 0;
    long long pid = 0;
    long long paused_at = 0;   // mono ns
    long long resumed_at = 0;  // mono ns
};
inline paused_holder pause_past_lease(fleet& f, std::chrono::milliseconds extra) {
    const auto victim = f.pause_in_section(5s);
    REQUIRE(victim);
    paused_holder p;
    p.index = victim->index;
    p.pid = f.worker(victim->index).pid();
    p.paused_at = victim->at;
    std::this_thread::sleep_for(f.options().lease + extra);
    // Another holder writes (bounded) before the resume: the late write is
    // refused only then (wrote_after_section).
    const auto next = f.worker_in_section(5s, {victim->index});
    REQUIRE(next);
    REQUIRE(f.wrote_after_section(*next, 5s));
    p.resumed_at = mono_ns();
    f.resume(victim->index);
    return p;
}

// Restarts `server` under a running fleet, logged as the harness's
// server_restarted fault; returns when it answers again (mono ns).
inline long long restart_server(fleet& f, redis_server& server) {
    f.harness().fault("server_restarted", server.pid());
    server.restart();
    return mono_ns();
}

// The same for another backend's server (support/lock_server.hpp): etcd's
// member keeps its data dir, ZooKeeper's server its snapshot and log.
inline long long restart_server(fleet& f, lock_server& server) {
    f.harness().fault("server_restarted", server.pid());
    server.restart();
    return mono_ns();
}

// A redis-server that keeps every write (append-only file, fsync each):
// a restart brings back the locks, the queues and the fence counters.
inline redis_server_options durable_server() {
    redis_server_options so;
    so.extra_args = {"--appendonly", "yes", "--appendfsync", "always"};
    return so;
}

}  // namespace corolock::test::fault
