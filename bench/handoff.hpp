// The handoff measure that F1 (scenarios.cpp) and ELECT
// (election_scenario.cpp) share: two clients, each on a thread of its own
// (as two processes would be), pass one lock back and forth, holding it for
// 16 PINGs so that the other is waiting. Handoff: from the holder's release
// call to the waiter's acquire returning. A Lock is anything constructed
// from (client&, name) with async_acquire(lock_options, token) completing
// with (error_code, G), where give_up(G&) below releases it: a lock's
// guard, or an election's term (candidate below). The backend benches'
// handoff workers (backend_bench.cpp) take turns the same way, on a
// corolock::backend.
#pragma once

#include "bench.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bench {

inline constexpr auto handoff_nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);

// A client of the benchmark's local throwaway server.
inline corolock::config local_redis_config(const options& o) {
    corolock::config c;
    c.host = "127.0.0.1";  // benchmarks only ever talk to a local throwaway server
    c.port = o.port;
    // Generous: under heaptrack the first connect takes longer than the
    // default second.
    c.connect_timeout = std::chrono::seconds(20);
    return c;
}

inline auto give_up(corolock::guard& g) { return g.async_release(handoff_nothrow); }
inline auto give_up(corolock::leadership& l) { return l.async_resign(handoff_nothrow); }

// A candidate as a Lock: a campaign is its acquire, a resign its release
// (give_up). On a Redis client or on any corolock::backend.
struct candidate {
    corolock::election e;
    template <class Service>
    candidate(Service& s, const std::string& name) : e(s, name) {}
    template <class Token>
    auto async_acquire(corolock::lock_options opts, Token&& token) {
        return e.async_campaign("candidate", opts, std::forward<Token>(token));
    }
};

struct handoff_shared {
    std::atomic<std::int64_t> released_ns{0};
    std::atomic<int> turn{-1};
};

template <class Lock>
boost::asio::awaitable<void> handoff_task(corolock::client& c, const std::string& name,
                                          int self, handoff_shared& sh, clock::time_point end,
                                          std::vector<double>& us,
                                          std::vector<double>& release_us, std::string& error) {
    Lock m{c, name};
    corolock::lock_options opts;
    opts.lease = std::chrono::seconds(10);
    opts.wait = std::chrono::seconds(5);
    for (int i = 0; i < 100'000 && clock::now() < end; ++i) {
        auto [ec, g] = co_await m.async_acquire(opts, handoff_nothrow);
        const auto acquired = mono_ns();
        if (ec) {
            error = "acquire: " + ec.message();
            co_return;
        }
        if (sh.turn.exchange(self) != self && sh.released_ns.load() != 0)
            us.push_back(static_cast<double>(acquired - sh.released_ns.load()) / 1e3);
        // Holds for a few round trips (kept busy, as S3's critical section
        // is: an idle sleep would add the machine's wake-up latency to the
        // handoff), long enough for the other task to be waiting.
        for (int k = 0; k < 16; ++k) {
            auto [pec, pr] = co_await c.async_exec(corolock::command{"PING"}, handoff_nothrow);
            if (pec) {
                error = "PING: " + pec.message();
                co_return;
            }
        }
        const auto release_called = mono_ns();
        sh.released_ns.store(release_called);
        auto [rec] = co_await give_up(g);
        if (rec) {
            error = "release: " + rec.message();
            co_return;
        }
        release_us.push_back(static_cast<double>(mono_ns() - release_called) / 1e3);
    }
}

// The handoffs, and the holders' release calls (the release's round trip,
// which the handoff contains: the rest is the waiter's side).
struct handoff_times {
    summary handoff, release;
};

template <class Lock>
handoff_times measure_handoff(const options& o, const std::string& name, clock::duration run,
                              std::string& error) {
    handoff_shared sh;
    std::vector<double> us[2], release_us[2];
    std::string errors[2];
    const auto end = clock::now() + run;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&, t] {
            boost::asio::io_context ioc(1);
            corolock::client c{ioc.get_executor(), local_redis_config(o)};
            boost::asio::co_spawn(ioc, [&]() -> boost::asio::awaitable<void> {
                co_await c.async_exec(corolock::command{"PING"}, handoff_nothrow);
                co_await handoff_task<Lock>(c, name, t, sh, end, us[t], release_us[t],
                                            errors[t]);
                c.stop();
            }, boost::asio::detached);
            ioc.run_for(run + std::chrono::seconds(20));
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& e : errors)
        if (!e.empty()) error += e + "; ";
    us[0].insert(us[0].end(), us[1].begin(), us[1].end());
    release_us[0].insert(release_us[0].end(), release_us[1].begin(), release_us[1].end());
    return {summarize(std::move(us[0])), summarize(std::move(release_us[0]))};
}

}  // namespace bench
