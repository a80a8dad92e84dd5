// corolock_bench: the benchmark program behind scripts/bench.sh. Not a test:
// it measures, compares with redis-benchmark's figures for the same server,
// and reports; it never fails on a slow result.
//
//   corolock_bench --port N [--mode full|quick|smoke] [--out FILE] [--data-dir DIR]
//                  [--baseline NAME=OPS_PER_S,P50_MS]... [--flush] [--only s1,s2,...]
//       Runs every scenario, each in a child process, and writes one JSON
//       file plus a table on stdout. Baselines are redis-benchmark's results:
//       ping_c1, evalsha_c1, evalsha_c50, evalsha_c50_p16. --flush sends
//       FLUSHALL before each scenario, and the sweep between its steps
//       (only for a throwaway server).
//   corolock_bench ... --s1-round FILE,OPS [--s1-round FILE,OPS]...
//                      [--s2-round FILE,OPS]...
//       S1 (S2) measured beforehand in rounds (scripts/bench.sh): FILE holds
//       one round's output (--scenario s1 or s2), OPS the 1-client (50-client)
//       EVALSHA sample taken beside it. The scenario is then not run again;
//       its ratio is the median of the rounds' ratios, and its figures are
//       the median round's.
//   corolock_bench ... --machine KEY=VALUE
//       A fact about how the run was set up (scripts/bench.sh: where S1's
//       processes ran), kept with the machine's description.
//   corolock_bench --port N --load-acquire-script
//       SCRIPT LOAD of the library's acquire script; prints its SHA1.
//   corolock_bench --port N --scenario NAME [--mode M] [--data-dir DIR] [--flush]
//   corolock_bench --port N --worker s3 --lock NAME --counter KEY ...
//       Internal roles: one scenario, one S3 contender.
//
// The server is always 127.0.0.1: benchmarks never leave the machine.
#include "bench.hpp"
#include "process.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/io_context.hpp>

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock;

struct baseline {
    double ops_per_s = std::nan("");
    double p50_ms = std::nan("");
};

struct cli {
    bench::options opts;
    std::string out_file;
    std::map<std::string, baseline> baselines;
    // S1 and S2 rounds run by scripts/bench.sh, each beside its own
    // baseline sample: scenario name -> (output file, sample ops/s).
    std::map<std::string, std::vector<std::pair<std::string, double>>> rounds;
    std::map<std::string, std::string> setup;  // --machine KEY=VALUE
    bool flush = false;
    std::vector<std::string> only;
    std::string scenario;
    std::string worker;
    bench::worker_args worker_args;
    bool load_script = false;
};

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string part; std::getline(in, part, sep);)
        if (!part.empty()) out.push_back(part);
    return out;
}

cli parse_args(int argc, char** argv) {
    cli c;
    auto value = [&](int& i) -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(std::string(argv[i]) + " needs a value");
        return argv[++i];
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--port") {
            const int p = std::stoi(value(i));
            if (p <= 0 || p > 65535) throw std::invalid_argument("bad --port");
            c.opts.port = static_cast<std::uint16_t>(p);
        } else if (a == "--mode") {
            c.opts.mode = bench::parse_mode(value(i));
        } else if (a == "--data-dir") {
            c.opts.data_dir = value(i);
        } else if (a == "--out") {
            c.out_file = value(i);
        } else if (a == "--baseline") {
            // NAME=OPS_PER_S,P50_MS
            const auto v = value(i);
            const auto eq = v.find('=');
            if (eq == std::string::npos) throw std::invalid_argument("--baseline NAME=OPS,P50_MS");
            const auto parts = split(v.substr(eq + 1), ',');
            baseline b;
            if (!parts.empty()) b.ops_per_s = std::stod(parts[0]);
            if (parts.size() > 1) b.p50_ms = std::stod(parts[1]);
            c.baselines[v.substr(0, eq)] = b;
        } else if (a == "--machine") {
            const auto v = value(i);
            const auto eq = v.find('=');
            if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--machine KEY=VALUE");
            c.setup[v.substr(0, eq)] = v.substr(eq + 1);
        } else if (a == "--s1-round" || a == "--s2-round") {
            // FILE,OPS_PER_S
            const auto v = value(i);
            const auto comma = v.rfind(',');
            if (comma == std::string::npos) throw std::invalid_argument(a + " FILE,OPS");
            // A missing or malformed sample is kept as NaN: that round then
            // fails in the report instead of stopping the whole run.
            const std::string ops = v.substr(comma + 1);
            double x = std::nan("");
            const auto [end, ec] = std::from_chars(ops.data(), ops.data() + ops.size(), x);
            if (ec != std::errc() || end != ops.data() + ops.size() || !std::isfinite(x) || x <= 0)
                x = std::nan("");
            c.rounds[a.substr(2, 2)].emplace_back(v.substr(0, comma), x);
        } else if (a == "--seconds") {
            c.opts.seconds = std::stod(value(i));
            if (!(c.opts.seconds > 0 && c.opts.seconds <= 20))
                throw std::invalid_argument("--seconds takes 0 < s <= 20");
        } else if (a == "--flush") {
            c.flush = true;
            c.opts.flush = true;
        } else if (a == "--only") {
            c.only = split(value(i), ',');
        } else if (a == "--scenario") {
            c.scenario = value(i);
        } else if (a == "--worker") {
            c.worker = value(i);
        } else if (a == "--lock") {
            c.worker_args.name = value(i);
        } else if (a == "--counter") {
            c.worker_args.counter_key = value(i);
        } else if (a == "--task-base") {
            c.worker_args.task_base = std::stoi(value(i));
        } else if (a == "--tasks") {
            c.worker_args.tasks = std::stoi(value(i));
        } else if (a == "--start-ns") {
            c.worker_args.start_ns = std::stoll(value(i));
        } else if (a == "--end-ns") {
            c.worker_args.end_ns = std::stoll(value(i));
        } else if (a == "--load-acquire-script") {
            c.load_script = true;
        } else {
            throw std::invalid_argument("unknown argument " + a);
        }
    }
    if (c.opts.port == 0) throw std::invalid_argument("--port is required");
    if (c.opts.seconds > 0 && c.scenario.empty())
        throw std::invalid_argument("--seconds goes with --scenario s1 or s2");
    return c;
}

std::string self_exe() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
    return std::string(buf, static_cast<std::size_t>(n));
}

// One command on a short-lived client, for the orchestrator's own needs
// (INFO, FLUSHALL). Empty on any failure.
std::optional<corolock::reply> one_command(const bench::options& o, corolock::command cmd) {
    asio::io_context ioc(1);
    corolock::config cfg;
    cfg.host = "127.0.0.1";
    cfg.port = o.port;
    std::optional<corolock::reply> out;
    corolock::client c{ioc.get_executor(), cfg};
    c.async_exec(std::move(cmd), [&](corolock::error_code ec, corolock::reply r) {
        if (!ec) out = std::move(r);
        c.stop();
    });
    ioc.run_for(15s);
    c.stop();
    return out;
}

std::string info_field(const std::string& info, const std::string& field) {
    std::istringstream in(info);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(field + ":", 0) != 0) continue;
        auto v = line.substr(field.size() + 1);
        if (!v.empty() && v.back() == '\r') v.pop_back();
        return v;
    }
    return "";
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
    return "unknown";
}

std::string loadavg() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

struct scenario_run {
    std::string name;
    bench::metrics m;
    double seconds = 0;
    bool ok = false;
    std::string error;
};

// A scenario process's output: "name<TAB>literal" lines.
void parse_metrics(const std::string& text, bench::metrics& m) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto tab = line.find('\t');
        if (tab == std::string::npos) continue;
        m.raw(line.substr(0, tab), line.substr(tab + 1));
    }
}

// The redis-benchmark baseline a paired scenario is compared with: the
// 1-client EVALSHA for S1, the 50-client one for S2.
std::string paired_baseline(const std::string& scenario) {
    return scenario == "s1" ? "evalsha_c1" : "evalsha_c50";
}

// S1 or S2 from rounds that scripts/bench.sh ran, each beside an EVALSHA
// sample (1 client for S1, 50 for S2): on a shared VM the machine's speed
// drifts within seconds, so each round is compared with the sample taken
// beside it, and the ratio (2 x cycles/s / sample ops/s) is the median of
// the rounds' ratios. The figures reported (cycles/s, p50, p99) are the
// median round's; every round's ratio, figure and baseline sample are kept,
// the samples under the baseline's name (evalsha_c1 or evalsha_c50).
scenario_run from_rounds(const std::string& name,
                         const std::vector<std::pair<std::string, double>>& rounds) {
    scenario_run r;
    r.name = name;
    const std::string label = name == "s1" ? "S1" : "S2";
    const std::string sample = paired_baseline(name);
    struct round {
        bench::metrics m;
        double baseline = 0, ratio = std::nan("");
    };
    std::vector<round> all;
    for (const auto& [file, ops] : rounds) {
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        round x;
        parse_metrics(text.str(), x.m);
        x.baseline = ops;
        x.ratio = 2 * x.m.get("cycles_per_s") / ops;
        if (!std::isfinite(x.ratio) || !(x.m.get("cycles_per_s") > 0)) {
            r.error = label + " round " + file + " has no result (or no baseline sample)";
            return r;
        }
        if (x.m.get("errors") > 0) {
            r.error = label + " round " + file + " had failed cycles";
            return r;
        }
        all.push_back(std::move(x));
    }
    if (all.empty()) {
        r.error = "no " + label + " rounds";
        return r;
    }
    std::vector<std::size_t> order(all.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return all[a].ratio < all[b].ratio; });
    // With an even count this is the lower of the two middle rounds: the
    // stricter one for a ">=" target. bench.sh runs an odd count.
    const round& median = all[order[(order.size() - 1) / 2]];
    r.m = median.m;
    std::vector<double> ratios, cycles, baselines;
    for (const auto& x : all) {
        ratios.push_back(x.ratio);
        cycles.push_back(x.m.get("cycles_per_s"));
        baselines.push_back(x.baseline);
    }
    r.m.count("rounds", all.size());
    r.m.number("paired_" + sample + "_ops_per_s", median.baseline);
    r.m.number("ratio_median", median.ratio);
    r.m.number("ratio_min", all[order.front()].ratio);
    r.m.number("ratio_max", all[order.back()].ratio);
    r.m.list("round_ratios", ratios);
    r.m.list("round_cycles_per_s", cycles);
    r.m.list("round_" + sample + "_ops_per_s", baselines);
    r.ok = true;
    return r;
}

scenario_run run_child(const cli& c, const bench::scenario_info& s) {
    scenario_run r;
    r.name = std::string(s.name);
    const auto t0 = clock::now();
    std::vector<std::string> argv{c.opts.self_exe, "--port", std::to_string(c.opts.port), "--mode",
                                  std::string(bench::to_string(c.opts.mode)), "--scenario",
                                  std::string(s.name)};
    if (!c.opts.data_dir.empty()) {
        argv.push_back("--data-dir");
        argv.push_back(c.opts.data_dir);
    }
    if (c.flush) argv.push_back("--flush");
    bench::child ch = bench::spawn_child(argv);
    bench::collect_children({&ch}, t0 + std::chrono::seconds(s.time_limit_s));
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    parse_metrics(ch.out, r.m);
    r.ok = ch.exit_status == 0;
    if (ch.killed)
        r.error = "killed after the " + std::to_string(s.time_limit_s) + " s limit";
    else if (!r.ok)
        r.error = "exit status " + std::to_string(ch.exit_status);
    return r;
}

struct target {
    std::string id;
    std::string what;
    double value;
    std::string op;  // ">=", "<=", "=="
    double limit;
    std::string unit;
    bool known() const { return std::isfinite(value); }
    bool met() const {
        if (!known()) return false;
        if (op == ">=") return value >= limit;
        if (op == "<=") return value <= limit;
        return value == limit;
    }
};

std::string fmt(double v, int precision = 3) {
    if (!std::isfinite(v)) return "n/a";
    char buf[64];
    if (std::fabs(v) >= 1000)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    return buf;
}

int orchestrate(const cli& c) {
    const auto t_start = clock::now();
    std::map<std::string, std::string> machine = c.setup;
    machine["nproc"] = std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
    machine["cpu_model"] = cpu_model();
    utsname u{};
    if (::uname(&u) == 0) machine["kernel"] = std::string(u.sysname) + " " + u.release;
    machine["loadavg_at_start"] = loadavg();
    corolock::command info_cmd{"INFO", "server"};
    const auto info = one_command(c.opts, std::move(info_cmd));
    if (!info) {
        std::cerr << "corolock_bench: no redis-server answers on 127.0.0.1:" << c.opts.port << "\n";
        return 1;
    }
    machine["redis_server"] = info_field(info->str, "redis_version");

    std::vector<scenario_run> runs;
    bool all_ok = true;
    for (const auto& s : bench::scenarios()) {
        if (!c.only.empty() && std::find(c.only.begin(), c.only.end(), s.name) == c.only.end())
            continue;
        if (const auto it = c.rounds.find(std::string(s.name)); it != c.rounds.end()) {
            auto r = from_rounds(it->first, it->second);
            std::cerr << "corolock_bench: " << s.name << " from " << it->second.size()
                      << " paired rounds"
                      << (r.ok ? "" : " FAILED: " + r.error) << "\n";
            all_ok = all_ok && r.ok;
            runs.push_back(std::move(r));
            continue;
        }
        if (c.flush) {
            corolock::command flush{"FLUSHALL"};
            one_command(c.opts, std::move(flush));
        }
        std::cerr << "corolock_bench: " << s.name << " ..." << std::flush;
        auto r = run_child(c, s);
        std::cerr << " " << fmt(r.seconds) << " s" << (r.ok ? "" : " FAILED: " + r.error) << "\n";
        all_ok = all_ok && r.ok;
        runs.push_back(std::move(r));
    }
    machine["loadavg_at_end"] = loadavg();

    auto metric = [&](const std::string& scenario, const std::string& key) {
        for (const auto& r : runs)
            if (r.name == scenario) return r.m.get(key);
        return std::nan("");
    };
    auto base = [&](const std::string& name) {
        const auto it = c.baselines.find(name);
        return it == c.baselines.end() ? baseline{} : it->second;
    };

    // The targets of issue 5, each as a value compared with a limit.
    const double s5_locks = metric("s5", "locks");
    // Paired rounds (see from_rounds) when scripts/bench.sh ran them.
    auto paired_ratio = [&](const std::string& scenario) {
        const double median = metric(scenario, "ratio_median");
        if (std::isfinite(median)) return median;
        return 2 * metric(scenario, "cycles_per_s") / base(paired_baseline(scenario)).ops_per_s;
    };
    const double s1_ratio = paired_ratio("s1");
    const double s2_ratio = paired_ratio("s2");
    std::vector<target> targets = {
        {"S1", "2 x cycles/s / EVALSHA 1-client ops/s", s1_ratio, ">=", 0.9, "x"},
        {"S2", "2 x cycles/s / EVALSHA 50-client ops/s", s2_ratio, ">=", 2.0, "x"},
        {"S3", "handoff p50 / PING p50", metric("s3", "handoff_p50_us") / (base("ping_c1").p50_ms * 1000), "<=", 5.0, "x"},
        {"S3", "least task share / mean share", metric("s3", "min_share_of_mean"), ">=", 0.25, "x"},
        {"S3", "counter == acquisitions", metric("s3", "counter_ok"), "==", 1, "bool"},
        {"F1", "fair handoff p50 / PING p50", metric("fair_handoff", "fair_handoff_p50_us") / (base("ping_c1").p50_ms * 1000), "<=", 1.5, "x"},
        {"F1", "fair handoff p50 / mutex handoff p50 (same run)", metric("fair_handoff", "fair_handoff_p50_us") / metric("fair_handoff", "mutex_handoff_p50_us"), "<=", 1.2, "x"},
        {"S4", "SUBSCRIBE commands for all waiters", metric("s4", "subscribe_commands"), "==", 1, ""},
        {"S4", "Redis commands per handoff", metric("s4", "server_commands_per_handoff"), "<=", 4, ""},
        {"S4", "RSS growth per waiter (waves of 500)", metric("s4", "rss_per_waiter_bytes"), "<=", 2048, "B"},
        {"S4", "RSS growth per waiter (all at once)", metric("s4_burst", "rss_per_waiter_bytes"), "<=", 2048, "B"},
        {"S5", "renewal round trips per period", metric("s5", "round_trips_per_period"), "<=", s5_locks / 50, ""},
        {"S5", "client CPU s per wall s", metric("s5", "cpu_s_per_wall_s"), "<=", 0.05, ""},
        {"S5", "RSS growth per held lock (256 in flight)", metric("s5", "rss_per_lock_bytes"), "<=", 1024, "B"},
        {"S5", "RSS growth per held lock (all at once)", metric("s5_burst", "rss_per_lock_bytes"), "<=", 1024, "B"},
        {"S5", "leases lost while held", metric("s5", "lost"), "==", 0, ""},
        {"S6", "heap allocations per cycle (fresh name)", metric("s6", "allocations_per_cycle_fresh_name"), "<=", 10, ""},
        {"SEM", "semaphore / mutex cycles/s, 64 coroutines", metric("sem", "ratio_fresh_median"), ">=", 0.8, "x"},
        {"RW", "2 x read-heavy shared cycles/s / EVALSHA 50-client ops/s", 2 * metric("rw", "cycles_per_s") / base("evalsha_c50").ops_per_s, ">=", 2.0, "x"},
        {"FENCE", "fenced SET p50 / plain SET p50", metric("fence", "fenced_over_set_p50"), "<=", 1.2, "x"},
        {"CHECK", "check_token p50 / PING p50", metric("fence", "check_over_ping_p50"), "<=", 1.3, "x"},
        {"ELECT", "resign-to-new-leader p50 / mutex handoff p50", metric("election", "resign_over_mutex_handoff_p50"), "<=", 1.2, "x"},
        {"ELECT", "failover after kill -9 beyond the lease, in PING round trips", metric("election", "failover_beyond_lease_rtts"), "<=", 2, ""},
    };
    const double wall = std::chrono::duration<double>(clock::now() - t_start).count();

    // ---- JSON ----
    std::ostringstream js;
    js << "{\n  \"schema\": \"corolock-bench/1\",\n";
    js << "  \"mode\": " << bench::json_quote(bench::to_string(c.opts.mode)) << ",\n";
    js << "  \"machine\": {";
    bool first = true;
    for (const auto& [k, v] : machine) {
        js << (first ? "\n" : ",\n") << "    " << bench::json_quote(k) << ": ";
        if (k == "nproc")
            js << v;
        else
            js << bench::json_quote(v);
        first = false;
    }
    js << "\n  },\n  \"baselines\": {";
    first = true;
    for (const auto& [k, b] : c.baselines) {
        js << (first ? "\n" : ",\n") << "    " << bench::json_quote(k) << ": {\"ops_per_s\": "
           << bench::json_number(b.ops_per_s) << ", \"p50_ms\": " << bench::json_number(b.p50_ms) << "}";
        first = false;
    }
    js << "\n  },\n  \"scenarios\": {";
    first = true;
    for (const auto& r : runs) {
        js << (first ? "\n" : ",\n") << "    " << bench::json_quote(r.name) << ": {";
        js << "\n      \"ok\": " << (r.ok ? "true" : "false") << ",\n      \"process_seconds\": "
           << bench::json_number(r.seconds);
        if (!r.error.empty()) js << ",\n      \"failure\": " << bench::json_quote(r.error);
        for (const auto& [k, v] : r.m.items()) js << ",\n      " << bench::json_quote(k) << ": " << v;
        js << "\n    }";
        first = false;
    }
    js << "\n  },\n  \"targets\": [";
    first = true;
    for (const auto& t : targets) {
        js << (first ? "\n" : ",\n") << "    {\"scenario\": " << bench::json_quote(t.id)
           << ", \"what\": " << bench::json_quote(t.what) << ", \"value\": " << bench::json_number(t.value)
           << ", \"op\": " << bench::json_quote(t.op) << ", \"limit\": " << bench::json_number(t.limit)
           << ", \"met\": " << (t.met() ? "true" : "false") << "}";
        first = false;
    }
    js << "\n  ],\n  \"wall_seconds\": " << bench::json_number(wall) << "\n}\n";
    if (!c.out_file.empty()) {
        std::ofstream out(c.out_file);
        out << js.str();
        if (!out) {
            std::cerr << "corolock_bench: cannot write " << c.out_file << "\n";
            return 1;
        }
    } else {
        std::cout << js.str();
    }

    // ---- table (stdout) and the same as Markdown (data dir) ----
    std::ostringstream md;
    md << "| Scenario | Measure | Value | Target | Met |\n|---|---|---|---|---|\n";
    auto line = [&](const std::string& s, const std::string& what, const std::string& value,
                    const std::string& tgt, const std::string& met) {
        std::printf("%-6s %-50s %14s  %-12s %s\n", s.c_str(), what.c_str(), value.c_str(), tgt.c_str(),
                    met.c_str());
        md << "| " << s << " | " << what << " | " << value << " | " << tgt << " | " << met << " |\n";
    };
    std::FILE* tty = stdout;
    std::fprintf(tty, "\ncorolock benchmarks (%s): %s cores, %s, redis-server %s\n",
                 std::string(bench::to_string(c.opts.mode)).c_str(), machine["nproc"].c_str(),
                 machine["cpu_model"].c_str(), machine["redis_server"].c_str());
    std::printf("%-6s %-50s %14s  %-12s %s\n", "", "measure", "value", "target", "met");
    auto b = [&](const std::string& name, const std::string& what) {
        const auto bl = base(name);
        line("base", what + " ops/s", fmt(bl.ops_per_s), "", "");
        if (name == "ping_c1" || name == "evalsha_c1") line("base", what + " p50 ms", fmt(bl.p50_ms), "", "");
    };
    b("ping_c1", "PING, 1 client");
    b("evalsha_c1", "EVALSHA acquire, 1 client");
    b("evalsha_c50", "EVALSHA acquire, 50 clients");
    b("evalsha_c50_p16", "EVALSHA acquire, 50 clients, pipeline 16");
    line("ping", "raw socket PING p50 us", fmt(metric("ping", "raw_ping_p50_us")), "", "");
    line("ping", "corolock client PING p50 us", fmt(metric("ping", "client_ping_p50_us")), "", "");
    // Every round's ratio is in the JSON; the table gives their range.
    auto paired_lines = [&](const std::string& scenario, const std::string& id,
                            const std::string& clients) {
        if (!std::isfinite(metric(scenario, "rounds"))) return;
        line(id, "paired rounds: ratio min / median / max",
             fmt(metric(scenario, "ratio_min")) + " / " + fmt(metric(scenario, "ratio_median")) +
                 " / " + fmt(metric(scenario, "ratio_max")),
             "", "");
        line(id, "median round: EVALSHA " + clients + " sample ops/s",
             fmt(metric(scenario, "paired_" + paired_baseline(scenario) + "_ops_per_s")), "", "");
    };
    if (const auto it = machine.find("s1_placement"); it != machine.end())
        std::printf("S1 placement: %s\n", it->second.c_str());
    line("S1", "cycles/s, 1 coroutine", fmt(metric("s1", "cycles_per_s")), "", "");
    line("S1", "cycle p50 / p99 us",
         fmt(metric("s1", "cycle_p50_us")) + " / " + fmt(metric("s1", "cycle_p99_us")), "", "");
    paired_lines("s1", "S1", "1-client");
    line("S2", "cycles/s, 64 coroutines", fmt(metric("s2", "cycles_per_s")), "", "");
    paired_lines("s2", "S2", "50-client");
    line("S2", "2 x cycles/s / EVALSHA 50 clients pipelined 16",
         fmt(2 * metric("s2", "cycles_per_s") / base("evalsha_c50_p16").ops_per_s), "", "");
    for (int n : {1, 4, 16, 64, 256})
        line("sweep", "cycles/s, " + std::to_string(n) + " coroutines",
             fmt(metric("sweep", "c" + std::to_string(n) + "_cycles_per_s")), "", "");
    line("S3", "acquisitions/s, 2 processes x 4", fmt(metric("s3", "acquisitions_per_s")), "", "");
    line("S3", "handoff p50 / p99 us",
         fmt(metric("s3", "handoff_p50_us")) + " / " + fmt(metric("s3", "handoff_p99_us")), "", "");
    line("F1", "fair handoff p50 / client PING p50, one process",
         fmt(metric("fair_handoff", "fair_over_ping_p50")), "", "");
    line("F1", "handoff p50 us: fair / mutex / PING",
         fmt(metric("fair_handoff", "fair_handoff_p50_us")) + " / " +
             fmt(metric("fair_handoff", "mutex_handoff_p50_us")) + " / " +
             fmt(metric("fair_handoff", "ping_p50_us")),
         "", "");
    line("S4", "handoffs/s through 10k waiters", fmt(metric("s4", "handoffs_per_s")), "", "");
    line("S4", "live heap per waiter (waves / all at once) B",
         fmt(metric("s4", "live_heap_per_waiter_bytes")) + " / " +
             fmt(metric("s4_burst", "live_heap_per_waiter_bytes")), "", "");
    line("S5", "live heap per held lock (256 / all at once) B",
         fmt(metric("s5", "live_heap_per_lock_bytes")) + " / " +
             fmt(metric("s5_burst", "live_heap_per_lock_bytes")), "", "");
    line("S5", "renewal commands per period", fmt(metric("s5", "commands_per_period")), "", "");
    line("SEM", "cycles/s: mutex / semaphore / semaphore on one name",
         fmt(metric("sem", "mutex_cycles_per_s")) + " / " + fmt(metric("sem", "sem_fresh_cycles_per_s")) +
             " / " + fmt(metric("sem", "sem_one_cycles_per_s")), "", "");
    line("S6", "heap allocations per cycle (reused handle)",
         fmt(metric("s6", "allocations_per_cycle_reused_handle")), "", "");
    for (const auto& t : targets) {
        const std::string tgt = t.op + " " + fmt(t.limit) + (t.unit == "B" ? " B" : "");
        line(t.id, t.what, fmt(t.value) + (t.unit == "B" ? " B" : ""), tgt,
             t.known() ? (t.met() ? "yes" : "MISSED") : "n/a");
    }
    for (const auto& r : runs)
        if (!r.ok) std::printf("scenario %s failed: %s\n", r.name.c_str(), r.error.c_str());
    std::printf("total %.1f s\n", wall);
    if (!c.opts.data_dir.empty()) std::ofstream(c.opts.data_dir + "/bench-table.md") << md.str();
    return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        cli c = parse_args(argc, argv);
        c.opts.self_exe = self_exe();
        if (c.load_script) return bench::load_acquire_script(c.opts);
        if (!c.worker.empty()) {
            if (c.worker != "s3") throw std::invalid_argument("unknown worker " + c.worker);
            return bench::run_worker_process(c.opts, c.worker_args);
        }
        if (!c.scenario.empty()) return bench::run_scenario_process(c.opts, c.scenario);
        return orchestrate(c);
    } catch (const std::exception& e) {
        std::cerr << "corolock_bench: " << e.what() << "\n";
        return 2;
    }
}
