#include "backend_bench.hpp"

#include "handoff.hpp"
#include "process.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
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
    int observes, failovers;  // ELECT
};

sizes sizes_for(run_mode mode) {
    switch (mode) {
    case run_mode::smoke: return {1, 20, 20, 300ms, 10, 1};
    case run_mode::quick: return {3, 200, 200, 2000ms, 100, 3};
    case run_mode::full: break;
    }
    return {7, 400, 400, 5000ms, 200, 5};
}

// Figures as they come: a line on stdout, and kept for the JSON.
struct figures {
    metrics m;
    void put(const std::string& key, double v) {
        m.number(key, v);
        std::cout << key << '\t' << json_number(v) << std::endl;
    }
    void text(const std::string& key, std::string_view v) {
        m.text(key, v);
        std::cout << key << '\t' << v << std::endl;
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

// Two worker processes (this program, --worker --kind KIND) take turns on
// `name` for `contend`: a handoff is one process's release (resign) call to
// the other's acquire (campaign) returning. E3 and E4 (kind mutex), ELECT's
// resign to new leader (kind election). Blocks: the workers do not need
// this process's loop.
struct handoff_run {
    summary h;
    std::vector<int> per_process;
    double fairness() const {
        const int lo = *std::min_element(per_process.begin(), per_process.end());
        const int hi = *std::max_element(per_process.begin(), per_process.end());
        return hi > 0 ? static_cast<double>(lo) / hi : NAN;
    }
};

handoff_run process_handoffs(const std::string& self, const std::string& url, const std::string& kind,
                             const std::string& name, std::chrono::milliseconds contend) {
    // They start together, a little after this point (their own
    // connections first).
    const std::int64_t start = mono_ns() + 1'500'000'000LL;
    const std::int64_t end = start + std::chrono::nanoseconds(contend).count();
    std::vector<child> kids;
    for (int i = 0; i < 2; ++i)
        kids.push_back(spawn_child({self, "--worker", "--url", url, "--kind", kind, "--name", name,
                                    "--start-ns", std::to_string(start), "--end-ns",
                                    std::to_string(end)}));
    collect_children({&kids[0], &kids[1]}, clock::now() + contend + std::chrono::seconds(30));

    std::vector<grant> grants;
    handoff_run run{{}, std::vector<int>(kids.size(), 0)};
    for (std::size_t k = 0; k < kids.size(); ++k) {
        if (kids[k].exit_status != 0)
            throw std::runtime_error("a handoff worker (" + kind + ") failed:\n" + kids[k].out);
        std::istringstream in(kids[k].out);
        std::string tag;
        for (grant g{k, 0, 0}; in >> tag >> g.ok_ns >> g.release_ns;) {
            if (tag != "g") continue;
            grants.push_back(g);
            ++run.per_process[k];
        }
    }
    std::sort(grants.begin(), grants.end(),
              [](const grant& a, const grant& c) { return a.ok_ns < c.ok_ns; });
    std::vector<double> handoffs;
    for (std::size_t i = 1; i < grants.size(); ++i) {
        if (grants[i].process != grants[i - 1].process)
            handoffs.push_back(static_cast<double>(grants[i].ok_ns - grants[i - 1].release_ns) / 1e3);
    }
    run.h = summarize(handoffs);
    return run;
}

// ELECT's observe: a leader proclaims a new value, an observer on a backend
// of its own (its own connection) reports it; µs from the proclaim call to
// the report, each round with the observe already waiting; and µs from the
// proclaim call to its completion.
struct observe_times {
    std::vector<double> observe, proclaim;
};

asio::awaitable<observe_times> observe_sample(std::string url, std::string name, int n,
                                              std::chrono::milliseconds bound) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend lb(ex, url), ob(ex, url);
    corolock::election leader_side{lb, name}, observer_side{ob, name};
    auto term = co_await leader_side.campaign("0", {.lease = 10s, .wait = 10s});
    auto [fec, first] = co_await observer_side.async_observe(use_nothrow);  // the current term
    if (fec) throw std::runtime_error("observe: " + fec.message());
    observe_times us;
    const auto end = clock::now() + bound;
    for (int i = 1; i <= n && (i <= min_rounds || clock::now() < end); ++i) {
        const std::string value = std::to_string(i);
        const auto t0 = mono_ns();
        std::int64_t seen = 0;
        bool finished = false;  // the observer may report before the proclaim completes
        // At most 10 s for the observer to report it (a failed round ends
        // the program: the coroutine below still refers to these).
        asio::steady_timer done(ex, 10s);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            for (int k = 0; k < 100; ++k) {
                auto [oec, st] = co_await observer_side.async_observe(use_nothrow);
                if (oec) break;
                if (st && st->value == value) {
                    seen = mono_ns();
                    break;
                }
            }
            finished = true;
            done.cancel();
        }, asio::detached);
        auto [pec] = co_await term.async_proclaim(value, use_nothrow);
        if (pec) throw std::runtime_error("proclaim: " + pec.message());
        us.proclaim.push_back(static_cast<double>(mono_ns() - t0) / 1e3);
        if (!finished) co_await done.async_wait(use_nothrow);
        if (seen == 0) throw std::runtime_error("the observer never reported the value proclaimed");
        us.observe.push_back(static_cast<double>(seen - t0) / 1e3);
    }
    co_await term.async_resign(use_nothrow);
    lb.stop();
    ob.stop();
    co_return us;
}

// One ELECT failover round: a leader in a child process (--lead) is killed
// with SIGKILL while a candidate on a backend of this process waits; µs
// from the kill to the candidate's term, and from what ends the dead term
// on this server to it. nullopt on a failed round (error says why).
struct failover_times {
    double after_kill_us = 0;
    double beyond_floor_us = 0;
};

asio::awaitable<std::optional<failover_times>> failover_round(const backend_bench& b, std::string self,
                                                              std::string url, std::string name,
                                                              std::string& error) {
    auto ex = co_await asio::this_coro::executor;
    std::string lead_url = url;
    if (!b.failover_url_query.empty())
        lead_url += (url.find('?') == std::string::npos ? "?" : "&") + b.failover_url_query;
    child leader = spawn_child({self, "--lead", "--url", lead_url, "--name", name, "--lease-ms",
                                std::to_string(b.failover_lease.count())});
    // Killed and reaped by its PID on every way out of this round.
    struct reaper {
        pid_t pid;
        ~reaper() {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    } reap{leader.pid};
    asio::posix::stream_descriptor out(ex, leader.out_fd);  // closes the pipe
    leader.out_fd = -1;
    // Its line once it leads ("led <CLOCK_MONOTONIC ns>"), within 30 s.
    std::string line;
    {
        asio::steady_timer limit(ex, 30s);
        limit.async_wait([&out](corolock::error_code ec) {
            if (!ec) out.cancel();
        });
        co_await asio::async_read_until(out, asio::dynamic_buffer(line), '\n', use_nothrow);
        limit.cancel();
    }
    std::istringstream in(line);
    std::string tag;
    std::int64_t led_ns = 0;
    if (!(in >> tag >> led_ns) || tag != "led") {
        error += "the leader to kill never led; ";
        co_return std::nullopt;
    }

    // The successor campaigns on a backend of its own, and is queued when
    // the leader is killed: two reads of the leader after its campaign
    // began, each seeing the doomed one lead.
    corolock::backend cb(ex, url);
    corolock::election successor{cb, name}, reader{cb, name};
    std::optional<corolock::leadership> term;
    std::int64_t won_ns = 0;
    std::string successor_error;
    asio::steady_timer won(ex, clock::time_point::max());
    successor.async_campaign("successor", {.lease = 10s, .wait = 30s},
                             [&](corolock::error_code ec, corolock::leadership t) {
                                 won_ns = mono_ns();
                                 if (ec) successor_error = ec.message();
                                 else term.emplace(std::move(t));
                                 won.cancel();
                             });
    bool doomed_led = true;
    for (int i = 0; i < 2; ++i) {
        auto [lec, st] = co_await reader.async_leader(use_nothrow);
        doomed_led = doomed_led && !lec && st && st->value == "doomed";
    }
    const std::int64_t killed_ns = mono_ns();
    ::kill(leader.pid, SIGKILL);
    // The campaign completes within its wait (30 s) at the latest.
    if (won_ns == 0) co_await won.async_wait(use_nothrow);
    if (term) co_await term->async_resign(use_nothrow);
    cb.stop();
    if (!doomed_led) error += "the leader to kill was not seen leading; ";
    if (!successor_error.empty()) error += "successor: " + successor_error + "; ";
    if (!doomed_led || !term) co_return std::nullopt;
    const std::int64_t lease_ns = std::chrono::nanoseconds(b.failover_lease).count();
    const std::int64_t floor_ns = b.dead_leader == dead_leader_ends::connection ? killed_ns : led_ns + lease_ns;
    co_return failover_times{static_cast<double>(won_ns - killed_ns) / 1e3,
                             static_cast<double>(won_ns - floor_ns) / 1e3};
}

const char* to_string(dead_leader_ends e) {
    switch (e) {
    case dead_leader_ends::lease: return "lease";
    case dead_leader_ends::session: return "session";
    case dead_leader_ends::connection: return "connection";
    }
    return "?";
}

// ELECT: leader election's figures, each against its floor in this run.
asio::awaitable<void> election_figures(const backend_bench& b, std::string self, std::string url,
                                       const sizes& s, raw_client& raw, summary mutex_handoff,
                                       figures& out) {
    const std::string id = std::to_string(::getpid());
    // Resign to new leader, right after the mutex's handoff (E3) and by
    // the same workers.
    const auto resign = process_handoffs(self, url, "election", "bench/elect/handoff/" + id, s.contend);
    out.put("resign_handoffs", static_cast<double>(resign.h.n));
    out.put("resign_handoff_p50_us", resign.h.p50);
    out.put("resign_handoff_p90_us", resign.h.p90);
    out.put("resign_handoff_p99_us", resign.h.p99);
    out.put("resign_over_mutex_handoff_p50", resign.h.p50 / mutex_handoff.p50);
    out.put("resign_fairness_min_over_max", resign.fairness());

    // The floor for observe and failover, right before them.
    const double rtt = median(co_await floor_sample(raw, s.rtts));
    out.put("elect_rtt_us", rtt);

    const auto times = co_await observe_sample(url, "bench/elect/observe/" + id, s.observes, s.contend);
    const auto observe = summarize(times.observe);
    const auto proclaim = summarize(times.proclaim);
    out.put("observes", static_cast<double>(observe.n));
    out.put("observe_p50_us", observe.p50);
    out.put("observe_p99_us", observe.p99);
    out.put("observe_over_rtt", observe.p50 / rtt);
    // What a campaign adds to the mutex's acquire: the leader's value written.
    out.put("proclaim_p50_us", proclaim.p50);
    out.put("proclaim_over_rtt", proclaim.p50 / rtt);

    std::vector<double> after_kill, beyond;
    std::string error;
    for (int i = 0; i < s.failovers; ++i) {
        const auto r = co_await failover_round(
            b, self, url, "bench/elect/failover/" + id + "/" + std::to_string(i), error);
        if (!r) continue;
        after_kill.push_back(r->after_kill_us);
        beyond.push_back(r->beyond_floor_us);
    }
    const auto k = summarize(after_kill);
    const auto f = summarize(beyond);
    out.text("dead_leader_ends", to_string(b.dead_leader));
    out.put("failover_lease_ms", static_cast<double>(b.failover_lease.count()));
    out.put("failovers", static_cast<double>(k.n));
    out.put("failover_after_kill_p50_us", k.n ? k.p50 : NAN);
    out.put("failover_after_kill_max_us", k.n ? k.max : NAN);
    out.put("failover_beyond_floor_p50_us", f.n ? f.p50 : NAN);
    out.put("failover_beyond_floor_max_us", f.n ? f.max : NAN);
    // The worst round, since a failover happens once; the target is 2.
    out.put("failover_beyond_floor_rtts_max", f.n ? f.max / rtt : NAN);
    if (!error.empty()) {
        out.text("elect_errors", error);
        if (k.n == 0) throw std::runtime_error("every failover round failed: " + error);
    }
}

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

    // Handoff and fairness: two processes on one name.
    const double rtt_before = median(co_await floor_sample(*raw, s.rtts));
    const auto mutex_run = process_handoffs(self, url, "mutex", "bench/handoff", s.contend);
    const double rtt_after = median(co_await floor_sample(*raw, s.rtts));
    const double rtt = median({rtt_before, rtt_after});
    const auto& h = mutex_run.h;
    out.put("handoff_rtt_us", rtt);
    out.put("handoffs", static_cast<double>(h.n));
    out.put("handoff_p50_us", h.p50);
    out.put("handoff_p90_us", h.p90);
    out.put("handoff_p99_us", h.p99);
    out.put("handoff_over_rtt", h.p50 / rtt);
    out.put("grants_process_a", mutex_run.per_process[0]);
    out.put("grants_process_b", mutex_run.per_process[1]);
    out.put("fairness_min_over_max", mutex_run.fairness());

    co_await election_figures(b, self, url, s, *raw, h, out);

    if (b.extra) {
        const auto before = out.m.items().size();
        co_await b.extra(ex, url, mode, opt, out.m);
        for (auto i = before; i < out.m.items().size(); ++i)
            std::cout << out.m.items()[i].first << '\t' << out.m.items()[i].second << std::endl;
    }
    lib.stop();
    raw->stop();
}

// A handoff worker: takes turns on `name` from start to end, one line per
// grant. Lock is corolock::mutex or candidate (handoff.hpp): acquire and
// release, or campaign and resign.
// (Coroutine parameters by value: a reference would outlive its argument.)
template <class Lock>
asio::awaitable<void> work(std::string url, std::string name, std::int64_t start, std::int64_t end) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend lib(ex, url);
    Lock m(lib, name);
    asio::steady_timer t(ex, std::chrono::nanoseconds(std::max<std::int64_t>(0, start - mono_ns())));
    co_await t.async_wait(use_nothrow);
    std::ostringstream lines;
    for (int i = 0; i < 1'000'000 && (i < min_rounds || mono_ns() < end); ++i) {
        auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 10s}, use_nothrow);
        if (ec) throw std::runtime_error("acquire: " + ec.message());
        const auto ok = mono_ns();
        const auto rel = mono_ns();
        if (const auto [rec] = co_await give_up(g); rec)
            throw std::runtime_error("release: " + rec.message());
        lines << "g " << ok << ' ' << rel << '\n';
    }
    std::cout << lines.str() << std::flush;
    lib.stop();
}

// ELECT's leader to kill: campaigns on `name`, prints "led <ns>" once it
// leads, and keeps its term until killed (60 s at most).
asio::awaitable<void> lead(std::string url, std::string name, std::chrono::milliseconds lease) {
    auto ex = co_await asio::this_coro::executor;
    corolock::backend lib(ex, url);
    corolock::election e(lib, name);
    auto term = co_await e.campaign("doomed", {.lease = lease, .wait = 20s});
    const auto led = mono_ns();
    std::cout << "led " << led << std::endl;
    asio::steady_timer t(ex, 60s);
    co_await t.async_wait(use_nothrow);
    co_await term.async_resign(use_nothrow);
    lib.stop();
}

}  // namespace

int run_backend_bench(int argc, char** argv, const backend_bench& b) {
    option_map opt;
    bool worker = false, leader = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--worker") worker = true;
        else if (a == "--lead") leader = true;
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
    if (worker && opt["kind"] == "election")
        asio::co_spawn(ioc, work<candidate>(opt["url"], opt["name"], std::stoll(opt["start-ns"]),
                                            std::stoll(opt["end-ns"])), done);
    else if (worker)
        asio::co_spawn(ioc, work<corolock::mutex>(opt["url"], opt["name"], std::stoll(opt["start-ns"]),
                                                  std::stoll(opt["end-ns"])), done);
    else if (leader)
        asio::co_spawn(ioc, lead(opt["url"], opt["name"], std::chrono::milliseconds(std::stoll(opt["lease-ms"]))),
                       done);
    else
        asio::co_spawn(ioc, orchestrate(b, argv[0], opt["url"], mode, opt, out), done);
    ioc.run_for(std::chrono::minutes(5));
    if (!worker && !leader && !opt["out"].empty()) {
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
