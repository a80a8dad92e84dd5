// ELECT: what leader election costs (docs/election.md, docs/benchmarks.md),
// each figure against its floor measured in the same run on the same server:
//  - resign to new leader: two candidates, each on its own client and
//    thread, take turns (campaign, lead for 16 PINGs, resign); the time from
//    the leader's resign call to the other's campaign completing, against
//    the plain mutex's handoff measured the same way (handoff.hpp);
//  - failover after kill -9: a leader in a child process (fork) is killed
//    with SIGKILL while a candidate waits; the time from the kill to the
//    candidate's term, against the lease plus two PING round trips (the
//    waiting candidate can only take over once the server ends the dead
//    term);
//  - observe: the time from a leader's proclaim call to an observer on
//    another client reporting the new value, against a PING.
#include "bench.hpp"
#include "handoff.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bench {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

double to_us(clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The child's side of a failover round: leads `name` with `lease`, writes
// one line to `fd` once leader, and waits to be killed (at most 60 s).
[[noreturn]] void lead_until_killed(const options& o, const std::string& name,
                                    clock::duration lease, int fd) {
    int status = 1;
    {
        asio::io_context ioc(1);
        corolock::client c{ioc.get_executor(), local_redis_config(o)};
        corolock::election e{c, name};
        std::optional<corolock::leadership> held;  // kept to the kill
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::lock_options opts;
            opts.lease = lease;
            opts.wait = 10s;
            auto [ec, term] = co_await e.async_campaign("doomed", opts, use_nothrow);
            if (ec) {
                c.stop();
                co_return;
            }
            const std::string line = std::to_string(mono_ns()) + "\n";  // when it won
            held.emplace(std::move(term));
            if (::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()))
                status = 0;
        }, asio::detached);
        ioc.run_for(60s);
    }
    ::_exit(status);
}

// One failover round: the time from the leader's kill to the waiting
// candidate's term, and from the end of the dead leader's lease (at most
// `lease` after its campaign completed: the server began it earlier) to
// that term, in µs; nullopt on a failed round (error says why).
struct failover_times {
    double after_kill_us = 0;
    double beyond_lease_us = 0;
};
std::optional<failover_times> failover_round(const options& o, const std::string& name, clock::duration lease,
                      std::string& error) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
        ::close(fds[0]);
        lead_until_killed(o, name, lease, fds[1]);
    }
    ::close(fds[1]);
    // The child leads: its line, within 20 s.
    pollfd p{fds[0], POLLIN, 0};
    char buf[32] = {};
    const bool led = ::poll(&p, 1, 20'000) == 1 && ::read(fds[0], buf, sizeof buf - 1) > 0;
    ::close(fds[0]);
    if (!led) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        error += "the child never led; ";
        return std::nullopt;
    }
    const std::int64_t child_won_ns = std::stoll(buf);
    // A candidate waits on its own thread; then the leader is killed.
    std::atomic<std::int64_t> won_ns{0};
    std::atomic<bool> queued{false};
    std::string cand_error;
    std::thread waiter([&] {
        asio::io_context ioc(1);
        corolock::client c{ioc.get_executor(), local_redis_config(o)};
        corolock::election e{c, name};
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            co_await c.async_exec(corolock::command{"PING"}, use_nothrow);
            corolock::lock_options opts;
            opts.lease = 10s;
            opts.wait = 30s;
            queued = true;
            auto [ec, term] = co_await e.async_campaign("successor", opts, use_nothrow);
            won_ns = mono_ns();
            if (ec) cand_error = ec.message();
            else co_await term.async_resign(use_nothrow);
            c.stop();
        }, asio::detached);
        ioc.run_for(60s);
    });
    for (int i = 0; i < 2000 && !queued; ++i) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // its campaign reaches the server's queue
    const std::int64_t killed_ns = mono_ns();
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    waiter.join();
    if (!cand_error.empty()) {
        error += "successor: " + cand_error + "; ";
        return std::nullopt;
    }
    const auto lease_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(lease).count();
    return failover_times{static_cast<double>(won_ns.load() - killed_ns) / 1e3,
                          static_cast<double>(won_ns.load() - (child_won_ns + lease_ns)) / 1e3};
}

}  // namespace

asio::awaitable<void> scenario_election(const options& o, metrics& m) {
    auto ex = co_await asio::this_coro::executor;
    const auto run = pick<clock::duration>(o, 3s, 1s, 200ms);
    const int failovers = pick<int>(o, 5, 3, 1);
    const auto lease = 1s;
    const std::string id = std::to_string(::getpid()) + "-" + std::to_string(mono_ns() % 1'000'000'000);
    std::string error;

    corolock::client c{ex, local_redis_config(o)};
    // PING, the round trip every figure is held against.
    std::vector<double> ping_us;
    {
        const auto end = clock::now() + run;
        for (int i = 0; i < 1'000'000 && (i < min_rounds || clock::now() < end); ++i) {
            const auto t0 = clock::now();
            auto [ec, r] = co_await c.async_exec(corolock::command{"PING"}, use_nothrow);
            if (ec) throw boost::system::system_error(ec, "PING");
            ping_us.push_back(to_us(clock::now() - t0));
        }
    }
    const auto ping = summarize(std::move(ping_us));

    // Observe: a leader proclaims, an observer on another client reports.
    std::vector<double> observe_us;
    {
        corolock::client oc{ex, local_redis_config(o)};
        corolock::election leader_side{c, "bench:elect:observe:" + id};
        corolock::election observer_side{oc, "bench:elect:observe:" + id};
        corolock::lock_options opts;
        opts.lease = 10s;
        auto term = co_await leader_side.campaign("0", opts);
        auto [fec, first] = co_await observer_side.async_observe(use_nothrow);  // the current term
        if (fec) throw boost::system::system_error(fec, "observe");
        const auto end = clock::now() + run;
        for (int i = 1; i < 100'000 && (i < min_rounds || clock::now() < end); ++i) {
            const std::string value = std::to_string(i);
            const auto t0 = clock::now();
            // The observe is waiting when the proclaim is sent.
            std::optional<clock::time_point> seen;
            bool finished = false;  // the observer may report before the proclaim completes
            asio::steady_timer done(ex, clock::time_point::max());
            asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
                for (int k = 0; k < 100; ++k) {
                    auto [oec, st] = co_await observer_side.async_observe(use_nothrow);
                    if (oec) break;
                    if (st && st->value == value) {
                        seen = clock::now();
                        break;
                    }
                }
                finished = true;
                done.cancel();
            }, asio::detached);
            auto [pec] = co_await term.async_proclaim(value, use_nothrow);
            if (pec) throw boost::system::system_error(pec, "proclaim");
            if (!finished) co_await done.async_wait(use_nothrow);
            if (!seen) throw std::runtime_error("the observer never saw the value proclaimed");
            observe_us.push_back(to_us(*seen - t0));
        }
        co_await term.async_resign(use_nothrow);
        oc.stop();
    }
    const auto observe = summarize(std::move(observe_us));

    // Resign to new leader, against the plain mutex's handoff.
    const auto resign = measure_handoff<candidate>(o, "bench:elect:handoff:" + id, run, error).handoff;
    const auto mutex = measure_handoff<corolock::mutex>(o, "bench:elect:mutex:" + id, run, error).handoff;

    // Failover after kill -9.
    std::vector<double> failover_us, beyond_us;
    for (int i = 0; i < failovers; ++i) {
        const auto r = failover_round(o, "bench:elect:failover:" + id + ":" + std::to_string(i),
                                      lease, error);
        if (!r) continue;
        failover_us.push_back(r->after_kill_us);
        beyond_us.push_back(r->beyond_lease_us);
    }
    const auto failover = summarize(std::move(failover_us));
    const auto beyond = summarize(std::move(beyond_us));
    c.stop();

    add_summary(m, "ping", ping);
    add_summary(m, "observe", observe);
    add_summary(m, "resign_handoff", resign);
    add_summary(m, "mutex_handoff", mutex);
    add_summary(m, "failover", failover);
    add_summary(m, "failover_beyond_lease", beyond);
    const double lease_us = to_us(lease);
    m.number("lease_us", lease_us);
    m.number("resign_over_mutex_handoff_p50", mutex.p50 > 0 ? resign.p50 / mutex.p50 : 0);
    m.number("observe_over_ping_p50", ping.p50 > 0 ? observe.p50 / ping.p50 : 0);
    // The next term's start beyond the dead leader's lease, in PING round
    // trips (the target: at most 2); the worst round, since a failover
    // happens once.
    m.number("failover_beyond_lease_rtts",
             ping.p50 > 0 && beyond.n > 0 ? beyond.max / ping.p50 : 0);
    if (!error.empty()) m.text("errors", error);
}

}  // namespace bench
