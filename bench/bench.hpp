// Shared pieces of corolock_bench: options, metrics, timing and statistics.
//
// The program has three roles, chosen on the command line (see main.cpp):
// the orchestrator runs every scenario, each in a fresh child process of its
// own so that one scenario's heap cannot hide another's memory growth; a
// scenario process runs one scenario and prints its metrics; a worker
// process is one of the contending processes of scenario S3.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

using clock = std::chrono::steady_clock;

// How big a run is. full: the published figures. quick: the same scenarios,
// shorter. smoke: tiny counts, only to prove the program works (ctest).
enum class run_mode { full, quick, smoke };
run_mode parse_mode(std::string_view s);
std::string_view to_string(run_mode m);

struct options {
    std::uint16_t port = 0;
    run_mode mode = run_mode::full;
    std::string data_dir;  // where scenarios write plot data; empty: none
    std::string self_exe;  // this program, for child processes
    bool flush = false;    // a throwaway server: the sweep empties it between its steps
    // S1 and S2: how long the cycling runs, instead of the mode's length
    // (scripts/bench.sh runs S1 in short rounds, each beside a baseline sample).
    double seconds = 0;
};

// Picks the figure for the run mode: the published run, a shorter one, or a
// token amount that only proves the code path works.
template <class T>
T pick(const options& o, T full, T quick, T smoke) {
    switch (o.mode) {
    case run_mode::full: return full;
    case run_mode::quick: return quick;
    case run_mode::smoke: return smoke;
    }
    return smoke;
}

// Metrics of one scenario, in order: a name and a JSON literal. A scenario
// process prints them as "name<TAB>literal" lines; the orchestrator turns
// them into one JSON object per scenario and reads numbers back for targets.
class metrics {
public:
    void number(std::string key, double v);
    void count(std::string key, std::uint64_t v);
    void text(std::string key, std::string_view v);
    void flag(std::string key, bool v);
    void list(std::string key, const std::vector<double>& v);
    void raw(std::string key, std::string literal);

    const std::vector<std::pair<std::string, std::string>>& items() const noexcept { return items_; }
    // The value of key as a number, or NaN when absent or not a number.
    double get(std::string_view key) const;
    void print_lines() const;  // to stdout

private:
    std::vector<std::pair<std::string, std::string>> items_;
};

std::string json_quote(std::string_view s);
std::string json_number(double v);  // null for NaN and infinities

// CLOCK_MONOTONIC in ns: the one clock that all processes of a machine
// share, so S3 can compare event times taken in different processes.
std::int64_t mono_ns();

// A loop that runs for a fixed window (S3's workers, the backends' handoff
// workers, the topology benchmark's cycle and handoff loops) still makes
// this many rounds when its start came late: on a loaded machine starting a
// process can take a whole smoke window, and a run of nothing checks
// nothing (S3's counter against its acquisitions, the handoffs).
inline constexpr int min_rounds = 2;

// Percentiles by the nearest-rank method over a sorted copy.
struct summary {
    std::size_t n = 0;
    double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
summary summarize(std::vector<double> values);
double percentile_sorted(const std::vector<double>& sorted, double q);
void add_summary(metrics& m, const std::string& prefix, const summary& s);

// Process resources, read from /proc and getrusage.
std::size_t rss_bytes();
double cpu_seconds();  // user + system time of this process

// Counting global operator new (alloc_counter.cpp): every C++ allocation of
// this thread, the library's included, goes through it. live_bytes is the
// whole process's heap in use (malloc's own figure).
struct alloc_snapshot {
    std::uint64_t calls = 0;
    std::uint64_t bytes = 0;
    std::int64_t live_bytes = 0;
};
alloc_snapshot alloc_now() noexcept;

// One scenario: fills m, stops its clients before returning.
using scenario_fn = boost::asio::awaitable<void> (*)(const options&, metrics&);

struct scenario_info {
    std::string_view name;
    scenario_fn run;
    int time_limit_s;  // the scenario process is killed after this
};
const std::vector<scenario_info>& scenarios();

// FENCE (fence_scenario.cpp): a fenced write and the sequencer check against
// their floors, a plain write and a PING, interleaved on one client.
boost::asio::awaitable<void> scenario_fence(const options& o, metrics& m);

// ELECT (election_scenario.cpp): resign to new leader against the mutex's
// handoff, failover after kill -9 against the lease, observe against PING.
boost::asio::awaitable<void> scenario_election(const options& o, metrics& m);

// Runs one scenario in this process and prints its metrics. Exit status 0
// on success; on failure an "error" metric says why.
int run_scenario_process(const options& o, std::string_view name);

// The S3 worker role.
struct worker_args {
    std::string name;          // the lock name
    std::string counter_key;   // the GET/SET counter
    int task_base = 0;         // first task id of this process
    int tasks = 0;             // coroutines in this process
    std::int64_t start_ns = 0; // CLOCK_MONOTONIC: start together
    std::int64_t end_ns = 0;   // no new acquire after this
};
int run_worker_process(const options& o, const worker_args& w);

// Loads the acquire script on the server and prints its SHA1, for
// redis-benchmark's EVALSHA baseline. Fails unless it matches the library's.
int load_acquire_script(const options& o);

}  // namespace bench
