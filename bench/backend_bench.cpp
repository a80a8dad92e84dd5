#include "backend_bench.hpp"

#include "process.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace bench {

asio::awaitable<void> raw_client::protocol_cycle() { co_return; }

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

double median(std::vector<double> v) { return summarize(std::move(v)).p50; }

struct sizes {
    int rounds, rtts, cycles;
    std::chrono::milliseconds contend;
};

sizes sizes_for(run_mode mode) {
    switch (mode) {
    case run_mode::smoke: return {1, 20, 20, 300ms};
    case run_mode::quick: return {3, 200, 200, 2000ms};
    case run_mode::full: break;
    }
    return {7, 400, 400, 5000ms};
}

// Figures as they come: a line on stdout, and kept for the JSON.
struct figures {
    metrics m;
    void put(const std::string& key, double v) {
        m.number(key, v);
        std::cout << key << '\t' << json_number(v) << std::endl;
    }
};

// `n` timed calls of `op` on the raw client's executor; µs each.
template <class Op>
asio::awaitable<std::vector<double>> raw_sample(raw_client& c, int n, Op op) {
    co_return co_await asio::co_spawn(
        c.executor(),
        [&c, n, op]() -> asio::awaitable<std::vector<double>> {
            std::vector<double> us;
            for (int i = 0; i < n; ++i) {
                const auto t0 = mono_ns();
                co_await op(c);
                us.push_back(static_cast<double>(mono_ns() - t0) / 1e3);
            }
            co_return us;
        },
        asio::use_awaitable);
}

asio::awaitable<std::vector<double>> floor_sample(raw_client& c, int n) {
    return raw_sample(c, n, [](raw_client& r) { return r.round_trip(); });
}

asio::awaitable<std::vector<double>> protocol_sample(raw_client& c, int n) {
    return raw_sample(c, n, [](raw_client& r) { return r.protocol_cycle(); });
}

// `n` uncontended acquire+release cycles on one name; µs each.
asio::awaitable<std::vector<double>> cycle_sample(corolock::mutex& m, int n) {
    std::vector<double> us;
    for (int i = 0; i < n; ++i) {
        const auto t0 = mono_ns();
        auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 10s}, use_nothrow);
        if (ec) throw std::runtime_error("acquire: " + ec.message());
        if (const auto rec = co_await g.release())
            throw std::runtime_error("release: " + rec.message());
        us.push_back(static_cast<double>(mono_ns() - t0) / 1e3);
    }
    co_return us;
}

struct grant {
    std::size_t process;
    std::int64_t ok_ns, release_ns;
};

asio::awaitable<void> orchestrate(const backend_bench& b, std::string self, std::string url,
                                  run_mode mode, option_map opt, figures& out) {
    const auto s = sizes_for(mode);
    auto ex = co_await asio::this_coro::executor;
    auto raw = co_await b.connect(ex, url);
    corolock::backend lib(ex, url);
    corolock::mutex m(lib, "bench/cycle");

    // Warm up both for one round's worth (connections, the allocator, what
    // the backend keeps, and a JVM server's just-in-time compiler).
    co_await floor_sample(*raw, s.rtts);
    co_await cycle_sample(m, s.cycles);
    if (raw->has_protocol_cycle()) co_await protocol_sample(*raw, s.cycles / 4 + 1);

    const bool protocol = raw->has_protocol_cycle();
    std::vector<double> rtt_p50s, cycle_p50s, raw_p50s, cycle_ratios, raw_ratios, overheads;
    std::vector<double> all_cycles;
    for (int r = 0; r < s.rounds; ++r) {
        const double rtt = median(co_await floor_sample(*raw, s.rtts));
        const auto cycles = co_await cycle_sample(m, s.cycles);
        all_cycles.insert(all_cycles.end(), cycles.begin(), cycles.end());
        const double cyc = median(cycles);
        rtt_p50s.push_back(rtt);
        cycle_p50s.push_back(cyc);
        cycle_ratios.push_back(cyc / (2 * rtt));
        if (protocol) {
            const double rawc = median(co_await protocol_sample(*raw, s.cycles / 4 + 1));
            raw_p50s.push_back(rawc);
            raw_ratios.push_back(rawc / (2 * rtt));
            overheads.push_back(cyc / rawc);
        }
    }
    const auto cycle_all = summarize(all_cycles);
    out.put("rounds", s.rounds);
    out.put("rtt_p50_us", median(rtt_p50s));
    out.put("cycle_p50_us", median(cycle_p50s));
    out.put("cycle_p99_us", cycle_all.p99);
    out.put("cycle_over_two_rtt", median(cycle_ratios));
    if (protocol) {
        out.put("raw_protocol_cycle_p50_us", median(raw_p50s));
        out.put("raw_protocol_cycle_over_two_rtt", median(raw_ratios));
        out.put("cycle_over_raw_protocol_cycle", median(overheads));
    }

    // Handoff and fairness: two processes on one name. They start together,
    // a little after this point (their own connections first).
    const double rtt_before = median(co_await floor_sample(*raw, s.rtts));
    const std::int64_t start = mono_ns() + 1'500'000'000LL;
    const std::int64_t end = start + std::chrono::nanoseconds(s.contend).count();
    std::vector<child> kids;
    for (int i = 0; i < 2; ++i)
        kids.push_back(spawn_child({self, "--worker", "--url", url, "--name", "bench/handoff",
                                    "--start-ns", std::to_string(start), "--end-ns",
                                    std::to_string(end)}));
    // collect_children blocks; the workers do not need this process's loop.
    collect_children({&kids[0], &kids[1]}, clock::now() + s.contend + std::chrono::seconds(30));
    const double rtt_after = median(co_await floor_sample(*raw, s.rtts));

    std::vector<grant> grants;
    std::vector<int> per_process(kids.size(), 0);
    for (std::size_t k = 0; k < kids.size(); ++k) {
        if (kids[k].exit_status != 0)
            throw std::runtime_error("a handoff worker failed:\n" + kids[k].out);
        std::istringstream in(kids[k].out);
        std::string tag;
        for (grant g{k, 0, 0}; in >> tag >> g.ok_ns >> g.release_ns;) {
            if (tag != "g") continue;
            grants.push_back(g);
            ++per_process[k];
        }
    }
    std::sort(grants.begin(), grants.end(),
              [](const grant& a, const grant& c) { return a.ok_ns < c.ok_ns; });
    std::vector<double> handoffs;
    for (std::size_t i = 1; i < grants.size(); ++i) {
        if (grants[i].process != grants[i - 1].process)
            handoffs.push_back(static_cast<double>(grants[i].ok_ns - grants[i - 1].release_ns) / 1e3);
    }
    const double rtt = median({rtt_before, rtt_after});
    const auto h = summarize(handoffs);
    out.put("handoff_rtt_us", rtt);
    out.put("handoffs", static_cast<double>(h.n));
    out.put("handoff_p50_us", h.p50);
    out.put("handoff_p90_us", h.p90);
    out.put("handoff_p99_us", h.p99);
    out.put("handoff_over_rtt", h.p50 / rtt);
    const int lo = *std::min_element(per_process.begin(), per_process.end());
    const int hi = *std::max_element(per_process.begin(), per_process.end());
    out.put("grants_process_a", per_process[0]);
    out.put("grants_process_b", per_process[1]);
    out.put("fairness_min_over_max", hi > 0 ? static_cast<double>(lo) / hi : NAN);

    if (b.extra) {
        const auto before = out.m.items().size();
        co_await b.extra(ex, url, mode, opt, out.m);
        for (auto i = before; i < out.m.items().size(); ++i)
            std::cout << out.m.items()[i].first << '\t' << out.m.items()[i].second << std::endl;
    }
    lib.stop();
    raw->stop();
}

// A handoff worker: cycles on `name` from start to end, one line per grant.
// (Coroutine parameters by value: a reference would outlive its argument.)
asio::awaitable<void> work(std::string url, std::string name, std::int64_t start, std::int64_t end) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend lib(ex, url);
    corolock::mutex m(lib, name);
    asio::steady_timer t(ex, std::chrono::nanoseconds(std::max<std::int64_t>(0, start - mono_ns())));
    co_await t.async_wait(use_nothrow);
    std::ostringstream lines;
    for (int i = 0; i < 1'000'000 && (i < min_rounds || mono_ns() < end); ++i) {
        auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 10s}, use_nothrow);
        if (ec) throw std::runtime_error("acquire: " + ec.message());
        const auto ok = mono_ns();
        const auto rel = mono_ns();
        if (const auto rec = co_await g.release())
            throw std::runtime_error("release: " + rec.message());
        lines << "g " << ok << ' ' << rel << '\n';
    }
    std::cout << lines.str() << std::flush;
    lib.stop();
}

}  // namespace

int run_backend_bench(int argc, char** argv, const backend_bench& b) {
    option_map opt;
    bool worker = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--worker") worker = true;
        else if (a.rfind("--", 0) == 0 && i + 1 < argc) opt[a.substr(2)] = argv[++i];
        else {
            std::cerr << "usage: " << b.program
                      << " --url URL [--mode full|quick|smoke] [--out FILE] (bench/backend_bench.hpp)\n";
            return 64;
        }
    }
    if (opt["url"].empty()) {
        std::cerr << b.program << ": --url is required\n";
        return 64;
    }
    run_mode mode{};
    try {
        mode = parse_mode(opt.count("mode") ? opt["mode"] : "full");
    } catch (const std::invalid_argument&) {
        std::cerr << b.program << ": --mode is full, quick or smoke\n";
        return 64;
    }
    asio::io_context ioc;
    figures out;
    int status = 0;
    auto done = [&](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            std::cerr << b.program << ": " << ex.what() << "\n";
        }
        status = 1;
        ioc.stop();
    };
    if (worker)
        asio::co_spawn(ioc, work(opt["url"], opt["name"], std::stoll(opt["start-ns"]),
                                 std::stoll(opt["end-ns"])), done);
    else
        asio::co_spawn(ioc, orchestrate(b, argv[0], opt["url"], mode, opt, out), done);
    ioc.run_for(std::chrono::minutes(5));
    if (!worker && !opt["out"].empty()) {
        std::ofstream f(opt["out"]);
        f << "{\"ok\": " << (status == 0 ? "true" : "false")
          << ", \"mode\": " << json_quote(to_string(mode))
          << ", \"floor_request\": " << json_quote(b.floor_request);
        for (const auto& [k, v] : out.m.items()) f << ", " << json_quote(k) << ": " << v;
        f << "}\n";
    }
    return status;
}

}  // namespace bench
