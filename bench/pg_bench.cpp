// corolock_bench_pg: the PostgreSQL backend against raw round trips to the
// same server, in the same run (docs/postgresql.md, "Measurements").
//
//   corolock_bench_pg URL [cycles] [held]
//
//  - floor: `SELECT 1` on one session through the backend's own libpq shell
//    (src/pg/connection.hpp), no lock logic; p50 of `cycles` round trips.
//  - uncontended cycle: acquire + release on one name, one coroutine (two
//    statements on a pooled session); p50, cycles/s, and p50 over two floors.
//  - handoff: a waiter blocked in the server's lock queue on a second
//    backend; from the holder's release call to the waiter's grant; p50 over
//    one floor.
//  - held: `held` locks held at once by one backend (one session each), and
//    the server's memory for them: the PSS of their server processes (read
//    from /proc, so run it on the server's machine, as root or as the user
//    running postgres).
// Benchmarks are not tests: nothing here asserts on speed.
#include "pg/connection.hpp"

#include <corolock/backend.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace pg = corolock::detail::pg;

namespace {

double p50_us(std::vector<clock_type::duration> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : std::chrono::duration<double, std::micro>(v[v.size() / 2]).count();
}

long pss_kb(const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/smaps_rollup");
    std::string key;
    long v = 0;
    while (in >> key) {
        if (key == "Pss:") {
            in >> v;
            return v;
        }
        in.ignore(1 << 20, '\n');
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: corolock_bench_pg URL [cycles] [held]\n";
        return 2;
    }
    const std::string url = argv[1];
    const int cycles = argc > 2 ? std::stoi(argv[2]) : 2000;
    const int held = argc > 3 ? std::stoi(argv[3]) : 100;
    asio::io_context ioc;
    corolock::backend a(ioc.get_executor(), url), b(ioc.get_executor(), url);
    int rc = 0;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        // Floor: SELECT 1 through the same shell.
        pg::url_parts parts;
        std::string why;
        pg::split_url(url, parts, why);
        auto raw = std::make_shared<pg::connection>(
            asio::make_strand(corolock::detail::inner_executor(ioc.get_executor())),
            std::make_shared<const pg::url_parts>(parts));
        if (auto ec = co_await raw->connect(5s, why)) {
            std::cerr << "connect: " << why << "\n";
            rc = 1;
            co_return;
        }
        std::vector<clock_type::duration> floor, cycle, handoff;
        for (int i = 0; i < cycles; ++i) {
            const auto t0 = clock_type::now();
            co_await raw->exec(pg::renew());
            floor.push_back(clock_type::now() - t0);
        }
        corolock::mutex m(a, "bench:cycle");
        const auto c0 = clock_type::now();
        for (int i = 0; i < cycles; ++i) {
            const auto t0 = clock_type::now();
            auto g = co_await m.acquire({.lease = 30s});
            co_await g.release();
            cycle.push_back(clock_type::now() - t0);
        }
        const double per_s = cycles / std::chrono::duration<double>(clock_type::now() - c0).count();

        // Handoff: the waiter is queued on the server before each release.
        corolock::mutex holder(a, "bench:handoff"), waiter(b, "bench:handoff");
        const int rounds = std::max(20, cycles / 20);
        for (int i = 0; i < rounds; ++i) {
            auto g = co_await holder.acquire({.lease = 30s});
            clock_type::time_point granted{};
            bool done = false;
            asio::co_spawn(co_await asio::this_coro::executor, [&]() -> asio::awaitable<void> {
                auto w = co_await waiter.acquire({.lease = 30s, .wait = 10s});
                granted = clock_type::now();
                co_await w.release();
                done = true;
            }, asio::detached);
            asio::steady_timer t(co_await asio::this_coro::executor, 5ms);
            co_await t.async_wait(asio::use_awaitable);  // the waiter reaches the queue
            const auto released = clock_type::now();
            co_await g.release();
            while (!done) {
                t.expires_after(200us);
                co_await t.async_wait(asio::use_awaitable);
            }
            handoff.push_back(granted - released);
        }

        // Many held locks: one session each.
        std::vector<std::unique_ptr<corolock::mutex>> handles;
        std::vector<corolock::guard> guards;
        for (int i = 0; i < held; ++i) {
            handles.push_back(std::make_unique<corolock::mutex>(a, "bench:held:" + std::to_string(i)));
            guards.push_back(co_await handles.back()->acquire({.lease = 30s}));
        }
        const auto pids = co_await raw->exec(
            {"SELECT pid::text FROM pg_stat_activity WHERE application_name LIKE 'corolock:%' "
             "AND state = 'idle'",
             {}});
        long total = 0, counted = 0;
        for (const auto& r : pids.rows)
            if (const long kb = r.at(0) ? pss_kb(*r[0]) : -1; kb > 0) {
                total += kb;
                ++counted;
            }
        for (auto& g : guards) co_await g.release();

        const double f = p50_us(floor);
        std::printf("floor SELECT 1 p50           %8.1f us\n", f);
        std::printf("uncontended cycle p50         %8.1f us  (%.0f cycles/s, %.2f x two floors)\n",
                    p50_us(cycle), per_s, p50_us(cycle) / (2 * f));
        std::printf("handoff p50                   %8.1f us  (%.2f x one floor, %d rounds)\n",
                    p50_us(handoff), p50_us(handoff) / f, rounds);
        std::printf("held locks                    %8d      (%zu sessions seen, PSS of %ld: %ld kB, %.0f kB each)\n",
                    held, pids.rows.size(), counted, total, counted ? double(total) / counted : 0.0);
        raw->close();
        a.stop();
        b.stop();
    }, [&](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "bench: " << x.what() << "\n";
            }
            rc = 1;
        }
    });
    ioc.run();
    return rc;
}
