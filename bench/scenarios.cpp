// The benchmark scenarios. Each runs in a process of its own (see main.cpp),
// against the throwaway server whose port it is given, and reports metrics.
// Every loop is bounded by a count and by a deadline; every scenario also
// has a hard time limit enforced from outside (alarm() and the orchestrator).
#include "bench.hpp"
#include "handoff.hpp"
#include "process.hpp"

#include <corolock/corolock.hpp>
#include "redis/lock/lock_service.hpp"
#include "redis/lock/scripts.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <thread>

namespace bench {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error_code;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

double to_us(clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
double to_s(clock::duration d) { return std::chrono::duration<double>(d).count(); }

corolock::config make_config(const options& o) { return local_redis_config(o); }

// A per-run prefix, so that "fresh" lock names are fresh even when the
// server was not flushed between runs.
std::string run_id() {
    return std::to_string(::getpid()) + "-" + std::to_string(mono_ns() % 1'000'000'000);
}

asio::awaitable<void> sleep_for(clock::duration d) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    t.expires_after(d);
    co_await t.async_wait(use_nothrow);
}

// Runs one command and throws on any failure: these are set-up and probe
// commands, not measured ones.
asio::awaitable<corolock::reply> exec(corolock::client& c, corolock::command cmd) {
    const std::string what = cmd.name();
    auto [ec, r] = co_await c.async_exec(std::move(cmd), use_nothrow);
    if (ec) throw boost::system::system_error(ec, what);
    co_return r;
}

// Counts down from n; wait() returns when it reaches zero or at the deadline.
// The timer is a condition variable: count_down() cancels it.
class latch {
public:
    latch(const asio::any_io_executor& ex, std::size_t n)
        : left_(n), timer_(ex, clock::time_point::max()) {}
    void count_down() {
        if (left_ > 0 && --left_ == 0) timer_.cancel();
    }
    std::size_t left() const noexcept { return left_; }
    asio::awaitable<bool> wait(clock::time_point deadline) {
        // Each pass ends at the deadline at the latest.
        while (left_ > 0 && clock::now() < deadline) {
            timer_.expires_at(deadline);
            co_await timer_.async_wait(use_nothrow);
        }
        co_return left_ == 0;
    }

private:
    std::size_t left_;
    asio::steady_timer timer_;
};

// For a wait that ran out of time. Coroutines still running hold references
// into the caller's frame, so it must not return before they end: stopping
// the client completes all their operations at once (client_stopped) and
// they finish. If even that fails, the scenario process ends here; it is a
// process of its own for exactly this kind of reason.
asio::awaitable<void> bail_out(corolock::client& c, latch& l, const std::string& what) {
    c.stop();
    co_await l.wait(clock::now() + 10s);
    if (l.left() > 0) {
        std::printf("error\t%s\n", json_quote(what + " did not finish, even after stop()").c_str());
        std::fflush(stdout);
        std::_Exit(2);
    }
    throw std::runtime_error(what + " did not finish in time");
}

// ---------------------------------------------------------------------------
// Uncontended cycles: S1, S2 and the coroutine sweep.

struct cycle_result {
    std::uint64_t cycles = 0;
    std::uint64_t errors = 0;
    std::string first_error;
    std::vector<double> cycle_us;
};

// What a cycle acquires: a mutex, or one permit of a semaphore of
// `capacity`, on a fresh name each cycle or (one_name) on the prefix itself.
struct cycle_kind {
    std::uint32_t capacity = 0;  // 0: a mutex
    bool one_name = false;
};

// The second half of a cycle begun at t0: the acquire's outcome, then the
// release, counted into `out`. False on an error (the first one is kept).
asio::awaitable<bool> end_cycle(corolock::error_code ec, corolock::guard& g,
                                clock::time_point t0, cycle_result& out) {
    if (ec) {
        if (out.errors++ == 0) out.first_error = "acquire: " + ec.message();
        co_return false;
    }
    auto [rec] = co_await g.async_release(use_nothrow);
    if (rec) {
        if (out.errors++ == 0) out.first_error = "release: " + rec.message();
        co_return false;
    }
    out.cycle_us.push_back(to_us(clock::now() - t0));
    ++out.cycles;
    co_return true;
}

// acquire + release on a fresh name each cycle; the handle is made inside
// the cycle because a fresh name needs a fresh handle.
asio::awaitable<void> cycle_loop(corolock::client& c, std::string prefix, clock::time_point end,
                                 std::uint64_t max_cycles, cycle_result& out,
                                 cycle_kind kind = {}) {
    corolock::lock_options opts;
    opts.lease = 30s;
    opts.wait = 10s;  // fresh names are never held; this only bounds a fault
    std::optional<corolock::semaphore> shared;
    if (kind.one_name) shared.emplace(c, prefix, kind.capacity);
    for (std::uint64_t i = 0; i < max_cycles && clock::now() < end; ++i) {
        const auto t0 = clock::now();
        corolock::error_code ec;
        corolock::guard g;
        if (shared) {
            std::tie(ec, g) = co_await shared->async_acquire(1, opts, use_nothrow);
        } else if (kind.capacity > 0) {
            corolock::semaphore sem{c, prefix + std::to_string(i), kind.capacity};
            std::tie(ec, g) = co_await sem.async_acquire(1, opts, use_nothrow);
        } else {
            corolock::mutex m{c, prefix + std::to_string(i)};
            std::tie(ec, g) = co_await m.async_acquire(opts, use_nothrow);
        }
        const bool ok = co_await end_cycle(ec, g, t0, out);
        if (!ok) co_return;
    }
}

struct concurrent_result {
    std::uint64_t cycles = 0;
    std::uint64_t errors = 0;
    std::string first_error;
    double seconds = 0;
    summary cycle;
    corolock::client_stats before, after;
    double cpu_s = 0;
};

// The coroutines' cycles, errors and cycle times, summed into `out`.
void add_results(concurrent_result& out, std::vector<cycle_result>& results) {
    std::vector<double> all_us;
    for (auto& r : results) {
        out.cycles += r.cycles;
        out.errors += r.errors;
        if (out.first_error.empty()) out.first_error = r.first_error;
        all_us.insert(all_us.end(), r.cycle_us.begin(), r.cycle_us.end());
    }
    out.cycle = summarize(std::move(all_us));
}

// n coroutines on one client, each cycling on its own fresh names for `run`.
asio::awaitable<concurrent_result> run_concurrent(corolock::client& c, std::size_t n,
                                                  clock::duration run, std::string prefix,
                                                  cycle_kind kind = {}) {
    auto ex = co_await asio::this_coro::executor;
    std::vector<cycle_result> results(n);
    latch done(ex, n);
    concurrent_result out;
    out.before = c.stats();
    const double cpu0 = cpu_seconds();
    const auto start = clock::now();
    const auto end = start + run;
    for (std::size_t i = 0; i < n; ++i) {
        asio::co_spawn(ex,
                       cycle_loop(c, kind.one_name ? prefix : prefix + std::to_string(i) + ":",
                                  end, 10'000'000, results[i], kind),
                       [&done](std::exception_ptr) { done.count_down(); });
    }
    // Each coroutine finishes the cycle it is in after `end`; allow for a
    // command timeout on top before giving up on them.
    if (!co_await done.wait(end + 15s)) co_await bail_out(c, done, "cycling coroutines");
    out.seconds = to_s(clock::now() - start);
    out.cpu_s = cpu_seconds() - cpu0;
    out.after = c.stats();
    add_results(out, results);
    co_return out;
}

void report_concurrent(metrics& m, const concurrent_result& r) {
    m.count("cycles", r.cycles);
    m.number("seconds", r.seconds);
    m.number("cycles_per_s", static_cast<double>(r.cycles) / r.seconds);
    add_summary(m, "cycle", r.cycle);
    const auto cmds = r.after.commands_sent - r.before.commands_sent;
    const auto writes = r.after.writes - r.before.writes;
    const double cycles = std::max<double>(1, static_cast<double>(r.cycles));
    m.number("commands_per_cycle", static_cast<double>(cmds) / cycles);
    m.number("commands_per_write", writes ? static_cast<double>(cmds) / static_cast<double>(writes) : 0);
    m.number("client_cpu_us_per_cycle", r.cpu_s * 1e6 / cycles);
    m.number("client_cpu_per_wall_s", r.cpu_s / r.seconds);
    m.count("errors", r.errors);
    if (!r.first_error.empty()) m.text("first_error", r.first_error);
}

// A short burst that loads the scripts (the first EVALSHA of a fresh server
// gets NOSCRIPT and falls back to EVAL) and warms the allocator.
asio::awaitable<void> warm_up(corolock::client& c, std::size_t cycles) {
    cycle_result r;
    co_await cycle_loop(c, "bench:warm:" + run_id() + ":", clock::now() + 10s, cycles, r);
    if (r.errors) throw std::runtime_error("warm-up failed: " + r.first_error);
}

// S1 and S2: `coroutines` acquire+release cycles on fresh names, one client.
asio::awaitable<void> uncontended(const options& o, metrics& m, std::size_t coroutines,
                                  const char* prefix) {
    corolock::client c{co_await asio::this_coro::executor, make_config(o)};
    co_await warm_up(c, 200);
    const auto run = o.seconds > 0 ? std::chrono::duration_cast<clock::duration>(
                                         std::chrono::duration<double>(o.seconds))
                                   : pick<clock::duration>(o, 5s, 2s, 300ms);
    auto r = co_await run_concurrent(c, coroutines, run, prefix + run_id() + ":");
    c.stop();
    m.count("coroutines", coroutines);
    m.number("lease_s", 30);
    report_concurrent(m, r);
}

asio::awaitable<void> scenario_s1(const options& o, metrics& m) {
    co_await uncontended(o, m, 1, "bench:s1:");
}

asio::awaitable<void> scenario_s2(const options& o, metrics& m) {
    co_await uncontended(o, m, 64, "bench:s2:");
}

asio::awaitable<void> scenario_sweep(const options& o, metrics& m) {
    corolock::client c{co_await asio::this_coro::executor, make_config(o)};
    co_await warm_up(c, 200);
    const std::vector<std::size_t> counts{1, 4, 16, 64, 256};
    const auto each = pick<clock::duration>(o, 2s, 1s, 100ms);
    const auto id = run_id();
    std::vector<double> xs, ys;
    std::uint64_t errors = 0;
    for (const auto n : counts) {
        // Every fresh-name cycle leaves its fence counter behind; without
        // this, each step would run against the keys of all steps before it.
        if (o.flush) co_await exec(c, corolock::command{"FLUSHALL"});
        auto r = co_await run_concurrent(c, n, each, "bench:sweep:" + id + ":" + std::to_string(n) + ":");
        const double cps = static_cast<double>(r.cycles) / r.seconds;
        const std::string p = "c" + std::to_string(n);
        m.number(p + "_cycles_per_s", cps);
        m.number(p + "_cycle_p50_us", r.cycle.p50);
        m.number(p + "_cycle_p99_us", r.cycle.p99);
        const auto cmds = r.after.commands_sent - r.before.commands_sent;
        const auto writes = r.after.writes - r.before.writes;
        m.number(p + "_commands_per_write",
                 writes ? static_cast<double>(cmds) / static_cast<double>(writes) : 0);
        xs.push_back(static_cast<double>(n));
        ys.push_back(cps);
        errors += r.errors;
    }
    c.stop();
    m.list("coroutines", xs);
    m.list("cycles_per_s", ys);
    m.count("errors", errors);
    if (!o.data_dir.empty()) {
        std::ofstream out(o.data_dir + "/cycles_vs_coroutines.dat");
        out << "# coroutines cycles_per_s (acquire+release on fresh names, one client)\n";
        for (std::size_t i = 0; i < xs.size(); ++i) out << xs[i] << " " << ys[i] << "\n";
    }
}

// SEM: semaphore grants against mutex acquisitions, in the same run: 64
// coroutines on one client cycle acquire + release, in alternating rounds
// (mutex, semaphore of 64 on fresh names, semaphore of 64 on one name, ...)
// so that a drift of the machine weighs on every kind alike. The target
// compares the fresh-name rates (the same pattern as S2); the one-name rate
// shows what 64 live grants on one name cost (no script reads them all).
asio::awaitable<void> scenario_sem(const options& o, metrics& m) {
    corolock::client c{co_await asio::this_coro::executor, make_config(o)};
    co_await warm_up(c, 200);
    const auto each = pick<clock::duration>(o, 1s, 500ms, 100ms);
    const int rounds = pick<int>(o, 6, 3, 1);
    const auto id = run_id();
    const std::vector<std::pair<std::string, cycle_kind>> kinds = {
        {"mutex", {}}, {"sem_fresh", {64, false}}, {"sem_one", {64, true}}};
    std::map<std::string, std::pair<std::uint64_t, double>> totals;  // cycles, seconds
    std::map<std::string, std::vector<double>> rates;
    std::uint64_t errors = 0;
    std::string first_error;
    for (int round = 0; round < rounds; ++round) {
        for (const auto& [name, kind] : kinds) {
            if (o.flush) co_await exec(c, corolock::command{"FLUSHALL"});
            auto r = co_await run_concurrent(
                c, 64, each, "bench:sem:" + id + ":" + name + std::to_string(round) + ":", kind);
            totals[name].first += r.cycles;
            totals[name].second += r.seconds;
            rates[name].push_back(static_cast<double>(r.cycles) / r.seconds);
            errors += r.errors;
            if (first_error.empty()) first_error = r.first_error;
        }
    }
    c.stop();
    for (const auto& [name, t] : totals)
        m.number(name + "_cycles_per_s", static_cast<double>(t.first) / t.second);
    // Per round: semaphore rate / the mutex rate of the same round.
    std::vector<double> fresh, one;
    for (std::size_t i = 0; i < rates["mutex"].size(); ++i) {
        fresh.push_back(rates["sem_fresh"][i] / rates["mutex"][i]);
        one.push_back(rates["sem_one"][i] / rates["mutex"][i]);
    }
    m.list("ratio_fresh_rounds", fresh);
    m.number("ratio_fresh_median", summarize(fresh).p50);
    m.number("ratio_one_name_median", summarize(one).p50);
    m.count("rounds", static_cast<std::uint64_t>(rounds));
    m.count("errors", errors);
    if (!first_error.empty()) m.text("first_error", first_error);
}

// RW: a read-heavy shared mutex: 64 coroutines on one client, each with its
// own handle on one name, cycle acquire + release; one cycle in
// `write_every` is a writer's (0: readers only). The target compares the
// scripts' rate (2 per cycle) with the server's EVALSHA rate, as S2 does.
asio::awaitable<concurrent_result> run_rw(corolock::client& c, std::string name,
                                          clock::duration run, int write_every) {
    auto ex = co_await asio::this_coro::executor;
    constexpr std::size_t n = 64;
    std::vector<cycle_result> results(n);
    latch done(ex, n);
    concurrent_result out;
    out.before = c.stats();
    const double cpu0 = cpu_seconds();
    const auto start = clock::now();
    const auto end = start + run;
    auto loop = [&](std::size_t k, cycle_result& r) -> asio::awaitable<void> {
        corolock::shared_mutex m{c, name};
        const corolock::lock_options opts{.lease = 30s, .wait = 10s};
        for (std::uint64_t i = 0; i < 10'000'000 && clock::now() < end; ++i) {
            const auto t0 = clock::now();
            corolock::error_code ec;
            corolock::guard g;
            if (write_every > 0 && (i + k) % static_cast<std::uint64_t>(write_every) == 0)
                std::tie(ec, g) = co_await m.async_acquire(opts, use_nothrow);
            else
                std::tie(ec, g) = co_await m.async_acquire_shared(opts, use_nothrow);
            const bool ok = co_await end_cycle(ec, g, t0, r);
            if (!ok) co_return;
        }
    };
    for (std::size_t i = 0; i < n; ++i)
        asio::co_spawn(ex, loop(i, results[i]), [&done](std::exception_ptr) { done.count_down(); });
    if (!co_await done.wait(end + 15s)) co_await bail_out(c, done, "shared mutex coroutines");
    out.seconds = to_s(clock::now() - start);
    out.cpu_s = cpu_seconds() - cpu0;
    out.after = c.stats();
    add_results(out, results);
    co_return out;
}

asio::awaitable<void> scenario_rw(const options& o, metrics& m) {
    corolock::client c{co_await asio::this_coro::executor, make_config(o)};
    co_await warm_up(c, 200);
    const auto run = o.seconds > 0 ? std::chrono::duration_cast<clock::duration>(
                                         std::chrono::duration<double>(o.seconds))
                                   : pick<clock::duration>(o, 3s, 1s, 200ms);
    const auto id = run_id();
    auto readers = co_await run_rw(c, "bench:rw:" + id + ":read", run, 0);
    auto mixed = co_await run_rw(c, "bench:rw:" + id + ":mixed", run, 32);
    c.stop();
    m.count("coroutines", 64);
    m.number("read_only_cycles_per_s", static_cast<double>(readers.cycles) / readers.seconds);
    add_summary(m, "read_only_cycle", readers.cycle);
    m.number("write_every", 32);
    report_concurrent(m, mixed);  // cycles_per_s: the read-heavy mix
    m.count("read_only_errors", readers.errors);
    if (!readers.first_error.empty()) m.text("read_only_first_error", readers.first_error);
}

// ---------------------------------------------------------------------------
// Round-trip floors: PING over the corolock client and over a raw socket.

asio::awaitable<void> scenario_ping(const options& o, metrics& m) {
    auto ex = co_await asio::this_coro::executor;
    const auto run = pick<clock::duration>(o, 2s, 1s, 100ms);
    {
        // A raw, blocking socket: the floor with no client library at all,
        // measured the same way as the corolock client below.
        asio::ip::tcp::socket s(ex);
        s.connect({asio::ip::make_address("127.0.0.1"), o.port});
        s.set_option(asio::ip::tcp::no_delay(true));
        static constexpr std::string_view ping = "*1\r\n$4\r\nPING\r\n";
        char buf[7];  // "+PONG\r\n": the connection stays in RESP2
        std::vector<double> us;
        const double cpu0 = cpu_seconds();
        const auto end = clock::now() + run;
        for (int i = 0; i < 10'000'000 && clock::now() < end; ++i) {
            const auto t0 = clock::now();
            asio::write(s, asio::buffer(ping));
            asio::read(s, asio::buffer(buf));
            us.push_back(to_us(clock::now() - t0));
        }
        const auto n = us.size();
        m.number("raw_cpu_us_per_op", (cpu_seconds() - cpu0) * 1e6 / static_cast<double>(n));
        const auto sum = summarize(std::move(us));
        m.number("raw_ops_per_s", static_cast<double>(n) / to_s(run));
        add_summary(m, "raw_ping", sum);
    }
    corolock::client c{ex, make_config(o)};
    std::vector<double> us;
    corolock::command hello{"PING"};
    co_await exec(c, std::move(hello));  // connected before the clock starts
    const double cpu0 = cpu_seconds();
    const auto end = clock::now() + run;
    for (int i = 0; i < 10'000'000 && clock::now() < end; ++i) {
        const auto t0 = clock::now();
        corolock::command ping{"PING"};
        co_await exec(c, std::move(ping));
        us.push_back(to_us(clock::now() - t0));
    }
    const double cpu = cpu_seconds() - cpu0;
    c.stop();
    const auto n = us.size();
    m.number("client_cpu_us_per_op", cpu * 1e6 / static_cast<double>(n));
    const auto sum = summarize(std::move(us));
    m.number("client_ops_per_s", static_cast<double>(n) / to_s(run));
    add_summary(m, "client_ping", sum);
}

// ---------------------------------------------------------------------------
// S3: contended handoff between processes.

struct s3_event {
    std::uint64_t token;
    int task;
    std::int64_t acquired_ns;  // when acquire returned
    std::int64_t release_ns;   // when release was called
};

asio::awaitable<void> s3_task(corolock::client& c, const worker_args& w, int task,
                              std::vector<s3_event>& events, std::string& error) {
    corolock::mutex m{c, w.name};  // its own handle: a distinct owner
    corolock::lock_options opts;
    opts.lease = 10s;
    opts.wait = 5s;  // eight contenders pass the lock in well under a second
    for (int i = 0; i < 1'000'000 && (i < min_rounds || mono_ns() < w.end_ns); ++i) {
        auto [ec, g] = co_await m.async_acquire(opts, use_nothrow);
        const auto acquired = mono_ns();
        if (ec) {
            error = "acquire: " + ec.message();
            co_return;
        }
        // The critical section: a deliberately non-atomic increment, so a
        // broken lock would show as a counter short of the acquisitions.
        corolock::command get{"GET", w.counter_key};
        auto [gec, r] = co_await c.async_exec(std::move(get), use_nothrow);
        if (gec) {
            error = "GET: " + gec.message();
            co_return;
        }
        const long long value = r.is_null() ? 0 : std::stoll(r.str);
        corolock::command set{"SET", w.counter_key, value + 1};
        auto [sec, sr] = co_await c.async_exec(std::move(set), use_nothrow);
        if (sec) {
            error = "SET: " + sec.message();
            co_return;
        }
        const auto token = g.token();
        const auto released = mono_ns();
        auto [rec] = co_await g.async_release(use_nothrow);
        if (rec) {
            error = "release: " + rec.message();
            co_return;
        }
        events.push_back({token, task, acquired, released});
    }
}

asio::awaitable<void> worker_main(const options& o, const worker_args& w, int& status) {
    auto ex = co_await asio::this_coro::executor;
    corolock::client c{ex, make_config(o)};
    corolock::command ping{"PING"};
    co_await exec(c, std::move(ping));  // connected before the start line
    if (const auto wait = w.start_ns - mono_ns(); wait > 0)
        co_await sleep_for(std::chrono::nanoseconds(wait));
    std::vector<std::vector<s3_event>> events(static_cast<std::size_t>(w.tasks));
    std::vector<std::string> errors(static_cast<std::size_t>(w.tasks));
    latch done(ex, static_cast<std::size_t>(w.tasks));
    for (int t = 0; t < w.tasks; ++t) {
        const auto i = static_cast<std::size_t>(t);
        asio::co_spawn(ex, s3_task(c, w, w.task_base + t, events[i], errors[i]),
                       [&done](std::exception_ptr) { done.count_down(); });
    }
    const auto end = clock::now() + std::chrono::nanoseconds(std::max<std::int64_t>(0, w.end_ns - mono_ns()));
    if (!co_await done.wait(end + 20s)) co_await bail_out(c, done, "S3 tasks");
    c.stop();
    // Printed after the run, so that writing them never competes with it.
    std::string out;
    for (const auto& list : events)
        for (const auto& e : list)
            out += "acq " + std::to_string(e.token) + " " + std::to_string(e.task) + " " +
                   std::to_string(e.acquired_ns) + " " + std::to_string(e.release_ns) + "\n";
    for (const auto& e : errors)
        if (!e.empty()) out += "error " + e + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    status = 0;
}

asio::awaitable<void> scenario_s3(const options& o, metrics& m) {
    constexpr int processes = 2;
    constexpr int tasks_per_process = 4;
    const auto run = pick<std::int64_t>(o, 5'000'000'000, 2'000'000'000, 300'000'000);
    const auto id = run_id();
    worker_args w;
    w.name = "bench:s3:" + id;
    w.counter_key = "bench:s3:" + id + ":counter";
    w.tasks = tasks_per_process;
    // Both workers start together, once connected: half a second is ample
    // for exec and connect on an idle machine.
    w.start_ns = mono_ns() + 500'000'000;
    w.end_ns = w.start_ns + run;

    std::vector<child> workers;
    for (int p = 0; p < processes; ++p) {
        workers.push_back(spawn_child({o.self_exe, "--port", std::to_string(o.port), "--mode",
                                       std::string(to_string(o.mode)), "--worker", "s3", "--lock",
                                       w.name, "--counter", w.counter_key, "--task-base",
                                       std::to_string(p * tasks_per_process), "--tasks",
                                       std::to_string(tasks_per_process), "--start-ns",
                                       std::to_string(w.start_ns), "--end-ns",
                                       std::to_string(w.end_ns)}));
    }
    // Blocking here is fine: this process has nothing else to do meanwhile.
    std::vector<child*> ptrs;
    for (auto& c : workers) ptrs.push_back(&c);
    collect_children(ptrs, clock::now() + std::chrono::nanoseconds(run) + 40s);

    std::vector<s3_event> events;
    std::string errors;
    for (auto& c : workers) {
        if (c.exit_status != 0) errors += "worker exit status " + std::to_string(c.exit_status) + "; ";
        std::istringstream in(c.out);
        for (std::string line; std::getline(in, line);) {
            std::istringstream ls(line);
            std::string kind;
            ls >> kind;
            if (kind == "acq") {
                s3_event e{};
                ls >> e.token >> e.task >> e.acquired_ns >> e.release_ns;
                events.push_back(e);
            } else if (kind == "error") {
                errors += line.substr(6) + "; ";
            }
        }
    }
    std::sort(events.begin(), events.end(),
              [](const s3_event& a, const s3_event& b) { return a.token < b.token; });

    // Handoff: from one holder's release call to the next holder's acquire
    // return, pairing neighbours in token order (tokens rise strictly with
    // each acquisition, following the server's clock rather than by one, so
    // the next larger token is the next holder). A pair whose acquisitions
    // are not in token order would be a broken token: counted as a gap.
    std::vector<double> handoff_us, cross_us, same_us;
    std::uint64_t gaps = 0, overlaps = 0;
    for (std::size_t i = 1; i < events.size(); ++i) {
        const auto& prev = events[i - 1];
        const auto& next = events[i];
        if (next.acquired_ns < prev.acquired_ns) {
            ++gaps;
            continue;
        }
        const double us = static_cast<double>(next.acquired_ns - prev.release_ns) / 1e3;
        if (us < 0) ++overlaps;  // a holder returned before the previous one let go
        handoff_us.push_back(us);
        const bool same_process = next.task / tasks_per_process == prev.task / tasks_per_process;
        (same_process ? same_us : cross_us).push_back(us);
    }

    std::vector<double> per_task(processes * tasks_per_process, 0.0);
    for (const auto& e : events)
        if (e.task >= 0 && static_cast<std::size_t>(e.task) < per_task.size())
            per_task[static_cast<std::size_t>(e.task)] += 1;
    const double mean_share = static_cast<double>(events.size()) / static_cast<double>(per_task.size());
    const double min_share =
        mean_share > 0 ? *std::min_element(per_task.begin(), per_task.end()) / mean_share : 0;

    // The counter must equal the acquisitions: no lost update.
    corolock::client c{co_await asio::this_coro::executor, make_config(o)};
    corolock::command get{"GET", w.counter_key};
    auto r = co_await exec(c, std::move(get));
    c.stop();
    const long long counter = r.is_null() ? 0 : std::stoll(r.str);

    double seconds = 0;
    if (!events.empty()) {
        std::int64_t first = events.front().acquired_ns, last = events.front().release_ns;
        for (const auto& e : events) {
            first = std::min(first, e.acquired_ns);
            last = std::max(last, e.release_ns);
        }
        seconds = static_cast<double>(last - first) / 1e9;
    }

    m.count("processes", processes);
    m.count("coroutines_per_process", tasks_per_process);
    m.count("acquisitions", events.size());
    m.number("seconds", seconds);
    m.number("acquisitions_per_s", seconds > 0 ? static_cast<double>(events.size()) / seconds : 0);
    add_summary(m, "handoff", summarize(handoff_us));
    add_summary(m, "handoff_cross_process", summarize(cross_us));
    add_summary(m, "handoff_same_process", summarize(same_us));
    m.list("acquisitions_per_task", per_task);
    m.number("min_share_of_mean", min_share);
    m.count("counter", static_cast<std::uint64_t>(counter));
    m.flag("counter_ok", counter == static_cast<long long>(events.size()) && !events.empty());
    m.count("token_gaps", gaps);
    m.count("overlaps", overlaps);
    if (!errors.empty()) m.text("errors", errors);

    if (!o.data_dir.empty() && !handoff_us.empty()) {
        std::sort(handoff_us.begin(), handoff_us.end());
        std::ofstream out(o.data_dir + "/handoff_cdf.dat");
        out << "# handoff_us cumulative_fraction (S3: 2 processes x 4 coroutines, one lock)\n";
        // At most ~2000 points: enough for a smooth curve, small enough to plot.
        const std::size_t step = std::max<std::size_t>(1, handoff_us.size() / 2000);
        for (std::size_t i = 0; i < handoff_us.size(); i += step)
            out << handoff_us[i] << " " << static_cast<double>(i + 1) / static_cast<double>(handoff_us.size()) << "\n";
        out << handoff_us.back() << " 1\n";
    }
}

// ---------------------------------------------------------------------------
// S4: ten thousand waiters on one name.

// Each command's calls under its name, and the server's time in it (µs,
// inner commands of a script included) under "<name>:usec".
std::map<std::string, std::uint64_t> parse_commandstats(const std::string& text) {
    // Lines look like "cmdstat_evalsha:calls=12,usec=34,...".
    std::map<std::string, std::uint64_t> calls;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("cmdstat_", 0) != 0) continue;
        const auto colon = line.find(':');
        const auto at = line.find("calls=");
        if (colon == std::string::npos || at == std::string::npos) continue;
        const auto name = line.substr(8, colon - 8);
        calls[name] = std::stoull(line.substr(at + 6));
        const auto usec = line.find("usec=");
        if (usec != std::string::npos) calls[name + ":usec"] = std::stoull(line.substr(usec + 5));
    }
    return calls;
}

asio::awaitable<std::map<std::string, std::uint64_t>> commandstats(corolock::client& probe) {
    corolock::command info{"INFO", "commandstats"};
    auto r = co_await exec(probe, std::move(info));
    co_return parse_commandstats(r.str);
}

std::uint64_t delta(const std::map<std::string, std::uint64_t>& a,
                    const std::map<std::string, std::uint64_t>& b, const std::string& cmd) {
    const auto ia = a.find(cmd);
    const auto ib = b.find(cmd);
    const std::uint64_t va = ia == a.end() ? 0 : ia->second;
    const std::uint64_t vb = ib == b.end() ? 0 : ib->second;
    return vb - va;
}

// The commands a client sends itself; everything else in commandstats was
// run by the scripts (or is the probe's own INFO).
const std::vector<std::string> top_level = {"evalsha", "eval", "subscribe", "unsubscribe", "ping",
                                            "hello"};

std::uint64_t top_level_delta(const std::map<std::string, std::uint64_t>& a,
                              const std::map<std::string, std::uint64_t>& b) {
    std::uint64_t n = 0;
    for (const auto& cmd : top_level) n += delta(a, b, cmd);
    return n;
}

std::uint64_t script_delta(const std::map<std::string, std::uint64_t>& a,
                           const std::map<std::string, std::uint64_t>& b) {
    std::uint64_t n = 0;
    for (const auto& [cmd, calls] : b) {
        if (cmd == "info" || cmd.find(':') != std::string::npos ||
            std::find(top_level.begin(), top_level.end(), cmd) != top_level.end())
            continue;
        n += delta(a, b, cmd);
    }
    return n;
}

// Reads a lock-service figure on the client's strand, where it lives.
template <class F>
asio::awaitable<std::size_t> on_strand(corolock::client& c, F f) {
    std::size_t value = 0;
    bool ready = false;
    asio::post(c.impl()->strand(), [&] {
        value = f(*corolock::detail::lock_service::of(*c.impl()));
        ready = true;
    });
    for (int i = 0; i < 1000 && !ready; ++i) co_await sleep_for(1ms);
    if (!ready) throw std::runtime_error("the client's strand did not answer");
    co_return value;
}

struct s4_event {
    std::uint64_t token = 0;
    std::int64_t acquired_ns = 0;
    std::int64_t release_ns = 0;
};

asio::awaitable<void> s4_waiter(corolock::client& c, const std::string& name, s4_event& ev,
                                std::uint64_t& errors) {
    corolock::mutex m{c, name};
    corolock::lock_options opts;
    opts.lease = 30s;
    opts.wait = 120s;  // the whole queue passes in seconds; this bounds a fault
    auto [ec, g] = co_await m.async_acquire(opts, asio::as_tuple(asio::deferred));
    ev.acquired_ns = mono_ns();
    if (ec) {
        ++errors;
        co_return;
    }
    ev.token = g.token();
    ev.release_ns = mono_ns();
    auto [rec] = co_await g.async_release(use_nothrow);
    if (rec) ++errors;
}

// How many waiters, or acquires, are started before waiting for them: all
// at once (a burst), or in waves as an application that admits work
// gradually would. The transient memory of a burst (every first attempt in
// flight together) stays in malloc's heap afterwards, so the two give
// different RSS figures; both are reported.
struct arrival {
    std::size_t wave;
    bool burst;
};

asio::awaitable<void> s4_body(const options& o, metrics& m, arrival how) {
    auto ex = co_await asio::this_coro::executor;
    const std::size_t waiters = pick<std::size_t>(o, 10'000, 10'000, 200);
    const std::size_t wave = std::min(how.burst ? waiters : how.wave, waiters);
    const std::string name = "bench:s4:" + run_id();
    const std::string channel(corolock::detail::keys_for(name).channel());
    corolock::client c{ex, make_config(o)};
    corolock::client probe{ex, make_config(o)};  // INFO and PUBSUB on a connection of their own
    co_await warm_up(c, 200);

    corolock::mutex holder{c, name};
    corolock::lock_options hold_opts;
    hold_opts.lease = 30s;
    auto first = co_await holder.acquire(hold_opts);

    const auto stats_a = co_await commandstats(probe);
    const auto sent_a = c.stats();
    const auto rss_a = rss_bytes();
    const auto alloc_a = alloc_now();

    std::vector<s4_event> events(waiters);
    std::uint64_t errors = 0;
    latch done(ex, waiters);
    // Every waiter has tried, subscribed and tried again when the lock
    // service counts it as waiting and nothing is left in the queue.
    auto count_waiters = [](corolock::detail::lock_service& s) { return s.waiters().total_waiters(); };
    const auto setup_deadline = clock::now() + 60s;
    std::size_t started = 0, waiting = 0;
    while (started < waiters && clock::now() < setup_deadline) {
        const auto until = std::min(waiters, started + wave);
        for (; started < until; ++started)
            asio::co_spawn(ex, s4_waiter(c, name, events[started], errors),
                           [&done](std::exception_ptr) { done.count_down(); });
        while (clock::now() < setup_deadline) {
            waiting = co_await on_strand(c, count_waiters);
            if (waiting == started && c.stats().queued == 0) break;
            co_await sleep_for(5ms);
        }
    }
    if (waiting != waiters)
        co_await bail_out(c, done, "S4 set-up (" + std::to_string(waiting) + " waiters registered)");
    const auto rss_b = rss_bytes();
    const auto alloc_b = alloc_now();
    const double n = static_cast<double>(waiters);
    m.count("waiters", waiters);
    m.count("arrival_wave", wave);
    m.number("rss_per_waiter_bytes", (static_cast<double>(rss_b) - static_cast<double>(rss_a)) / n);
    m.number("live_heap_per_waiter_bytes",
             static_cast<double>(alloc_b.live_bytes - alloc_a.live_bytes) / n);
    m.number("allocations_per_waiter_setup", static_cast<double>(alloc_b.calls - alloc_a.calls) / n);
    m.number("client_commands_per_waiter_setup",
             static_cast<double>(c.stats().commands_sent - sent_a.commands_sent) / n);
    if (how.burst) {
        // Memory only: stopping the client ends every wait at once.
        c.stop();
        probe.stop();
        const bool ended = co_await done.wait(clock::now() + 10s);
        if (!ended) co_await bail_out(c, done, "S4 waiters after stop()");
        co_return;
    }

    corolock::command numsub{"PUBSUB", "NUMSUB", channel};
    auto numsub_reply = co_await exec(probe, std::move(numsub));
    const auto subscribers =
        numsub_reply.elements.size() == 2 ? numsub_reply.elements[1].integer : -1;
    const auto stats_b = co_await commandstats(probe);
    const auto sent_b = c.stats();

    // The holder lets go; the lock then passes through every waiter, each
    // releasing it at once.
    const auto t0 = clock::now();
    const auto first_release_ns = mono_ns();
    co_await first.release();
    if (!co_await done.wait(clock::now() + pick<clock::duration>(o, 120s, 120s, 30s)))
        co_await bail_out(c, done, "S4 waiters");
    const auto seconds = to_s(clock::now() - t0);
    // The last waiter's UNSUBSCRIBE is sent after its release returns.
    co_await sleep_for(50ms);
    const auto stats_c = co_await commandstats(probe);
    const auto sent_c = c.stats();
    c.stop();
    probe.stop();

    std::sort(events.begin(), events.end(),
              [](const s4_event& a, const s4_event& b) { return a.token < b.token; });
    std::vector<double> handoff_us;
    std::int64_t prev_release = first_release_ns;
    for (const auto& e : events) {
        if (e.token == 0) continue;
        handoff_us.push_back(static_cast<double>(e.acquired_ns - prev_release) / 1e3);
        prev_release = e.release_ns;
    }

    m.flag("all_acquired", errors == 0);
    m.count("errors", errors);
    m.number("seconds", seconds);
    m.number("handoffs_per_s", n / seconds);
    add_summary(m, "handoff", summarize(handoff_us));
    m.count("subscribe_commands", delta(stats_a, stats_c, "subscribe"));
    m.count("unsubscribe_commands", delta(stats_a, stats_c, "unsubscribe"));
    m.count("subscribers_while_waiting", static_cast<std::uint64_t>(std::max<std::int64_t>(0, subscribers)));
    m.number("client_commands_per_handoff",
             static_cast<double>(sent_c.commands_sent - sent_b.commands_sent) / n);
    m.number("server_commands_per_handoff", static_cast<double>(top_level_delta(stats_b, stats_c)) / n);
    m.number("script_inner_commands_per_handoff", static_cast<double>(script_delta(stats_b, stats_c)) / n);
}

asio::awaitable<void> scenario_s4(const options& o, metrics& m) {
    const arrival how{500, false};  // named: g++ 12 mishandles braced temporaries in co_await
    co_await s4_body(o, m, how);
}
asio::awaitable<void> scenario_s4_burst(const options& o, metrics& m) {
    const arrival how{0, true};  // named: g++ 12 mishandles braced temporaries in co_await
    co_await s4_body(o, m, how);
}

// ---------------------------------------------------------------------------
// S5: ten thousand locks held at once, renewed by the watchdog.

// Acquires every handle, at most `window` at a time; each completion starts
// the next. Callbacks, not coroutines: a held lock should cost only what the
// library keeps for it.
struct acquire_all {
    std::vector<corolock::mutex>& handles;
    std::vector<corolock::guard>& guards;
    corolock::lock_options opts;
    latch& done;
    std::size_t next = 0;
    std::uint64_t errors = 0;
    std::string first_error;

    void start_one() {
        if (next >= handles.size()) return;
        const auto i = next++;
        handles[i].async_acquire(opts, [this, i](error_code ec, corolock::guard g) {
            if (ec) {
                if (errors++ == 0) first_error = ec.message();
            } else {
                guards[i] = std::move(g);
            }
            done.count_down();
            start_one();
        });
    }
};

asio::awaitable<void> s5_body(const options& o, metrics& m, arrival how) {
    auto ex = co_await asio::this_coro::executor;
    const std::size_t locks = pick<std::size_t>(o, 10'000, 10'000, 200);
    const auto hold = pick<clock::duration>(o, 15s, 5s, 1500ms);
    const auto lease = 3s;
    const auto renew_every = lease / 3;  // the library's default interval
    corolock::client c{ex, make_config(o)};
    co_await warm_up(c, 200);
    const auto id = run_id();

    const auto rss_a = rss_bytes();
    const auto alloc_a = alloc_now();
    std::vector<corolock::mutex> handles;
    handles.reserve(locks);
    for (std::size_t i = 0; i < locks; ++i) handles.emplace_back(c, "bench:s5:" + id + ":" + std::to_string(i));
    std::vector<corolock::guard> guards(locks);
    latch acquired(ex, locks);
    acquire_all acq{handles, guards, corolock::lock_options{}, acquired, 0, 0, std::string()};
    acq.opts.lease = lease;
    acq.opts.wait = 10s;
    const auto t_acq = clock::now();
    const std::size_t window = how.burst ? locks : std::min(how.wave, locks);
    for (std::size_t i = 0; i < window; ++i) acq.start_one();
    if (!co_await acquired.wait(clock::now() + 30s)) co_await bail_out(c, acquired, "S5 acquires");
    const auto acquire_seconds = to_s(clock::now() - t_acq);
    co_await sleep_for(100ms);  // the last replies' buffers go first
    const auto rss_b = rss_bytes();
    const auto alloc_b = alloc_now();
    const double n = static_cast<double>(locks);
    m.count("locks", locks);
    m.count("acquire_window", window);
    m.number("acquire_all_s", acquire_seconds);
    m.count("acquire_errors", acq.errors);
    if (!acq.first_error.empty()) m.text("first_error", acq.first_error);
    m.number("rss_per_lock_bytes", (static_cast<double>(rss_b) - static_cast<double>(rss_a)) / n);
    m.number("live_heap_per_lock_bytes", static_cast<double>(alloc_b.live_bytes - alloc_a.live_bytes) / n);
    if (how.burst) {
        c.stop();  // memory only; the keys expire within the lease
        co_return;
    }

    auto batches = [](corolock::detail::lock_service& s) {
        return static_cast<std::size_t>(s.renew_batches());
    };
    const auto stats_0 = c.stats();
    const auto batches_0 = co_await on_strand(c, batches);
    const double cpu_0 = cpu_seconds();
    const auto t0 = clock::now();
    co_await sleep_for(hold);
    const auto wall = to_s(clock::now() - t0);
    const double cpu = cpu_seconds() - cpu_0;
    const auto batches_1 = co_await on_strand(c, batches);
    const auto stats_1 = c.stats();
    const auto rss_c = rss_bytes();

    std::size_t lost = 0, held = 0;
    for (const auto& g : guards) {
        if (g.owns_lock()) ++held;
        if (g.lost()) ++lost;
    }

    // Let go of everything, bounded; stopping the client would leave the
    // keys to expire, which is also fine, but releasing is the normal path.
    latch released(ex, held);
    for (auto& g : guards) {
        if (!g.owns_lock()) continue;
        g.async_release([&released](error_code) { released.count_down(); });
    }
    if (!co_await released.wait(clock::now() + 30s)) co_await bail_out(c, released, "S5 releases");
    c.stop();

    const double periods = wall / to_s(renew_every);
    m.number("lease_s", to_s(lease));
    m.number("renew_interval_s", to_s(renew_every));
    m.number("hold_s", wall);
    m.count("held_at_end", held);
    m.count("lost", lost);
    m.number("periods", periods);
    m.number("round_trips_per_period", static_cast<double>(stats_1.writes - stats_0.writes) / periods);
    m.number("renew_batches_per_period", static_cast<double>(batches_1 - batches_0) / periods);
    m.number("commands_per_period",
             static_cast<double>(stats_1.commands_sent - stats_0.commands_sent) / periods);
    m.number("cpu_s_per_wall_s", cpu / wall);
    m.number("rss_per_lock_after_hold_bytes",
             (static_cast<double>(rss_c) - static_cast<double>(rss_a)) / n);
}

asio::awaitable<void> scenario_s5(const options& o, metrics& m) {
    const arrival how{256, false};  // named: g++ 12 mishandles braced temporaries in co_await
    co_await s5_body(o, m, how);
}
asio::awaitable<void> scenario_s5_burst(const options& o, metrics& m) {
    const arrival how{0, true};  // named: g++ 12 mishandles braced temporaries in co_await
    co_await s5_body(o, m, how);
}

// ---------------------------------------------------------------------------
// S6: heap allocations per uncontended cycle.

asio::awaitable<void> scenario_s6(const options& o, metrics& m) {
    auto ex = co_await asio::this_coro::executor;
    const std::uint64_t cycles = pick<std::uint64_t>(o, 5000, 2000, 50);
    corolock::client c{ex, make_config(o)};
    co_await warm_up(c, 300);
    const auto n = static_cast<double>(cycles);

    // A fresh name, hence a fresh handle, each cycle (as S1).
    cycle_result r;
    const auto a0 = alloc_now();
    co_await cycle_loop(c, "bench:s6:" + run_id() + ":", clock::now() + 60s, cycles, r);
    const auto a1 = alloc_now();
    if (r.errors) throw std::runtime_error("S6 cycles failed: " + r.first_error);
    r.cycle_us.clear();
    r.cycle_us.shrink_to_fit();

    // One handle reused: the acquire and release themselves. Snapshots
    // between the steps split the count (the client's reader and writer
    // run inside whichever step they serve).
    corolock::mutex handle{c, "bench:s6:reused:" + run_id()};
    corolock::lock_options opts;
    opts.lease = 30s;
    opts.wait = 10s;
    std::uint64_t acquire_allocs = 0, release_allocs = 0, bytes = 0;
    for (std::uint64_t i = 0; i < cycles + 100; ++i) {
        const auto s0 = alloc_now();
        auto [ec, g] = co_await handle.async_acquire(opts, use_nothrow);
        if (ec) throw boost::system::system_error(ec, "S6 acquire");
        const auto s1 = alloc_now();
        auto [rec] = co_await g.async_release(use_nothrow);
        if (rec) throw boost::system::system_error(rec, "S6 release");
        const auto s2 = alloc_now();
        if (i < 100) continue;  // warm-up
        acquire_allocs += s1.calls - s0.calls;
        release_allocs += s2.calls - s1.calls;
        bytes += s2.bytes - s0.bytes;
    }

    // One plain command, for scale.
    const auto p0 = alloc_now();
    for (std::uint64_t i = 0; i < cycles; ++i) {
        corolock::command ping{"PING"};
        co_await exec(c, std::move(ping));
    }
    const auto p1 = alloc_now();
    c.stop();

    m.count("cycles", cycles);
    m.number("allocations_per_cycle_fresh_name", static_cast<double>(a1.calls - a0.calls) / n);
    m.number("bytes_per_cycle_fresh_name", static_cast<double>(a1.bytes - a0.bytes) / n);
    m.number("allocations_per_cycle_reused_handle",
             static_cast<double>(acquire_allocs + release_allocs) / n);
    m.number("allocations_per_acquire", static_cast<double>(acquire_allocs) / n);
    m.number("allocations_per_release", static_cast<double>(release_allocs) / n);
    m.number("bytes_per_cycle_reused_handle", static_cast<double>(bytes) / n);
    m.number("allocations_per_ping", static_cast<double>(p1.calls - p0.calls) / n);
}

}  // namespace

// ---------------------------------------------------------------------------
// F1: the fair mutex's direct handoff against the mutex's (handoff.hpp);
// PING through a client in the same run is the yardstick.


asio::awaitable<void> scenario_fair_handoff(const options& o, metrics& m) {
    auto ex = co_await asio::this_coro::executor;
    const auto run = pick<clock::duration>(o, 3s, 1s, 200ms);
    const auto id = run_id();
    std::string error;
    // PING through a client of the same kind, in this run.
    std::vector<double> ping_us;
    {
        corolock::client c{ex, make_config(o)};
        corolock::command hello{"PING"};
        co_await exec(c, std::move(hello));
        const auto end = clock::now() + run;
        for (int i = 0; i < 10'000'000 && clock::now() < end; ++i) {
            const auto t0 = clock::now();
            corolock::command ping{"PING"};
            co_await exec(c, std::move(ping));
            ping_us.push_back(to_us(clock::now() - t0));
        }
        c.stop();
    }
    const auto ping = summarize(std::move(ping_us));
    // The server's share of a handoff: the time it spent in scripts (the
    // holder's release, the waiter's queue entry and its renewals, and for
    // the mutex the waiter's re-acquire), per handoff.
    corolock::client probe{ex, make_config(o)};
    const auto stats_0 = co_await commandstats(probe);
    const auto fair = measure_handoff<corolock::fair_mutex>(o, "bench:f1:fair:" + id, run, error);
    const auto stats_1 = co_await commandstats(probe);
    const auto plain = measure_handoff<corolock::mutex>(o, "bench:f1:mutex:" + id, run, error);
    const auto stats_2 = co_await commandstats(probe);
    probe.stop();
    auto per_handoff = [](std::uint64_t v, const summary& s) {
        return s.n > 0 ? static_cast<double>(v) / static_cast<double>(s.n) : 0.0;
    };
    add_summary(m, "ping", ping);
    add_summary(m, "fair_handoff", fair.handoff);
    add_summary(m, "mutex_handoff", plain.handoff);
    add_summary(m, "fair_release", fair.release);
    add_summary(m, "mutex_release", plain.release);
    m.number("fair_scripts_per_handoff", per_handoff(delta(stats_0, stats_1, "evalsha"), fair.handoff));
    m.number("fair_script_us_per_handoff", per_handoff(delta(stats_0, stats_1, "evalsha:usec"), fair.handoff));
    m.number("mutex_scripts_per_handoff", per_handoff(delta(stats_1, stats_2, "evalsha"), plain.handoff));
    m.number("mutex_script_us_per_handoff", per_handoff(delta(stats_1, stats_2, "evalsha:usec"), plain.handoff));
    m.number("fair_over_ping_p50", ping.p50 > 0 ? fair.handoff.p50 / ping.p50 : 0);
    m.number("mutex_over_ping_p50", ping.p50 > 0 ? plain.handoff.p50 / ping.p50 : 0);
    if (!error.empty()) m.text("errors", error);
}

const std::vector<scenario_info>& scenarios() {
    // Time limits are generous multiples of the full run's length; they only
    // exist so that a hang can never outlive the script.
    static const std::vector<scenario_info> list = {
        {"ping", &scenario_ping, 30},   {"s1", &scenario_s1, 40},
        {"s2", &scenario_s2, 40},       {"sweep", &scenario_sweep, 60},
        {"s3", &scenario_s3, 70},       {"s4", &scenario_s4, 150},
        {"s4_burst", &scenario_s4_burst, 60},
        {"s5", &scenario_s5, 90},       {"s5_burst", &scenario_s5_burst, 60},
        {"s6", &scenario_s6, 60},
        {"sem", &scenario_sem, 60},
        {"fair_handoff", &scenario_fair_handoff, 40},
        {"rw", &scenario_rw, 40},
        {"fence", &scenario_fence, 40},
        {"election", &scenario_election, 90},
    };
    return list;
}

int run_scenario_process(const options& o, std::string_view name) {
    const auto& all = scenarios();
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&](const scenario_info& s) { return s.name == name; });
    if (it == all.end()) {
        std::cerr << "corolock_bench: unknown scenario " << name << "\n";
        return 64;
    }
    // The last line of defence: the kernel ends a scenario that overruns.
    ::alarm(static_cast<unsigned>(it->time_limit_s + 10));
    asio::io_context ioc(1);
    metrics m;
    std::string error;
    asio::co_spawn(ioc, it->run(o, m), [&](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            error = ex.what();
        }
    });
    ioc.run();
    if (!error.empty()) m.text("error", error);
    m.print_lines();
    return error.empty() ? 0 : 1;
}

int run_worker_process(const options& o, const worker_args& w) {
    ::alarm(static_cast<unsigned>((w.end_ns - mono_ns()) / 1'000'000'000 + 40));
    asio::io_context ioc(1);
    int status = 1;
    asio::co_spawn(ioc, worker_main(o, w, status), [&](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            std::printf("error %s\n", ex.what());
        }
        status = 1;
    });
    ioc.run();
    return status;
}

int load_acquire_script(const options& o) {
    asio::io_context ioc(1);
    int status = 1;
    const auto& script = corolock::detail::acquire_script();
    asio::co_spawn(
        ioc,
        [](const options& opts, const corolock::detail::script& s, int& out) -> asio::awaitable<void> {
            corolock::client c{co_await asio::this_coro::executor, make_config(opts)};
            corolock::command load{"SCRIPT", "LOAD", s.source};
            auto r = co_await exec(c, std::move(load));
            c.stop();
            if (r.str != s.sha1) {
                std::cerr << "corolock_bench: SCRIPT LOAD returned " << r.str << ", expected "
                          << s.sha1 << "\n";
                co_return;
            }
            std::printf("%s\n", r.str.c_str());
            out = 0;
        }(o, script, status),
        [&](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::cerr << "corolock_bench: " << ex.what() << "\n";
            }
        });
    ioc.run_for(30s);
    return status;
}

}  // namespace bench
