// FENCE: what the fences cost a writer (docs/fencing.md), each against its
// floor measured in the same rounds on the same client and server:
//  - a fenced SET (corolock::async_fenced_exec: one FCALL of the corolock
//    library) against the plain SET it guards: the server's least work for
//    the write itself;
//  - the sequencer check (corolock::async_check_token on a held lock)
//    against a PING: one round trip.
// The four requests run in turn, one at a time, so that a slow moment of the
// machine falls on all of them alike; the ratios of the medians are reported.
#include "bench.hpp"

#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

double to_us(clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Runs op once, adds its time in µs to us, and throws on an error.
template <class Op>
asio::awaitable<void> timed(std::vector<double>& us, const char* what, Op op) {
    const auto t0 = clock::now();
    auto [ec, r] = co_await op();
    us.push_back(to_us(clock::now() - t0));
    if (ec) throw boost::system::system_error(ec, what);
}

}  // namespace

asio::awaitable<void> scenario_fence(const options& o, metrics& m) {
    auto ex = co_await asio::this_coro::executor;
    corolock::config cfg;
    cfg.host = "127.0.0.1";  // benchmarks only ever talk to a local throwaway server
    cfg.port = o.port;
    cfg.connect_timeout = 20s;
    corolock::client c{ex, cfg};
    const auto run = pick<clock::duration>(o, 2s, 1s, 100ms);
    const std::string fence_key = "bench:{fence}:fence";
    const std::string data_key = "bench:{fence}:data";

    // Set-up, outside the clock: the library loaded, a lock held for the check.
    auto [iec, ir] = co_await corolock::async_fence_install(c, use_nothrow);
    if (iec) throw boost::system::system_error(iec, "fence install: " + corolock::to_string(ir));
    corolock::mutex lock{c, "bench:fence:check"};
    corolock::lock_options held;  // named: g++ 12 destroys a braced temporary twice
    held.lease = 30s;
    auto guard = co_await lock.acquire(held);
    const auto token = guard.token();

    std::vector<double> set_us, fenced_us, ping_us, check_us;
    const auto end = clock::now() + run;
    for (int i = 0; i < 1'000'000 && (i < min_rounds || clock::now() < end); ++i) {
        const std::string value = std::to_string(i);
        co_await timed(set_us, "SET", [&] {
            return c.async_exec(corolock::command{"SET", data_key, value}, use_nothrow);
        });
        co_await timed(fenced_us, "fenced SET", [&] {
            return corolock::async_fenced_exec(c, fence_key, token,
                                               corolock::command{"SET", data_key, value},
                                               use_nothrow);
        });
        co_await timed(ping_us, "PING", [&] {
            return c.async_exec(corolock::command{"PING"}, use_nothrow);
        });
        co_await timed(check_us, "check_token", [&] {
            return corolock::async_check_token(c, "bench:fence:check", token, use_nothrow);
        });
    }
    co_await guard.release();
    c.stop();

    const auto set = summarize(std::move(set_us));
    const auto fenced = summarize(std::move(fenced_us));
    const auto ping = summarize(std::move(ping_us));
    const auto check = summarize(std::move(check_us));
    add_summary(m, "set", set);
    add_summary(m, "fenced_set", fenced);
    add_summary(m, "ping", ping);
    add_summary(m, "check_token", check);
    m.number("fenced_over_set_p50", set.p50 > 0 ? fenced.p50 / set.p50 : 0);
    m.number("check_over_ping_p50", ping.p50 > 0 ? check.p50 / ping.p50 : 0);
}

}  // namespace bench
