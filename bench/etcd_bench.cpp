// corolock_bench_etcd: the etcd backend measured against the etcd it talks
// to, in one run (scripts/bench.sh starts a throwaway etcd and runs it).
// Every figure is a ratio to raw round trips taken by this program in the
// same run; nothing here asserts on speed.
//
//   corolock_bench_etcd --endpoint 127.0.0.1:PORT [--mode full|quick|smoke] [--out FILE]
//   corolock_bench_etcd --worker --endpoint E --name N --start-ns S --end-ns T
//
// What it measures (one "key<TAB>value" line each on stdout, and a JSON
// object in FILE):
//  E1 floor: one raw gateway round trip, POST /v3/kv/range of one key
//     through the library's etcd transport (src/etcd/gateway.hpp) on a
//     kept-alive connection, no lock logic: rtt_p50_us.
//     Also the lock protocol's own requests done raw (lease grant, the
//     creating txn, lease revoke: raw_protocol_cycle_p50_us).
//  E2 the uncontended acquire+release cycle on one name, over corolock
//     (corolock::backend "etcd://..."): cycle_p50_us, and
//     cycle_over_two_rtt, its p50 over the floor of two round trips, and
//     cycle_over_raw_protocol_cycle, over the same requests done raw. E1 and
//     E2 run in paired rounds (a floor sample, then a cycle sample) and each
//     ratio is the median of the rounds' ratios: this machine's speed moves
//     within seconds.
//  E3 handoff across processes: two worker processes (this program,
//     --worker) cycle acquire -> release on one name; a handoff is the time
//     from one process's release call to the other's acquire returning
//     (CLOCK_MONOTONIC, shared by both): handoff_p50_us and
//     handoff_over_rtt, against the floor's round trip measured just before.
//  E4 fairness in the same run: grants per process, and min/max of them.
#include "process.hpp"

#include "etcd/gateway.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace etcd = corolock::detail::etcd;
using namespace std::chrono_literals;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

std::int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    return v[(v.size() - 1) / 2];
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// One transport call as an awaitable (error_code, result).
template <class Result, class Call>
auto raw(Call call) {
    return asio::async_initiate<decltype(use_nothrow), void(corolock::error_code, Result)>(
        [call](auto handler) mutable { call(std::move(handler)); }, use_nothrow);
}

struct sizes {
    int rounds, rtts, cycles;
    std::chrono::milliseconds contend;
};

sizes sizes_for(const std::string& mode) {
    if (mode == "smoke") return {1, 20, 20, 300ms};
    if (mode == "quick") return {3, 200, 200, 2000ms};
    return {7, 400, 400, 5000ms};
}

struct results {
    std::vector<std::pair<std::string, double>> figures;
    void put(const std::string& key, double v) {
        figures.emplace_back(key, v);
        std::cout << key << '\t' << v << std::endl;
    }
};

// E1: `n` raw range round trips; their times in µs.
asio::awaitable<std::vector<double>> rtt_sample(etcd::gateway& gw, int n) {
    std::vector<double> us;
    etcd::range_request req;
    req.key = "corolock-bench/floor";
    for (int i = 0; i < n; ++i) {
        const auto t0 = now_ns();
        auto [ec, r] = co_await raw<etcd::range_result>([&](auto h) { gw.range(req, std::move(h)); });
        if (ec) throw std::runtime_error("range: " + gw.last_error().message);
        us.push_back(static_cast<double>(now_ns() - t0) / 1e3);
    }
    co_return us;
}

// E1's second figure: the requests of an uncontended acquire and release,
// done raw: lease grant, the creating txn, lease revoke.
asio::awaitable<std::vector<double>> raw_protocol_sample(etcd::gateway& gw, int n) {
    std::vector<double> us;
    const std::string key = "corolock-bench/raw/owner";
    for (int i = 0; i < n; ++i) {
        const auto t0 = now_ns();
        auto [e1, lease] = co_await raw<etcd::lease_grant_result>(
            [&](auto h) { gw.lease_grant(30, std::move(h)); });
        if (e1) throw std::runtime_error("lease grant: " + gw.last_error().message);
        etcd::txn_request txn;
        txn.compares.push_back({key, etcd::compare::target::create_revision,
                                etcd::compare::op::equal, 0});
        txn.success.emplace_back(etcd::put_request{key, "", lease.id});
        etcd::range_request all;
        all.key = "corolock-bench/raw/";
        all.range_end = etcd::prefix_end(all.key);
        all.sort_by_create_revision = true;
        all.limit = 1;
        txn.success.emplace_back(all);
        txn.failure.emplace_back(all);
        auto [e2, t] = co_await raw<etcd::txn_result>([&](auto h) { gw.txn(txn, std::move(h)); });
        if (e2) throw std::runtime_error("txn: " + gw.last_error().message);
        auto [e3, rv] = co_await raw<etcd::lease_revoke_result>(
            [&](auto h) { gw.lease_revoke(lease.id, std::move(h)); });
        if (e3) throw std::runtime_error("lease revoke: " + gw.last_error().message);
        us.push_back(static_cast<double>(now_ns() - t0) / 1e3);
    }
    co_return us;
}

// E2: `n` uncontended acquire+release cycles on one name; µs each.
asio::awaitable<std::vector<double>> cycle_sample(corolock::mutex& m, int n) {
    std::vector<double> us;
    for (int i = 0; i < n; ++i) {
        const auto t0 = now_ns();
        auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 10s}, use_nothrow);
        if (ec) throw std::runtime_error("acquire: " + ec.message());
        if (const auto rec = co_await g.release())
            throw std::runtime_error("release: " + rec.message());
        us.push_back(static_cast<double>(now_ns() - t0) / 1e3);
    }
    co_return us;
}

struct grant {
    long pid;
    std::int64_t ok_ns, release_ns;
};

asio::awaitable<void> orchestrate(std::string self, std::string endpoint,
                                  std::string mode, results& out) {
    const auto s = sizes_for(mode);
    auto ex = co_await asio::this_coro::executor;
    etcd::gateway_options go;
    go.endpoints = {endpoint};
    auto gw = etcd::gateway::create(ex, go);
    corolock::backend b(ex, "etcd://" + endpoint);
    corolock::mutex m(b, "bench/cycle");

    // Warm up both (connections, the lock's prefix watch, the allocator).
    co_await rtt_sample(*gw, 10);
    co_await cycle_sample(m, 10);

    std::vector<double> rtt_p50s, cycle_ratios, raw_ratios, cycle_p50s, raw_p50s, overheads;
    for (int r = 0; r < s.rounds; ++r) {
        const double rtt = median(co_await rtt_sample(*gw, s.rtts));
        const double cyc = median(co_await cycle_sample(m, s.cycles));
        const double rawc = median(co_await raw_protocol_sample(*gw, s.cycles / 4 + 1));
        rtt_p50s.push_back(rtt);
        cycle_p50s.push_back(cyc);
        raw_p50s.push_back(rawc);
        cycle_ratios.push_back(cyc / (2 * rtt));
        raw_ratios.push_back(rawc / (2 * rtt));
        overheads.push_back(cyc / rawc);
    }
    out.put("rounds", s.rounds);
    out.put("rtt_p50_us", median(rtt_p50s));
    out.put("cycle_p50_us", median(cycle_p50s));
    out.put("raw_protocol_cycle_p50_us", median(raw_p50s));
    out.put("cycle_over_two_rtt", median(cycle_ratios));
    out.put("raw_protocol_cycle_over_two_rtt", median(raw_ratios));
    out.put("cycle_over_raw_protocol_cycle", median(overheads));

    // E3 and E4: two processes on one name. They start together, a little
    // after this point (their own connections and watch first).
    const double rtt_before = median(co_await rtt_sample(*gw, s.rtts));
    const std::int64_t start = now_ns() + 1'500'000'000LL;
    const std::int64_t end = start + std::chrono::nanoseconds(s.contend).count();
    std::vector<bench::child> kids;
    for (int i = 0; i < 2; ++i)
        kids.push_back(bench::spawn_child({self, "--worker", "--endpoint", endpoint, "--name",
                                           "bench/handoff", "--start-ns", std::to_string(start),
                                           "--end-ns", std::to_string(end)}));
    // collect_children blocks; the workers do not need this process's loop.
    bench::collect_children({&kids[0], &kids[1]},
                            bench::clock::now() + s.contend + std::chrono::seconds(30));
    const double rtt_after = median(co_await rtt_sample(*gw, s.rtts));

    // Each grant is tagged with its process's index (0 or 1).
    std::vector<grant> grants;
    std::vector<int> per_process(kids.size(), 0);
    for (std::size_t k = 0; k < kids.size(); ++k) {
        if (kids[k].exit_status != 0)
            throw std::runtime_error("a handoff worker failed:\n" + kids[k].out);
        std::istringstream in(kids[k].out);
        std::string tag;
        for (grant g{}; in >> tag >> g.pid >> g.ok_ns >> g.release_ns;) {
            if (tag != "g") continue;
            g.pid = static_cast<long>(k);
            grants.push_back(g);
            ++per_process[k];
        }
    }
    std::sort(grants.begin(), grants.end(),
              [](const grant& a, const grant& c) { return a.ok_ns < c.ok_ns; });
    std::vector<double> handoffs;
    for (std::size_t i = 1; i < grants.size(); ++i) {
        if (grants[i].pid != grants[i - 1].pid)
            handoffs.push_back(static_cast<double>(grants[i].ok_ns - grants[i - 1].release_ns) / 1e3);
    }
    const double rtt = median({rtt_before, rtt_after});
    out.put("handoff_rtt_us", rtt);
    out.put("handoffs", static_cast<double>(handoffs.size()));
    out.put("handoff_p50_us", median(handoffs));
    out.put("handoff_p90_us", percentile(handoffs, 0.9));
    out.put("handoff_over_rtt", median(handoffs) / rtt);
    const int lo = *std::min_element(per_process.begin(), per_process.end());
    const int hi = *std::max_element(per_process.begin(), per_process.end());
    out.put("grants_process_a", per_process[0]);
    out.put("grants_process_b", per_process[1]);
    out.put("fairness_min_over_max", hi > 0 ? static_cast<double>(lo) / hi : NAN);

    b.stop();
    gw->stop();
}

// A handoff worker: cycles on `name` from start to end, one line per grant.
// (Coroutine parameters by value: a reference would outlive its argument.)
asio::awaitable<void> work(std::string endpoint, std::string name,
                           std::int64_t start, std::int64_t end) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend b(ex, "etcd://" + endpoint);
    corolock::mutex m(b, name);
    asio::steady_timer t(ex, std::chrono::nanoseconds(std::max<std::int64_t>(0, start - now_ns())));
    co_await t.async_wait(use_nothrow);
    std::ostringstream lines;
    while (now_ns() < end) {
        auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 10s}, use_nothrow);
        if (ec) throw std::runtime_error("acquire: " + ec.message());
        const auto ok = now_ns();
        const auto rel = now_ns();
        if (const auto rec = co_await g.release())
            throw std::runtime_error("release: " + rec.message());
        lines << "g " << ::getpid() << ' ' << ok << ' ' << rel << '\n';
    }
    std::cout << lines.str() << std::flush;
    b.stop();
}

std::string json_number(double v) {
    if (!std::isfinite(v)) return "null";
    std::ostringstream o;
    o.precision(6);
    o << v;
    return o.str();
}

}  // namespace

int main(int argc, char** argv) {
    std::map<std::string, std::string> opt;
    bool worker = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--worker") worker = true;
        else if (a.rfind("--", 0) == 0 && i + 1 < argc) opt[a.substr(2)] = argv[++i];
        else {
            std::cerr << "usage: corolock_bench_etcd --endpoint HOST:PORT [--mode full|quick|smoke] "
                         "[--out FILE]\n";
            return 64;
        }
    }
    if (opt["endpoint"].empty()) {
        std::cerr << "corolock_bench_etcd: --endpoint is required\n";
        return 64;
    }
    const std::string mode = opt.count("mode") ? opt["mode"] : "full";
    if (mode != "full" && mode != "quick" && mode != "smoke") {
        std::cerr << "corolock_bench_etcd: --mode is full, quick or smoke\n";
        return 64;
    }
    asio::io_context ioc;
    results out;
    int status = 0;
    auto done = [&](std::exception_ptr e) {
        if (!e) return;
        try { std::rethrow_exception(e); } catch (const std::exception& ex) {
            std::cerr << "corolock_bench_etcd: " << ex.what() << "\n";
        }
        status = 1;
        ioc.stop();
    };
    if (worker) {
        asio::co_spawn(ioc, work(opt["endpoint"], opt["name"], std::stoll(opt["start-ns"]),
                                 std::stoll(opt["end-ns"])), done);
    } else {
        asio::co_spawn(ioc, orchestrate(argv[0], opt["endpoint"], mode, out), done);
    }
    ioc.run_for(std::chrono::minutes(5));
    if (!worker && !opt["out"].empty()) {
        std::ofstream f(opt["out"]);
        f << "{\"ok\": " << (status == 0 ? "true" : "false") << ", \"mode\": \"" << mode << "\"";
        for (const auto& [k, v] : out.figures) f << ", \"" << k << "\": " << json_number(v);
        f << "}\n";
    }
    return status;
}
