// A lock client in its own process, for the multi-process tests.
//
//   lock_worker increment URL NAMES COUNTER_PREFIX TASKS ITERATIONS LEASE_MS [LOG]
//       TASKS coroutines, each with its own mutex handle, take turns on the
//       comma-separated lock NAMES; inside each critical section they do a
//       non-atomic GET/SET increment of COUNTER_PREFIX<name>, and check that
//       the fencing token exceeds the last one written (COUNTER_PREFIX<name>:last).
//       Prints "violations N" and exits 0 when done.
//   lock_worker hold URL NAME LEASE_MS
//       Acquires, prints "acquired TOKEN" and holds until killed.
//   lock_worker wait URL NAME WAIT_MS
//       Acquires (waiting up to WAIT_MS), prints "acquired TOKEN MONO_NS",
//       where MONO_NS is CLOCK_MONOTONIC at the moment acquire returned.
//
// Events go as JSON lines to LOG when given (the history checker's input).
#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

long long mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string part; std::getline(in, part, sep);) out.push_back(part);
    return out;
}

struct event_log {
    std::ofstream out;
    void write(const std::string& ev, int task, const std::string& lock, std::uint64_t token) {
        if (!out.is_open()) return;
        out << "{\"ev\":\"" << ev << "\",\"pid\":" << ::getpid() << ",\"task\":" << task
            << ",\"lock\":\"" << lock << "\",\"token\":" << token << ",\"t\":" << mono_ns()
            << "}\n";
    }
};

int usage() {
    std::cerr << "usage: lock_worker increment|hold|wait ...\n";
    return 64;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    const std::string mode = argv[1];
    asio::io_context ioc;
    int exit_code = 0;

    if (mode == "increment" && argc >= 8) {
        const std::string url = argv[2];
        const auto names = split(argv[3], ',');
        const std::string prefix = argv[4];
        const int tasks = std::stoi(argv[5]);
        const int iterations = std::stoi(argv[6]);
        const auto lease = std::chrono::milliseconds(std::stoi(argv[7]));
        event_log log;
        if (argc >= 9) log.out.open(argv[8], std::ios::app);
        corolock::client c(ioc.get_executor(), url);
        int done = 0;
        long violations = 0;
        for (int t = 0; t < tasks; ++t) {
            asio::co_spawn(ioc, [&, t]() -> asio::awaitable<void> {
                const std::string& name = names[static_cast<std::size_t>(t) % names.size()];
                corolock::mutex m(c, name);
                for (int i = 0; i < iterations; ++i) {
                    log.write("acquire_invoked", t, name, 0);
                    auto g = co_await m.acquire({.lease = lease, .wait = 60s});
                    log.write("acquire_ok", t, name, g.token());
                    auto last = co_await c.async_exec(corolock::command{"GET", prefix + name + ":last"},
                                                      asio::use_awaitable);
                    if (!last.is_null() && std::stoull(last.str) >= g.token()) ++violations;
                    co_await c.async_exec(corolock::command{"SET", prefix + name + ":last",
                                                            std::to_string(g.token())},
                                          asio::use_awaitable);
                    auto v = co_await c.async_exec(corolock::command{"GET", prefix + name},
                                                   asio::use_awaitable);
                    const long n = v.is_null() ? 0 : std::stol(v.str);
                    co_await c.async_exec(corolock::command{"SET", prefix + name, std::to_string(n + 1)},
                                          asio::use_awaitable);
                    log.write("release_invoked", t, name, g.token());
                    auto ec = co_await g.release();
                    if (ec) ++violations;
                    log.write("release_ok", t, name, g.token());
                }
                if (++done == tasks) c.stop();
            }, [&](std::exception_ptr e) {
                if (!e) return;
                try { std::rethrow_exception(e); } catch (const std::exception& ex) {
                    std::cerr << "task failed: " << ex.what() << "\n";
                }
                exit_code = 1;
                c.stop();
            });
        }
        ioc.run_for(120s);
        std::cout << "violations " << violations << std::endl;
        return exit_code != 0 ? exit_code : (done == tasks ? 0 : 2);
    }

    if (mode == "hold" && argc >= 5) {
        corolock::client c(ioc.get_executor(), std::string_view(argv[2]));
        const auto lease = std::chrono::milliseconds(std::stoi(argv[4]));
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, argv[3]);
            auto g = co_await m.acquire({.lease = lease, .wait = 30s});
            std::cout << "acquired " << g.token() << std::endl;
            asio::steady_timer forever(ioc, std::chrono::hours(1));
            co_await forever.async_wait(asio::use_awaitable);
        }, asio::detached);
        ioc.run_for(std::chrono::minutes(5));
        return 0;
    }

    if (mode == "wait" && argc >= 5) {
        corolock::client c(ioc.get_executor(), std::string_view(argv[2]));
        const auto wait = std::chrono::milliseconds(std::stoi(argv[4]));
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, argv[3]);
            std::cout << "waiting" << std::endl;
            auto [ec, g] = co_await m.async_acquire({.wait = wait}, asio::as_tuple(asio::use_awaitable));
            const auto t = mono_ns();
            if (ec) {
                std::cout << "failed " << ec.message() << std::endl;
                exit_code = 75;
            } else {
                std::cout << "acquired " << g.token() << " " << t << std::endl;
                co_await g.release();
            }
            c.stop();
        }, asio::detached);
        ioc.run_for(std::chrono::minutes(2));
        return exit_code;
    }
    return usage();
}
