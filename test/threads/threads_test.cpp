// Several threads run ONE io_context, and many coroutines on it share one
// client and its lock handles. The client keeps all of its state on an
// internal strand, so this must be correct with no extra locking by the
// caller; these tests are the ones scripts/sanitize.sh runs under
// ThreadSanitizer, which reports any unsynchronised access.
//
// Catch2 v2 assertions are not thread-safe: coroutines on the io threads
// only record what they saw (in atomics, or in data the lock under test
// protects), and every CHECK runs on the test's own thread.
#include <corolock/corolock.hpp>
#include "redis/lock/scripts.hpp"
#include "redlock/redlock_backend.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"
#include "support/redlock_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;
constexpr int io_thread_count = 4;

// Coroutines spawned on the io_context, counted, with their exceptions kept
// for the test's thread.
class task_group {
public:
    template <class F>
    void spawn(asio::io_context& ioc, F body) {
        ++pending_;
        asio::co_spawn(ioc, std::move(body), [this](std::exception_ptr e) {
            if (e) {
                std::lock_guard lock(mu_);
                failures_.push_back(e);
            }
            --pending_;
        });
    }
    bool done() const { return pending_.load() == 0; }
    // On the test's thread, once done().
    void rethrow() {
        std::lock_guard lock(mu_);
        if (!failures_.empty()) std::rethrow_exception(failures_.front());
    }

private:
    std::atomic<int> pending_{0};
    std::mutex mu_;
    std::vector<std::exception_ptr> failures_;
};

// `count` threads in ioc.run(), each bounded by limit.
class io_threads {
public:
    io_threads(asio::io_context& ioc, std::chrono::steady_clock::duration limit,
               int count = io_thread_count)
        : ioc_(ioc) {
        for (int i = 0; i < count; ++i)
            threads_.emplace_back([this, limit] { ioc_.run_for(limit); });
    }
    io_threads(const io_threads&) = delete;
    io_threads& operator=(const io_threads&) = delete;
    // A failed REQUIRE unwinds through here: do not wait out the limit.
    ~io_threads() {
        if (!threads_.empty()) {
            ioc_.stop();
            join();
        }
    }
    // Joins; true when the io_context ran out of work by itself (every
    // coroutine, timer and socket of the client gone), false when the
    // limit ended it.
    bool join() {
        for (auto& t : threads_) t.join();
        threads_.clear();
        return ioc_.stopped();
    }

private:
    asio::io_context& ioc_;
    std::vector<std::thread> threads_;
};

// The tests' client configuration, with a command timeout that leaves room
// for ThreadSanitizer's slowdown.
corolock::config threaded_config(const redis_server& server) {
    auto cfg = config_for(server);
    cfg.command_timeout = 10s;
    return cfg;
}

}  // namespace

TEST_CASE("threads: commands from many threads share one client and each gets its own reply",
          "[threads]") {
    redis_server server;
    asio::io_context ioc(io_thread_count);
    corolock::client c(ioc.get_executor(), threaded_config(server));
    constexpr int coroutines = 48, rounds = 40, foreign_threads = 2, foreign_rounds = 100;
    std::atomic<int> ok{0}, mismatched{0}, failed{0};
    task_group tasks;
    for (int i = 0; i < coroutines; ++i) {
        tasks.spawn(ioc, [&, i]() -> asio::awaitable<void> {
            for (int j = 0; j < rounds; ++j) {
                // A value only this command can get back: a reply matched to
                // the wrong command shows up as a mismatch.
                const std::string value = std::to_string(i) + ":" + std::to_string(j);
                auto [ec, r] = co_await c.async_exec(command{"ECHO", value}, use_nothrow);
                if (ec) ++failed;
                else if (r.str != value) ++mismatched;
                else ++ok;
                auto [iec, n] = co_await c.async_exec(command{"INCR", "threads:total"}, use_nothrow);
                if (iec || n.type != corolock::resp3_type::integer) ++failed;
            }
        });
    }
    io_threads threads(ioc, 120s);
    // Threads that run no io_context at all issue commands too, with callbacks.
    std::vector<std::thread> foreign;
    std::atomic<int> foreign_done{0};
    for (int t = 0; t < foreign_threads; ++t) {
        foreign.emplace_back([&, t] {
            for (int j = 0; j < foreign_rounds; ++j) {
                const std::string value = "foreign:" + std::to_string(t) + ":" + std::to_string(j);
                c.async_exec(command{"ECHO", value}, [&, value](error_code ec, corolock::reply r) {
                    if (ec) ++failed;
                    else if (r.str != value) ++mismatched;
                    else ++ok;
                    ++foreign_done;
                });
            }
        });
    }
    for (auto& t : foreign) t.join();
    const bool finished = wait_until(
        [&] { return tasks.done() && foreign_done == foreign_threads * foreign_rounds; }, 100s);
    const auto stats = c.stats();
    c.stop();
    CHECK(threads.join());
    REQUIRE(finished);
    tasks.rethrow();
    CHECK(failed == 0);
    CHECK(mismatched == 0);
    CHECK(ok == coroutines * rounds + foreign_threads * foreign_rounds);
    CHECK(server.cmd1({"GET", "threads:total"}) == std::to_string(coroutines * rounds));
    // Commands issued concurrently were coalesced into fewer writes.
    CHECK(stats.replies >= static_cast<std::uint64_t>(2 * coroutines * rounds));
    CHECK(stats.writes < stats.commands_sent);
}

TEST_CASE("threads: contenders on one lock from four threads keep a non-atomic counter exact",
          "[threads]") {
    redis_server server;
    asio::io_context ioc(io_thread_count);
    corolock::client c(ioc.get_executor(), threaded_config(server));
    constexpr int contenders = 12, rounds = 8;
    // Guarded only by the distributed lock: ThreadSanitizer reports a race
    // on these if two critical sections ever overlap or are not ordered.
    long counter = 0;
    std::vector<std::uint64_t> tokens;
    std::atomic<int> failures{0}, inside{0}, overlaps{0};
    task_group tasks;
    for (int i = 0; i < contenders; ++i) {
        tasks.spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "threads:counter");  // one owner per coroutine
            for (int j = 0; j < rounds; ++j) {
                auto [ec, g] = co_await m.async_acquire({.lease = 20s, .wait = 60s}, use_nothrow);
                if (ec) {
                    ++failures;
                    co_return;
                }
                if (inside.fetch_add(1) != 0) ++overlaps;
                const long before = counter;
                tokens.push_back(g.token());
                // A round trip inside the critical section, so the next
                // holder's coroutine gets every chance to run meanwhile.
                auto [pec, pong] = co_await c.async_exec(command{"PING"}, use_nothrow);
                if (pec) ++failures;
                counter = before + 1;
                inside.fetch_sub(1);
                auto rec = co_await g.release();
                if (rec) ++failures;
            }
        });
    }
    io_threads threads(ioc, 120s);
    // Meanwhile this thread reads the metrics the io threads write.
    std::uint64_t seen = 0;
    bool went_back = false;
    const bool finished = wait_until([&] {
        const auto now = c.metrics().acquisitions;
        went_back = went_back || now < seen;
        seen = now;
        return tasks.done();
    }, 100s);
    c.stop();
    CHECK(threads.join());
    REQUIRE(finished);
    tasks.rethrow();
    CHECK(failures == 0);
    CHECK(overlaps == 0);
    CHECK(counter == contenders * rounds);
    CHECK_FALSE(went_back);
    const auto m = c.metrics();
    CHECK(m.acquisitions == static_cast<std::uint64_t>(contenders * rounds));
    CHECK(m.wait.count() == m.acquisitions);
    CHECK(m.handoff.count() <= m.contended_acquisitions);
    // Fencing tokens rise strictly in the order the lock was held.
    REQUIRE(tokens.size() == static_cast<std::size_t>(contenders * rounds));
    CHECK(std::adjacent_find(tokens.begin(), tokens.end(),
                             [](auto a, auto b) { return a >= b; }) == tokens.end());
}

TEST_CASE("threads: coroutines on four threads share one re-entrant handle", "[threads]") {
    redis_server server;
    asio::io_context ioc(io_thread_count);
    corolock::client c(ioc.get_executor(), threaded_config(server));
    corolock::mutex shared(c, "threads:shared");  // one owner for every coroutine
    constexpr int coroutines = 16, rounds = 6;
    std::atomic<int> failures{0};
    std::atomic<std::size_t> most_levels{0};
    std::mutex tokens_mu;
    std::vector<std::uint64_t> tokens;
    task_group tasks;
    for (int i = 0; i < coroutines; ++i) {
        tasks.spawn(ioc, [&]() -> asio::awaitable<void> {
            for (int j = 0; j < rounds; ++j) {
                // The same owner re-enters: never waits on itself.
                auto [ec, g] = co_await shared.async_acquire({.lease = 20s, .wait = 0s}, use_nothrow);
                if (ec) {
                    ++failures;
                    continue;
                }
                {
                    std::lock_guard lock(tokens_mu);
                    tokens.push_back(g.token());
                }
                const auto levels = shared.held_levels();
                auto seen = most_levels.load();
                while (levels > seen && !most_levels.compare_exchange_weak(seen, levels)) {
                }
                auto [pec, pong] = co_await c.async_exec(command{"PING"}, use_nothrow);
                if (pec) ++failures;
                if (j % 2 == 0) {
                    auto rec = co_await g.release();
                    if (rec) ++failures;
                }  // odd rounds: the guard's destructor releases in the background
            }
        });
    }
    io_threads threads(ioc, 120s);
    const bool finished = wait_until([&] { return tasks.done(); }, 100s);
    // Dropped guards release in the background: the key goes once the last
    // level is gone.
    const bool released = wait_until(
        [&] { return shared.held_levels() == 0 && server.cmd1({"EXISTS", lock_key("threads:shared")}) == "0"; },
        20s);
    c.stop();
    CHECK(threads.join());
    REQUIRE(finished);
    tasks.rethrow();
    CHECK(failures == 0);
    CHECK(released);
    CHECK(most_levels > 1);  // the coroutines really did hold levels at once
    // Every level got its own token, re-entry included.
    std::sort(tokens.begin(), tokens.end());
    CHECK(tokens.size() == static_cast<std::size_t>(coroutines * rounds));
    CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());
}

TEST_CASE("threads: waiters on other threads are woken by the release, not by the TTL",
          "[threads]") {
    redis_server server;
    asio::io_context ioc(io_thread_count);
    corolock::client c(ioc.get_executor(), threaded_config(server));
    const std::string name = "threads:wake";
    constexpr int waiters = 10;
    std::atomic<int> got{0}, failures{0};
    std::atomic<bool> holding{false}, release_now{false};
    std::atomic<long long> released_at{0}, last_acquired_at{0};
    task_group tasks;
    tasks.spawn(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(c, name);
        // A 30 s lease: a waiter that misses its wake-up waits out its own
        // 10 s limit and fails, long before the TTL would free the lock.
        auto g = co_await holder.acquire({.lease = 30s});
        holding = true;
        while (!release_now) co_await sleep_for(5ms);  // bounded by the test's wait below
        released_at = mono_ns();
        auto ec = co_await g.release();
        if (ec) ++failures;
    });
    io_threads threads(ioc, 120s);
    // The waiters start only once the holder has the lock: one that came
    // first would take it, and nobody would be left waiting.
    const bool held = wait_until([&] { return holding.load(); }, 20s);
    for (int i = 0; i < waiters; ++i) {
        tasks.spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, name);
            auto [ec, g] = co_await m.async_acquire({.lease = 30s, .wait = 10s}, use_nothrow);
            if (ec) {
                ++failures;
                co_return;
            }
            ++got;
            last_acquired_at = mono_ns();
            auto rec = co_await g.release();  // wakes the next waiter
            if (rec) ++failures;
        });
    }
    // Every waiter has subscribed: one SUBSCRIBE for the whole process.
    const std::string channel(corolock::detail::keys_for(name).channel());
    std::size_t subscribers = 0;
    const bool subscribed = wait_until([&] {
        auto r = server.cmd({"PUBSUB", "NUMSUB", channel});
        subscribers = r.size() == 2 ? std::stoul(r[1]) : 0;
        return subscribers > 0;
    }, 20s);
    std::this_thread::sleep_for(200ms);  // pacing: let every waiter queue up
    release_now = true;
    const bool finished = wait_until([&] { return tasks.done(); }, 60s);
    c.stop();
    CHECK(threads.join());
    REQUIRE(held);
    REQUIRE(subscribed);
    REQUIRE(finished);
    tasks.rethrow();
    CHECK(subscribers == 1);
    CHECK(failures == 0);
    CHECK(got == waiters);
    // All ten handoffs went by pub/sub, far inside the holder's 30 s TTL.
    CHECK(last_acquired_at - released_at < 8'000'000'000LL);
}

TEST_CASE("threads: guards taken on io threads are released and destroyed on other threads",
          "[threads]") {
    redis_server server;
    asio::io_context ioc(io_thread_count);
    corolock::client c(ioc.get_executor(), threaded_config(server));
    constexpr int locks = 24;
    std::vector<std::unique_ptr<corolock::mutex>> handles;
    for (int i = 0; i < locks; ++i)
        handles.push_back(std::make_unique<corolock::mutex>(c, "threads:handover:" + std::to_string(i)));
    // Filled by the coroutines, handed to plain threads once complete.
    std::mutex guards_mu;
    std::vector<guard> guards(locks);
    std::atomic<int> acquired{0}, failures{0};
    task_group tasks;
    for (int i = 0; i < locks; ++i) {
        tasks.spawn(ioc, [&, i]() -> asio::awaitable<void> {
            auto [ec, g] = co_await handles[static_cast<std::size_t>(i)]->async_acquire(
                {.lease = 20s, .wait = 10s}, use_nothrow);
            if (ec) {
                ++failures;
                co_return;
            }
            {
                std::lock_guard lock(guards_mu);
                guards[static_cast<std::size_t>(i)] = std::move(g);
            }
            ++acquired;
        });
    }
    io_threads threads(ioc, 120s);
    const bool all_acquired = wait_until([&] { return tasks.done(); }, 60s);

    // A third of the guards are dropped on one plain thread, a third are
    // moved to another and released there with a callback, and a third are
    // released on this thread, all at the same time.
    std::atomic<int> released_ok{0}, release_errors{0};
    auto release_with_callback = [&](guard& g) {
        g.async_release([&](error_code ec) { ec ? ++release_errors : ++released_ok; });
    };
    std::vector<guard> dropped, moved;
    {
        std::lock_guard lock(guards_mu);
        for (int i = 0; i < locks; ++i) {
            auto& g = guards[static_cast<std::size_t>(i)];
            if (i % 3 == 0) dropped.push_back(std::move(g));
            else if (i % 3 == 1) moved.push_back(std::move(g));
        }
    }
    std::thread dropper([d = std::move(dropped)]() mutable { d.clear(); });
    std::thread releaser([&, m = std::move(moved)]() mutable {
        for (auto& g : m) release_with_callback(g);
    });
    {
        std::lock_guard lock(guards_mu);
        for (int i = 2; i < locks; i += 3) release_with_callback(guards[static_cast<std::size_t>(i)]);
    }
    dropper.join();
    releaser.join();
    const bool all_gone = wait_until([&] {
        for (int i = 0; i < locks; ++i)
            if (server.cmd1({"EXISTS", lock_key("threads:handover:" + std::to_string(i))}) != "0")
                return false;
        return released_ok + release_errors == 2 * locks / 3;
    }, 20s);
    std::size_t still_held = 0;
    for (auto& h : handles) still_held += h->held_levels();
    c.stop();
    CHECK(threads.join());
    REQUIRE(all_acquired);
    tasks.rethrow();
    CHECK(failures == 0);
    CHECK(acquired == locks);
    CHECK(all_gone);
    CHECK(release_errors == 0);
    CHECK(released_ok == 2 * locks / 3);
    CHECK(still_held == 0);
}

TEST_CASE("threads: stop() while commands, acquires and waits are in flight on four threads",
          "[threads]") {
    redis_server server;
    asio::io_context ioc(io_thread_count);
    corolock::client c(ioc.get_executor(), threaded_config(server));
    std::atomic<int> commands{0}, cycles{0}, unexpected{0};
    std::atomic<int> waiters_stopped{0}, holder_stopped{0};
    std::atomic<bool> holding{false};
    // Outcomes that a stop may legitimately cause.
    auto stopped_like = [](const error_code& ec) {
        return ec == error::client_stopped || ec == asio::error::operation_aborted;
    };
    task_group tasks;
    for (int i = 0; i < 12; ++i) {  // commands in a loop until the stop
        tasks.spawn(ioc, [&, i]() -> asio::awaitable<void> {
            for (int j = 0; j < 100'000; ++j) {
                auto [ec, r] = co_await c.async_exec(command{"INCR", "threads:stop:" + std::to_string(i % 3)},
                                                     use_nothrow);
                if (ec) {
                    if (!stopped_like(ec)) ++unexpected;
                    co_return;
                }
                ++commands;
            }
        });
    }
    for (int i = 0; i < 8; ++i) {  // acquire and release cycles on two contended locks
        tasks.spawn(ioc, [&, i]() -> asio::awaitable<void> {
            corolock::mutex m(c, "threads:stop:lock:" + std::to_string(i % 2));
            for (int j = 0; j < 100'000; ++j) {
                auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 30s}, use_nothrow);
                if (ec) {
                    if (!stopped_like(ec)) ++unexpected;
                    co_return;
                }
                ++cycles;
                auto rec = co_await g.release();
                if (rec) {
                    if (!stopped_like(rec)) ++unexpected;
                    co_return;
                }
            }
        });
    }
    tasks.spawn(ioc, [&]() -> asio::awaitable<void> {  // holds a lock until the stop
        corolock::mutex holder(c, "threads:stop:held");
        auto g = co_await holder.acquire({.lease = 30s});
        holding = true;
        auto [ec] = co_await g.async_until_lost(use_nothrow);
        if (ec == error::client_stopped) ++holder_stopped;
        else ++unexpected;
    });  // the guard goes after the stop: harmless
    io_threads threads(ioc, 120s);
    // Its waiters start once it holds the lock (one that came first would
    // take it), and are mid-wait when the stop comes.
    const bool held = wait_until([&] { return holding.load(); }, 60s);
    for (int i = 0; i < 6; ++i) {
        tasks.spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, "threads:stop:held");
            auto [ec, g] = co_await m.async_acquire({.lease = 10s, .wait = 60s}, use_nothrow);
            if (ec == error::client_stopped) ++waiters_stopped;
            else ++unexpected;
        });
    }
    const std::string channel(corolock::detail::keys_for("threads:stop:held").channel());
    const bool busy = wait_until([&] {
        if (commands <= 200 || cycles <= 10) return false;
        auto r = server.cmd({"PUBSUB", "NUMSUB", channel});
        return r.size() == 2 && r[1] != "0";
    }, 60s);
    // Two threads stop it at once: idempotent and thread-safe.
    const auto stop_at = std::chrono::steady_clock::now();
    std::thread other_stopper([&] { c.stop(); });
    c.stop();
    other_stopper.join();
    // Everything completes promptly: nothing waits out its 30 or 60 s.
    const bool finished = wait_until([&] { return tasks.done(); }, 20s);
    const auto took = std::chrono::steady_clock::now() - stop_at;
    // No coroutine, timer or socket of the client is left: run() returns.
    CHECK(threads.join());
    REQUIRE(held);
    REQUIRE(busy);
    REQUIRE(finished);
    tasks.rethrow();
    CHECK(took < 10s);
    CHECK(unexpected == 0);
    CHECK(holder_stopped == 1);
    CHECK(waiters_stopped == 6);
    // A stopped client answers at once, from any thread.
    ioc.restart();
    std::atomic<bool> after_stop{false};
    std::thread late([&] {
        c.async_exec(command{"PING"}, [&](error_code ec, corolock::reply) {
            after_stop = ec == error::client_stopped;
        });
    });
    late.join();
    ioc.run_for(2s);
    CHECK(after_stop);
}

TEST_CASE("threads: RedLock on two threads, its per-node timeouts firing while nodes answer",
          "[threads][redlock]") {
    // The per-node timeout cancels a node's try while the node may be
    // completing it on its own client's strand (docs/redlock.md, "Threads"):
    // the cancellation is emitted on that strand, never on RedLock's. One
    // backend times out nearly every try (1 ms), one keeps the default; both
    // contend for one lock, with waits woken by the nodes' unlock messages.
    redlock_fleet f(3);
    asio::io_context ioc(2);
    corolock::detail::redlock_options hasty;
    hasty.node_timeout = 1ms;
    using corolock::detail::backend_access;
    auto quick = backend_access::handle(
        corolock::detail::connect_redlock(ioc.get_executor(), f.urls(), {}, hasty), true);
    auto steady = backend_access::handle(
        corolock::detail::connect_redlock(ioc.get_executor(), f.urls(), {}), true);
    constexpr int contenders = 4, rounds = 25;
    // Atomics: two backends order their holders through the servers, which
    // ThreadSanitizer cannot see.
    std::atomic<int> failures{0}, inside{0}, overlaps{0}, granted{0};
    task_group tasks;
    for (int i = 0; i < 2 * contenders; ++i) {
        tasks.spawn(ioc, [&, i]() -> asio::awaitable<void> {
            corolock::mutex m(i % 2 ? quick : steady, "threads:redlock");
            for (int j = 0; j < rounds; ++j) {
                auto [ec, g] =
                    co_await m.async_acquire({.lease = 10s, .wait = 300ms}, use_nothrow);
                if (ec == error::wait_timeout) continue;
                if (ec) {
                    ++failures;
                    co_return;
                }
                ++granted;
                if (inside.fetch_add(1) != 0) ++overlaps;
                co_await sleep_for(1ms);
                inside.fetch_sub(1);
                if (auto rec = co_await g.release()) ++failures;
            }
        });
    }
    io_threads threads(ioc, 150s, 2);
    const bool finished = wait_until([&] { return tasks.done(); }, 140s);
    quick.stop();
    steady.stop();
    CHECK(threads.join());
    REQUIRE(finished);
    tasks.rethrow();
    CHECK(failures == 0);
    CHECK(overlaps == 0);
    CHECK(granted > 0);
    // The hasty backend's timeouts fired (its rounds failed).
    CHECK(quick.metrics().redlock_rounds_failed > 0);
}
