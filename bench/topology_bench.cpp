// corolock_bench_topology: the Redis Cluster and Sentinel scenarios of
// scripts/bench.sh (docs/benchmarks.md, "Topologies"). Like corolock_bench,
// it measures and reports; it never fails on a slow figure.
//
//   corolock_bench_topology --cluster URL --cycles --seconds S [--coroutines N]
//       C1: N coroutines (64, as S2) on one corolock::backend opened with
//       the redis+cluster:// URL, each cycling acquire -> release on fresh
//       names, which hash all over the slots and so over every primary.
//       Prints cycles_per_s; scripts/bench.sh pairs each round with a
//       `redis-benchmark --cluster` sample of the acquire script.
//   corolock_bench_topology --cluster URL --handoff --lock NAME --seconds S [--data FILE]
//       C2: two worker processes x 4 coroutines contend for one lock, as S3
//       does on one server: a handoff is one holder's release call -> the
//       next holder's acquire returning. Across processes the waiter is
//       woken by the sharded unlock message (SSUBSCRIBE/SPUBLISH) on the
//       lock's primary. Prints handoff percentiles (all, and across
//       processes); scripts/bench.sh puts them over PING's p50 on that node.
//       FILE: the handoffs' CDF, for the plot.
//   corolock_bench_topology --sentinel --reps N
//       T1: N times: a fresh Sentinel deployment (test/support/sentinel_fleet:
//       1 primary, 2 replicas, 3 Sentinels, down-after 1000 ms, failover
//       timeout 2000 ms, quorum 2), locks held and waited on, SIGKILL of the
//       primary; the time from the kill to the first new grant and to the
//       lost signal of a lock the promoted replica did not have.
//   corolock_bench_topology --cluster URL --worker --lock NAME --tasks N
//                           --task-base B --start-ns S --end-ns E
//       Internal: one C2 contender process.
//   corolock_bench_topology --redlock URL,URL,URL[,...] --cycles --seconds S [--redlock-first 1]
//       R1: one coroutine cycling acquire -> release on fresh names, S
//       seconds on the single-node mutex of the first URL's server and S
//       seconds on a RedLock over all of them (backend::redlock), in one
//       process, one after the other (the single node first unless
//       --redlock-first 1). Prints both cycles_per_s and their ratio;
//       scripts/bench.sh pairs each round with a 1-client redis-benchmark
//       sample of the acquire script on the first server.
//   corolock_bench_topology --redlock URLS --handoff --seconds S [--data FILE]
//       R2: handoff from one client to a waiter on another: two backends
//       in one process take turns on one lock; each starts its acquire
//       while the other holds (10 ms), so every release has one waiter. A
//       handoff is the release call -> the waiter's acquire returning. S
//       seconds on a RedLock over URLS, then S/4 on the single-node mutex of
//       the first server. Prints percentiles of both. FILE: the RedLock
//       handoffs' CDF, for the plot (FILE.single: the single node's).
//   corolock_bench_topology --redlock URLS --fanout --seconds S [--redlock-first 1]
//       R3: the fan-out under per-node latency: every node behind a
//       fault_proxy that holds its replies, 2 ms more per node (2, 4, 6 ms
//       on 3 nodes). One coroutine cycling on fresh names, S seconds on the
//       single-node mutex of the slowest node (through its proxy) and S on
//       a RedLock over all of them, as R1. Prints each side's cycle p50 and
//       mean and acquire and release p50, their ratios, what a sequential
//       fan-out would cost (sum / slowest delay), and fanout_warn 1 (and a
//       WARN on stderr) when the cycle ratio exceeds fanout_warn_above; the
//       exit status does not depend on it. URLS: redis://127.0.0.1:PORT.
//
// Output: "key<TAB>value" lines on stdout. Everything talks to 127.0.0.1.
#include "process.hpp"

#include "redlock/quorum.hpp"

#include "support/fault_proxy.hpp"
#include "support/sentinel_fleet.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

std::int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void put(const std::string& key, double v) { std::cout << key << '\t' << v << std::endl; }

asio::awaitable<void> sleep_for(std::chrono::nanoseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_nothrow);
}

// User + system CPU time of this process, in seconds.
double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string run_id() { return std::to_string(::getpid()) + "-" + std::to_string(now_ns() % 1'000'000'000); }

// ---------------------------------------------------------------------------
// C1: uncontended cycles over names spread across the primaries.

// Each cycle's acquire call -> grant and release call -> answer (R3).
struct phase_samples {
    std::vector<double> acquire_us, release_us;
};

struct cycler {
    std::uint64_t cycles = 0;
    std::string error;
    phase_samples* phases = nullptr;  // when set, every cycle's phases go there
};

asio::awaitable<void> cycle_loop(corolock::backend& b, std::string prefix, std::int64_t end_ns,
                                 cycler& out) {
    const corolock::lock_options opts{.lease = 30s, .wait = 10s};
    constexpr auto min_rounds = static_cast<std::uint64_t>(bench::min_rounds);
    for (std::uint64_t i = 0; i < 100'000'000 && (i < min_rounds || now_ns() < end_ns); ++i) {
        corolock::mutex m{b, prefix + std::to_string(i)};
        const auto t0 = now_ns();
        auto [ec, g] = co_await m.async_acquire(opts, use_nothrow);
        if (ec) {
            out.error = "acquire: " + ec.message();
            co_return;
        }
        const auto t1 = now_ns();
        auto [rec] = co_await g.async_release(use_nothrow);
        if (rec) {
            out.error = "release: " + rec.message();
            co_return;
        }
        if (out.phases) {
            out.phases->acquire_us.push_back(static_cast<double>(t1 - t0) / 1e3);
            out.phases->release_us.push_back(static_cast<double>(now_ns() - t1) / 1e3);
        }
        ++out.cycles;
    }
}

// Runs n cycle loops until end_ns; the cycles done, or throws. `phases`:
// every cycle's phase times, for one loop (n == 1).
asio::awaitable<std::uint64_t> cycle_for(corolock::backend& b, std::size_t n, std::string prefix,
                                         std::int64_t end_ns, phase_samples* phases = nullptr) {
    auto ex = co_await asio::this_coro::executor;
    std::vector<cycler> results(n);
    if (n == 1) results.front().phases = phases;
    auto left = std::make_shared<std::size_t>(n);
    for (std::size_t i = 0; i < n; ++i)
        asio::co_spawn(ex, cycle_loop(b, prefix + std::to_string(i) + ":", end_ns, results[i]),
                       [left](std::exception_ptr) { --*left; });
    // Each loop ends its cycle in progress after end_ns: bounded by the
    // command timeouts, 20 s is ample.
    for (int i = 0; i < 2000 && *left > 0; ++i) co_await sleep_for(10ms);
    if (*left > 0) throw std::runtime_error("cycling coroutines did not finish");
    std::uint64_t cycles = 0;
    for (const auto& r : results) {
        if (!r.error.empty()) throw std::runtime_error(r.error);
        cycles += r.cycles;
    }
    co_return cycles;
}

asio::awaitable<void> cluster_cycles(std::string url, double seconds, std::size_t coroutines) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend b(ex, url);
    const auto id = run_id();
    // Warm-up: every primary's connection, the scripts loaded on each.
    co_await cycle_for(b, 16, "bench:c1:warm:" + id + ":", now_ns() + 300'000'000);
    const auto t0 = now_ns();
    const double cpu0 = cpu_seconds();
    const auto cycles = co_await cycle_for(b, coroutines, "bench:c1:" + id + ":",
                                           t0 + static_cast<std::int64_t>(seconds * 1e9));
    const double s = static_cast<double>(now_ns() - t0) / 1e9;
    const double cpu = cpu_seconds() - cpu0;
    b.stop();
    put("coroutines", static_cast<double>(coroutines));
    put("cycles", static_cast<double>(cycles));
    put("seconds", s);
    put("cycles_per_s", static_cast<double>(cycles) / s);
    // As S2's client_cpu_us_per_cycle: the client's own cost.
    put("client_cpu_us_per_cycle", cycles ? cpu * 1e6 / static_cast<double>(cycles) : NAN);
}

// ---------------------------------------------------------------------------
// C2: handoff on one lock between two processes.

struct handoff_event {
    std::uint64_t token;
    int task;
    std::int64_t acquired_ns, release_ns;
};

asio::awaitable<void> handoff_task(corolock::backend& b, std::string name, int task,
                                   std::int64_t end_ns, std::vector<handoff_event>& events,
                                   std::string& error) {
    corolock::mutex m{b, name};  // a handle of its own: a distinct owner
    const corolock::lock_options opts{.lease = 10s, .wait = 5s};
    for (int i = 0; i < 1'000'000 && (i < bench::min_rounds || now_ns() < end_ns); ++i) {
        auto [ec, g] = co_await m.async_acquire(opts, use_nothrow);
        const auto acquired = now_ns();
        if (ec) {
            error = "acquire: " + ec.message();
            co_return;
        }
        const auto token = g.token();
        const auto released = now_ns();
        auto [rec] = co_await g.async_release(use_nothrow);
        if (rec) {
            error = "release: " + rec.message();
            co_return;
        }
        events.push_back({token, task, acquired, released});
    }
}

asio::awaitable<void> handoff_worker(std::string url, std::string name, int tasks, int task_base,
                                     std::int64_t start_ns, std::int64_t end_ns) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend b(ex, url);
    {
        // Connected (and the scripts loaded) before the start line: one
        // cycle on a name of the same slot.
        corolock::mutex m{b, name};
        auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 5s}, use_nothrow);
        if (!ec) co_await g.async_release(use_nothrow);
    }
    if (const auto wait = start_ns - now_ns(); wait > 0) co_await sleep_for(std::chrono::nanoseconds(wait));
    std::vector<std::vector<handoff_event>> events(static_cast<std::size_t>(tasks));
    std::vector<std::string> errors(static_cast<std::size_t>(tasks));
    auto left = std::make_shared<int>(tasks);
    for (int t = 0; t < tasks; ++t) {
        const auto i = static_cast<std::size_t>(t);
        asio::co_spawn(ex, handoff_task(b, name, task_base + t, end_ns, events[i], errors[i]),
                       [left](std::exception_ptr) { --*left; });
    }
    for (int i = 0; i < 4000 && *left > 0; ++i) co_await sleep_for(10ms);
    b.stop();
    std::string out;
    for (const auto& list : events)
        for (const auto& e : list) {
            out += "acq " + std::to_string(e.token) + ' ' + std::to_string(e.task) + ' ';
            out += std::to_string(e.acquired_ns) + ' ' + std::to_string(e.release_ns) + '\n';
        }
    for (const auto& e : errors)
        if (!e.empty()) out += "error " + e + '\n';
    if (*left > 0) out += "error tasks did not finish\n";
    std::cout << out << std::flush;
}

void cluster_handoff(const std::string& self, const std::string& url, const std::string& name,
                     double seconds, const std::string& data_file) {
    constexpr int processes = 2, tasks = 4;
    const std::int64_t start = now_ns() + 1'000'000'000;
    const std::int64_t end = start + static_cast<std::int64_t>(seconds * 1e9);
    std::vector<bench::child> kids;
    for (int p = 0; p < processes; ++p)
        kids.push_back(bench::spawn_child(
            {self, "--cluster", url, "--worker", "--lock", name, "--tasks", std::to_string(tasks),
             "--task-base", std::to_string(p * tasks), "--start-ns", std::to_string(start),
             "--end-ns", std::to_string(end)}));
    bench::collect_children({&kids[0], &kids[1]},
                            bench::clock::now() + std::chrono::nanoseconds(end - now_ns()) + 40s);
    std::vector<handoff_event> events;
    for (auto& k : kids) {
        if (k.exit_status != 0) throw std::runtime_error("a handoff worker failed:\n" + k.out);
        std::istringstream in(k.out);
        for (std::string line; std::getline(in, line);) {
            std::istringstream ls(line);
            std::string kind;
            ls >> kind;
            if (kind == "error") throw std::runtime_error("handoff worker: " + line);
            handoff_event e{};
            if (kind == "acq" && ls >> e.token >> e.task >> e.acquired_ns >> e.release_ns)
                events.push_back(e);
        }
    }
    // Neighbours in token order are consecutive holders (as in S3).
    std::sort(events.begin(), events.end(),
              [](const handoff_event& a, const handoff_event& b) { return a.token < b.token; });
    std::vector<double> all, cross;
    std::uint64_t gaps = 0;
    for (std::size_t i = 1; i < events.size(); ++i) {
        const auto& prev = events[i - 1];
        const auto& next = events[i];
        if (next.acquired_ns < prev.acquired_ns) {
            ++gaps;
            continue;
        }
        const double us = static_cast<double>(next.acquired_ns - prev.release_ns) / 1e3;
        all.push_back(us);
        if (next.task / tasks != prev.task / tasks) cross.push_back(us);
    }
    put("acquisitions", static_cast<double>(events.size()));
    put("token_gaps", static_cast<double>(gaps));
    put("handoffs", static_cast<double>(all.size()));
    put("handoff_p50_us", percentile(all, 0.5));
    put("handoff_p90_us", percentile(all, 0.9));
    put("handoffs_cross_process", static_cast<double>(cross.size()));
    put("handoff_cross_process_p50_us", percentile(cross, 0.5));
    put("handoff_cross_process_p90_us", percentile(cross, 0.9));
    if (!data_file.empty() && !all.empty()) {
        // The CDF, for the plot (as S3's handoff_cdf.dat): at most ~2000 points.
        std::sort(all.begin(), all.end());
        std::ofstream out(data_file);
        out << "# handoff_us cumulative_fraction (C2: 2 processes x 4 coroutines, one lock, cluster)\n";
        const std::size_t step = std::max<std::size_t>(1, all.size() / 2000);
        for (std::size_t i = 0; i < all.size(); i += step)
            out << all[i] << ' ' << static_cast<double>(i + 1) / static_cast<double>(all.size()) << '\n';
        out << all.back() << " 1\n";
    }
}

// ---------------------------------------------------------------------------
// R1, R2: RedLock over independent servers, beside the single-node mutex.

std::vector<std::string> split_urls(const std::string& list) {
    std::vector<std::string> out;
    std::istringstream in(list);
    for (std::string u; std::getline(in, u, ',');)
        if (!u.empty()) out.push_back(u);
    return out;
}

struct cycle_figures {
    double cycles_per_s = NAN, cpu_us_per_cycle = NAN;
};

asio::awaitable<cycle_figures> timed_cycles(corolock::backend& b, std::string prefix, double seconds) {
    const auto t0 = now_ns();
    const double cpu0 = cpu_seconds();
    const auto cycles =
        co_await cycle_for(b, 1, std::move(prefix), t0 + static_cast<std::int64_t>(seconds * 1e9));
    const double s = static_cast<double>(now_ns() - t0) / 1e9;
    const double cpu = cpu_seconds() - cpu0;
    co_return cycle_figures{static_cast<double>(cycles) / s,
                            cycles ? cpu * 1e6 / static_cast<double>(cycles) : NAN};
}

// Every connection up, the scripts loaded on every node (R1, R3).
asio::awaitable<void> warm_up(corolock::backend& single, corolock::backend& quorum, std::string prefix) {
    co_await cycle_for(single, 1, prefix + ":s:", now_ns() + 200'000'000);
    co_await cycle_for(quorum, 1, prefix + ":r:", now_ns() + 300'000'000);
}

asio::awaitable<void> redlock_cycles(std::vector<std::string> urls, double seconds,
                                     bool redlock_first) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend single(ex, urls.front());
    auto quorum = corolock::backend::redlock(ex, urls);
    const auto id = run_id();
    co_await warm_up(single, quorum, "bench:r1:warm:" + id);
    cycle_figures one, many;
    if (redlock_first) {
        many = co_await timed_cycles(quorum, "bench:r1:" + id + ":r:", seconds);
        one = co_await timed_cycles(single, "bench:r1:" + id + ":s:", seconds);
    } else {
        one = co_await timed_cycles(single, "bench:r1:" + id + ":s:", seconds);
        many = co_await timed_cycles(quorum, "bench:r1:" + id + ":r:", seconds);
    }
    quorum.stop();
    single.stop();
    put("nodes", static_cast<double>(urls.size()));
    put("single_cycles_per_s", one.cycles_per_s);
    put("redlock_cycles_per_s", many.cycles_per_s);
    put("redlock_over_single", many.cycles_per_s / one.cycles_per_s);
    put("single_client_cpu_us_per_cycle", one.cpu_us_per_cycle);
    put("redlock_client_cpu_us_per_cycle", many.cpu_us_per_cycle);
}

// Two owners on two backends taking turns on one lock (R2).
struct turns {
    std::int64_t end_ns = 0;
    int holder = -1;                     // the side holding, -1 for none
    bool waiting[2] = {false, false};    // the side's acquire is under way
    std::int64_t released_ns = 0;        // the last release call
    int done = 0;                        // sides finished
    std::vector<double> handoffs_us;
    std::string error;
};

asio::awaitable<void> turn_side(corolock::backend& b, std::string name, int me,
                                std::shared_ptr<turns> st) {
    corolock::mutex m{b, name};
    const int other = 1 - me;
    const corolock::lock_options opts{.lease = 10s, .wait = 5s};
    for (int i = 0; i < 1'000'000 && st->error.empty(); ++i) {
        // Start waiting only while the other holds (side 0 starts alone),
        // so that the release below always has a waiter.
        for (int j = 0; j < 10'000 && !(st->holder == other || (i == 0 && me == 0)) &&
                        st->done == 0 && st->error.empty();
             ++j)
            co_await sleep_for(1ms);
        if (st->done != 0 || !st->error.empty()) break;
        st->waiting[me] = true;
        auto [ec, g] = co_await m.async_acquire(opts, use_nothrow);
        const auto granted = now_ns();
        st->waiting[me] = false;
        if (ec) {
            st->error = "acquire: " + ec.message();
            break;
        }
        if (st->released_ns != 0) st->handoffs_us.push_back(static_cast<double>(granted - st->released_ns) / 1e3);
        st->holder = me;
        co_await sleep_for(10ms);
        // The other's acquire is on its way (it saw us hold within 1 ms).
        for (int j = 0; j < 1000 && !st->waiting[other] && now_ns() < st->end_ns && st->done == 0; ++j)
            co_await sleep_for(1ms);
        const bool last = now_ns() >= st->end_ns || st->done != 0;
        st->holder = -1;
        st->released_ns = last ? 0 : now_ns();
        auto [rec] = co_await g.async_release(use_nothrow);
        if (rec) {
            st->error = "release: " + rec.message();
            break;
        }
        if (last) break;
    }
    ++st->done;
}

// Runs the two sides for `seconds`; the handoffs in microseconds, or throws.
asio::awaitable<std::vector<double>> taking_turns(corolock::backend& a, corolock::backend& b,
                                                  std::string name, double seconds) {
    auto ex = co_await asio::this_coro::executor;
    auto st = std::make_shared<turns>();
    st->end_ns = now_ns() + static_cast<std::int64_t>(seconds * 1e9);
    asio::co_spawn(ex, turn_side(a, name, 0, st), asio::detached);
    asio::co_spawn(ex, turn_side(b, name, 1, st), asio::detached);
    for (int i = 0; i < 4000 && st->done < 2; ++i) co_await sleep_for(10ms);
    if (!st->error.empty()) throw std::runtime_error(st->error);
    if (st->done < 2) throw std::runtime_error("the two sides did not finish");
    co_return st->handoffs_us;
}

void put_percentiles(const std::string& prefix, const std::vector<double>& v) {
    put(prefix + "handoffs", static_cast<double>(v.size()));
    put(prefix + "handoff_p50_us", percentile(v, 0.5));
    put(prefix + "handoff_p90_us", percentile(v, 0.9));
    put(prefix + "handoff_p99_us", percentile(v, 0.99));
    put(prefix + "handoff_max_us", v.empty() ? NAN : *std::max_element(v.begin(), v.end()));
}

void write_cdf(const std::string& file, std::vector<double> v, const std::string& what) {
    if (file.empty() || v.empty()) return;
    std::sort(v.begin(), v.end());
    std::ofstream out(file);
    out << "# handoff_us cumulative_fraction (" << what << ")\n";
    for (std::size_t i = 0; i < v.size(); ++i)
        out << v[i] << ' ' << static_cast<double>(i + 1) / static_cast<double>(v.size()) << '\n';
}

asio::awaitable<void> redlock_handoff(std::vector<std::string> urls, double seconds,
                                      std::string data_file) {
    auto ex = co_await asio::this_coro::executor;
    const auto id = run_id();
    std::vector<double> quorum_us, single_us;
    {
        auto a = corolock::backend::redlock(ex, urls);
        auto b = corolock::backend::redlock(ex, urls);
        co_await cycle_for(a, 1, "bench:r2:warm:" + id + ":a:", now_ns() + 200'000'000);
        co_await cycle_for(b, 1, "bench:r2:warm:" + id + ":b:", now_ns() + 200'000'000);
        quorum_us = co_await taking_turns(a, b, "bench:r2:" + id, seconds);
        a.stop();
        b.stop();
    }
    {
        corolock::backend a(ex, urls.front());
        corolock::backend b(ex, urls.front());
        co_await cycle_for(a, 1, "bench:r2:warm:" + id + ":sa:", now_ns() + 100'000'000);
        co_await cycle_for(b, 1, "bench:r2:warm:" + id + ":sb:", now_ns() + 100'000'000);
        single_us = co_await taking_turns(a, b, "bench:r2:single:" + id, seconds / 4);
        a.stop();
        b.stop();
    }
    put("nodes", static_cast<double>(urls.size()));
    put_percentiles("redlock_", quorum_us);
    put_percentiles("single_", single_us);
    const std::string n = std::to_string(urls.size());
    write_cdf(data_file, quorum_us, "R2: RedLock on " + n + " nodes, two clients taking turns");
    if (!data_file.empty())
        write_cdf(data_file + ".single", single_us, "R2: the single-node mutex, two clients taking turns");
}

// ---------------------------------------------------------------------------
// R3: the fan-out under per-node latency. Node i (from 1) answers through a
// fault_proxy that holds each reply i x fanout_step: a round trip to it
// costs that much more, far above the client's CPU per cycle.

constexpr auto fanout_step = 2ms;
// A RedLock cycle over this times the slowest single node's is flagged: a
// concurrent fan-out sits near 1, a sequential one at sum/max (2 and 3).
constexpr double fanout_warn_above = 1.5;

// The port of a redis://127.0.0.1:PORT URL.
std::uint16_t port_of(const std::string& url) {
    const std::string head = "redis://127.0.0.1:";
    if (url.rfind(head, 0) != 0) throw std::invalid_argument("R3 needs " + head + "PORT URLs: " + url);
    return static_cast<std::uint16_t>(std::stoi(url.substr(head.size())));
}

double mean(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? NAN : sum / static_cast<double>(v.size());
}

std::vector<double> cycle_us(const phase_samples& p) {
    std::vector<double> out(p.acquire_us.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = p.acquire_us[i] + p.release_us[i];
    return out;
}

void put_phases(const std::string& prefix, const phase_samples& p) {
    const auto cycles = cycle_us(p);
    put(prefix + "cycles", static_cast<double>(cycles.size()));
    put(prefix + "cycle_p50_us", percentile(cycles, 0.5));
    put(prefix + "cycle_mean_us", mean(cycles));
    put(prefix + "acquire_p50_us", percentile(p.acquire_us, 0.5));
    put(prefix + "release_p50_us", percentile(p.release_us, 0.5));
}

asio::awaitable<void> redlock_fanout(std::vector<std::string> urls, double seconds, bool redlock_first) {
    auto ex = co_await asio::this_coro::executor;
    using delay_ms = std::chrono::duration<double, std::milli>;
    std::vector<std::unique_ptr<corolock::test::fault_proxy>> proxies;
    std::vector<std::string> proxied;
    std::vector<double> delays;
    for (std::size_t i = 0; i < urls.size(); ++i) {
        const auto d = fanout_step * static_cast<int>(i + 1);
        proxies.push_back(std::make_unique<corolock::test::fault_proxy>(port_of(urls[i])));
        proxies.back()->set_delay(corolock::test::fault_proxy::direction::to_client, d);
        proxied.push_back(proxies.back()->url());
        delays.push_back(delay_ms(d).count());
    }
    // The single node is the slowest one, through its proxy.
    corolock::backend single(ex, proxied.back());
    auto quorum = corolock::backend::redlock(ex, proxied);
    const auto id = run_id();
    co_await warm_up(single, quorum, "bench:r3:warm:" + id);
    phase_samples one, many;
    const auto run = [&](corolock::backend& b, const char* side, phase_samples& out) {
        const auto end = now_ns() + static_cast<std::int64_t>(seconds * 1e9);
        return cycle_for(b, 1, "bench:r3:" + id + side, end, &out);
    };
    if (redlock_first) {
        co_await run(quorum, ":r:", many);
        co_await run(single, ":s:", one);
    } else {
        co_await run(single, ":s:", one);
        co_await run(quorum, ":r:", many);
    }
    quorum.stop();
    single.stop();

    put("nodes", static_cast<double>(urls.size()));
    for (std::size_t i = 0; i < delays.size(); ++i)
        put("node" + std::to_string(i + 1) + "_reply_delay_ms", delays[i]);
    const double slowest = delays.back();
    const double sum = std::accumulate(delays.begin(), delays.end(), 0.0);
    const auto m = corolock::detail::redlock_quorum::majority_of(urls.size());
    put_phases("single_", one);
    put_phases("redlock_", many);
    const double ratio = percentile(cycle_us(many), 0.5) / percentile(cycle_us(one), 0.5);
    put("redlock_over_single_p50", ratio);
    put("redlock_over_single_mean", mean(cycle_us(many)) / mean(cycle_us(one)));
    put("redlock_acquire_over_single_p50",
        percentile(many.acquire_us, 0.5) / percentile(one.acquire_us, 0.5));
    put("redlock_release_over_single_p50",
        percentile(many.release_us, 0.5) / percentile(one.release_us, 0.5));
    // What the same cycle would cost with the nodes asked one after
    // another, and an acquire that answered at the majority's slowest.
    put("sequential_over_single", sum / slowest);
    put("majority_acquire_over_single", delays[m - 1] / slowest);
    put("fanout_warn_above", fanout_warn_above);
    const bool warn = !(ratio <= fanout_warn_above);
    put("fanout_warn", warn ? 1 : 0);
    if (warn)
        std::cerr << "corolock_bench_topology: WARN R3 on " << urls.size()
                  << " nodes: RedLock cycle p50 / slowest single node = " << ratio << " > "
                  << fanout_warn_above << ": the fan-out does not look concurrent\n";
}

// ---------------------------------------------------------------------------
// T1: Sentinel failover.

// Keys of a lock, as docs/protocol.md lays them out.
std::string lock_key(const std::string& name) { return "corolock:{" + name + "}"; }

struct failover_figures {
    double first_grant_ms = NAN;      // kill -> first grant on the contended lock
    double lost_ms = NAN;             // kill -> lost signal of the forgotten lock
    double forgotten_grant_ms = NAN;  // kill -> its waiter's grant
};

// What the tasks of one repetition share. Held by each task, so that none
// outlives it whatever way failover_once leaves.
struct failover_state {
    bool stop = false;
    std::int64_t killed = 0, first_after = 0, forgotten_granted = 0;
    int busy_left = 0;
    bool waiter_done = true;
};

// A contender on the busy lock: acquire, hold 20 ms, release, until stop.
asio::awaitable<void> busy_task(corolock::mutex m, std::shared_ptr<failover_state> st) {
    for (int i = 0; i < 100'000 && !st->stop; ++i) {
        auto [ec, g] = co_await m.async_acquire({.lease = 3s, .wait = 20s}, use_nothrow);
        const auto t = now_ns();
        if (ec) {
            co_await sleep_for(20ms);
            continue;
        }
        if (st->killed != 0 && t > st->killed && st->first_after == 0) st->first_after = t;
        co_await sleep_for(20ms);
        co_await g.async_release(use_nothrow);
    }
}

// Waits on the forgotten lock from the other backend.
asio::awaitable<void> forgotten_waiter(corolock::mutex m, std::shared_ptr<failover_state> st) {
    auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 30s}, use_nothrow);
    if (!ec) {
        st->forgotten_granted = now_ns();
        co_await g.async_release(use_nothrow);
    }
    st->waiter_done = true;
}

asio::awaitable<void> failover_steps(corolock::test::sentinel_fleet& fleet, corolock::backend& holder,
                                     corolock::backend& other, std::shared_ptr<failover_state> sp,
                                     failover_figures& out) {
    auto ex = co_await asio::this_coro::executor;
    auto& st = *sp;
    // The forgotten lock: held with a long lease (its first renewal is far
    // away, so only the re-verification after the failover can tell), and
    // waited on from the other backend.
    corolock::mutex held_m{holder, "moved"};
    auto [hec, held] = co_await held_m.async_acquire({.lease = 60s, .wait = 10s}, use_nothrow);
    if (hec) throw std::runtime_error("acquire before the failover: " + hec.message());
    st.waiter_done = false;
    asio::co_spawn(ex, forgotten_waiter(corolock::mutex{other, "moved"}, sp), asio::detached);
    co_await sleep_for(1s);  // contention under way, the waiter subscribed

    // As a promoted replica that missed the primary's last writes would:
    // writes to a replica are its own, never sent on.
    for (std::size_t i = 1; i < fleet.servers(); ++i) {
        fleet.server(i).cmd({"CONFIG", "SET", "replica-read-only", "no"});
        fleet.server(i).cmd({"DEL", lock_key("moved"), lock_key("moved") + ":fence"});
    }
    st.killed = now_ns();
    fleet.server(0).kill9();

    auto lost = co_await (held.async_until_lost(use_nothrow) || sleep_for(25s));
    if (lost.index() == 0) out.lost_ms = static_cast<double>(now_ns() - st.killed) / 1e6;
    for (int i = 0; i < 2500 && (st.first_after == 0 || !st.waiter_done); ++i) co_await sleep_for(10ms);
    if (st.first_after != 0) out.first_grant_ms = static_cast<double>(st.first_after - st.killed) / 1e6;
    if (st.forgotten_granted != 0)
        out.forgotten_grant_ms = static_cast<double>(st.forgotten_granted - st.killed) / 1e6;
}

asio::awaitable<void> failover_once(corolock::test::sentinel_fleet& fleet, failover_figures& out) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend holder(ex, fleet.url());
    corolock::backend other(ex, fleet.url());
    auto st = std::make_shared<failover_state>();
    for (int t = 0; t < 4; ++t) {
        ++st->busy_left;
        asio::co_spawn(ex, busy_task(corolock::mutex{t % 2 ? other : holder, "busy"}, st),
                       [st](std::exception_ptr) { --st->busy_left; });
    }
    std::exception_ptr failed;
    try {
        co_await failover_steps(fleet, holder, other, st, out);
    } catch (...) {
        failed = std::current_exception();
    }
    // Stopping completes what still waits (client_stopped); then the tasks
    // end within a few of their 20 ms steps.
    st->stop = true;
    for (int i = 0; i < 1000 && st->busy_left > 0; ++i) co_await sleep_for(10ms);
    holder.stop();
    other.stop();
    for (int i = 0; i < 1000 && (st->busy_left > 0 || !st->waiter_done); ++i) co_await sleep_for(10ms);
    if (failed) std::rethrow_exception(failed);
}

void sentinel_failover(int reps) {
    std::vector<double> grant, lost, forgotten;
    for (int r = 0; r < reps; ++r) {
        corolock::test::sentinel_fleet fleet;  // stops its processes by PID
        asio::io_context ioc;
        failover_figures f;
        std::exception_ptr error;
        asio::co_spawn(ioc, failover_once(fleet, f), [&](std::exception_ptr e) { error = e; });
        ioc.run_for(60s);
        if (error) std::rethrow_exception(error);
        const auto n = std::to_string(r + 1);
        put("rep" + n + "_first_grant_ms", f.first_grant_ms);
        put("rep" + n + "_lost_ms", f.lost_ms);
        put("rep" + n + "_forgotten_grant_ms", f.forgotten_grant_ms);
        grant.push_back(f.first_grant_ms);
        lost.push_back(f.lost_ms);
        forgotten.push_back(f.forgotten_grant_ms);
    }
    auto summary = [](const std::string& key, std::vector<double> v) {
        std::erase_if(v, [](double x) { return !std::isfinite(x); });
        put(key + "_n", static_cast<double>(v.size()));
        put(key + "_min", v.empty() ? NAN : *std::min_element(v.begin(), v.end()));
        put(key + "_median", percentile(v, 0.5));
        put(key + "_max", v.empty() ? NAN : *std::max_element(v.begin(), v.end()));
    };
    put("reps", reps);
    summary("first_grant_ms", grant);
    summary("lost_ms", lost);
    summary("forgotten_grant_ms", forgotten);
}

}  // namespace

int main(int argc, char** argv) {
    std::map<std::string, std::string> opt;
    std::vector<std::string> flags;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--cycles" || a == "--handoff" || a == "--fanout" || a == "--worker" ||
            a == "--sentinel") {
            flags.push_back(a.substr(2));
        } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
            opt[a.substr(2)] = argv[++i];
        } else {
            std::cerr << "usage: see the head of bench/topology_bench.cpp\n";
            return 64;
        }
    }
    const auto has = [&](const char* f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
    const auto num = [&](const char* k, double dflt) { return opt.count(k) ? std::stod(opt[k]) : dflt; };
    try {
        if (has("sentinel")) {
            sentinel_failover(static_cast<int>(std::clamp(num("reps", 5), 1.0, 20.0)));
            return 0;
        }
        const double seconds = std::clamp(num("seconds", 2), 0.1, 30.0);
        asio::io_context ioc;
        std::exception_ptr error;
        const auto done = [&](std::exception_ptr e) { error = e; };
        if (opt.count("redlock")) {
            const auto urls = split_urls(opt["redlock"]);
            if (urls.size() < 2) throw std::invalid_argument("--redlock URL,URL,URL[,...]");
            if (has("cycles"))
                asio::co_spawn(ioc, redlock_cycles(urls, seconds, num("redlock-first", 0) != 0), done);
            else if (has("handoff"))
                asio::co_spawn(ioc, redlock_handoff(urls, seconds, opt["data"]), done);
            else if (has("fanout"))
                asio::co_spawn(ioc, redlock_fanout(urls, seconds, num("redlock-first", 0) != 0), done);
            else
                throw std::invalid_argument("--redlock with --cycles, --handoff or --fanout");
            ioc.run_for(std::chrono::seconds(static_cast<int>(seconds) * 2 + 60));
            if (error) std::rethrow_exception(error);
            return 0;
        }
        const std::string url = opt["cluster"];
        if (url.rfind("redis+cluster://", 0) != 0) throw std::invalid_argument("--cluster redis+cluster://...");
        if (has("cycles")) {
            asio::co_spawn(ioc, cluster_cycles(url, seconds, static_cast<std::size_t>(num("coroutines", 64))),
                           done);
        } else if (has("worker")) {
            asio::co_spawn(ioc, handoff_worker(url, opt["lock"], static_cast<int>(num("tasks", 4)),
                                               static_cast<int>(num("task-base", 0)),
                                               std::stoll(opt["start-ns"]), std::stoll(opt["end-ns"])),
                           done);
        } else if (has("handoff")) {
            cluster_handoff(argv[0], url, opt["lock"], seconds, opt["data"]);
            return 0;
        } else {
            throw std::invalid_argument("one of --cycles, --handoff, --sentinel");
        }
        ioc.run_for(std::chrono::seconds(static_cast<int>(seconds) + 60));
        if (error) std::rethrow_exception(error);
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "corolock_bench_topology: " << e.what() << "\n";
        return 1;
    }
}
