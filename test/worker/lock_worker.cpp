// A lock client in its own process, for the multi-process tests.
//
// URL below is the lock service's URL, of any backend (corolock::backend).
// The protected resource (the non-atomic counter and the fenced oracle) is a
// Redis server: the one given by the option --resource=REDIS_URL (anywhere on
// the command line), else the lock URL itself, which must then be a Redis
// URL (the Redis-only tests' way: one server for both).
//
//   lock_worker increment URL NAMES COUNTER_PREFIX TASKS ITERATIONS LEASE_MS [LOG]
//       TASKS coroutines, each with its own mutex handle, take turns on the
//       comma-separated lock NAMES; inside each critical section they do a
//       non-atomic GET/SET increment of COUNTER_PREFIX<name>, and check that
//       the fencing token exceeds the last one written (COUNTER_PREFIX<name>:last).
//       Prints "violations N" and exits 0 when done.
//   lock_worker hold URL NAME LEASE_MS [LOCK_DELAY_MS [release]]
//       Acquires (with that lock-delay), prints "acquired TOKEN" and holds
//       until killed; with "release", releases at once, prints "released ok
//       MONO_NS" (or the error) and exits.
//   lock_worker wait URL NAME WAIT_MS
//       Acquires (waiting up to WAIT_MS), prints "acquired TOKEN MONO_NS",
//       where MONO_NS is CLOCK_MONOTONIC at the moment acquire returned,
//       and releases. fair-wait: the same with a corolock::fair_mutex.
//   lock_worker cycle URL NAME COUNTER_KEY ORACLE_KEY LEASE_MS HOLD_MS DURATION_MS LOG [SEED]
//       For the fault tests: until DURATION_MS have passed, loops acquire ->
//       critical section -> release on lock NAME. The critical section is a
//       non-atomic GET/SET increment of COUNTER_KEY, then a pause of HOLD_MS/2
//       to HOLD_MS (drawn from SEED), then a fenced write of the token to
//       the oracle at ORACLE_KEY (test/support/history.hpp's oracle_lua). It
//       deliberately does not check for a lost lease before writing: the
//       oracle is what must refuse a late write. A failed acquire is retried
//       after a short pause. Prints "running PID" at start and "done N"
//       (completed cycles) at the end; exits 0. fair-cycle: the same with a
//       corolock::fair_mutex.
//       With the option --rest=MS (anywhere on the command line) a worker
//       pauses MS/2 to MS after each release before it acquires again, so
//       that a waiter gets the lock it was woken for: the plain mutex is not
//       fair (docs/safety.md), and without a rest a worker that releases and
//       at once waits again can win every race for as long as the run lasts.
//       With the option --semaphore=K/N (anywhere on the command line) the
//       lock is a corolock::semaphore of N permits, of which each cycle
//       takes K; acquire_ok then carries "permits" and "capacity".
//       rw-cycle: the same with a corolock::shared_mutex, two cycles in three
//       (drawn from SEED) readers: a reader's section is only the pause (no
//       increment, no oracle write), and its acquire_ok carries "shared":1.
//       multi-cycle: the same with a corolock::multi_lock on the
//       comma-separated NAME list, given to multi_lock in that order (the
//       test gives workers opposite orders), waiting at most 3 s. Each member
//       is logged as its own actor (task = its index in canonical order,
//       lock = its name), with its own counter COUNTER_KEY:<name> and oracle
//       ORACLE_KEY:<name>; one lost signal of the set is logged for every
//       member.
//       elect-cycle: the same with terms of a corolock::election: a cycle
//       campaigns (value "worker PID"), runs the section as leader with the
//       term's epoch as its token, and resigns (its release in the history).
//       Between the section's pause and its write it proclaims a new value,
//       logged as proclaim_ok or proclaim_failed (with the error).
//
// Events go as JSON lines to LOG when given: the history checker's input,
// in the format documented in test/support/history.hpp. Times are
// CLOCK_MONOTONIC ns; lease deadlines are guard::lease_deadline() converted
// with time_since_epoch(), which is the same clock because libstdc++'s
// steady_clock reads CLOCK_MONOTONIC on Linux (checked at start-up).
#include <corolock/corolock.hpp>

#include "../support/history.hpp"  // oracle_lua only (header-only part)

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>
#include <string>
#include <type_traits>
#include <utility>
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

long long to_mono_ns(std::chrono::steady_clock::time_point tp) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
}

// Lease deadlines are logged on the CLOCK_MONOTONIC scale; that is only
// right while steady_clock is that clock. Two readings bracket one another.
bool steady_clock_is_monotonic() {
    const long long before = mono_ns();
    const long long steady = to_mono_ns(std::chrono::steady_clock::now());
    const long long after = mono_ns();
    return steady >= before && steady <= after;
}

// Only names of this program's own making go into the log (lock names and
// error names), so no escaping beyond quotes and backslashes is needed.
std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    return out + "\"";
}

// The optional fields of an event.
struct extra {
    long long deadline = 0;
    long long lease_ns = 0;
    long long prev = -1;
    std::string error;
    std::uint32_t permits = 0;   // a semaphore grant's, with its capacity
    std::uint32_t capacity = 0;
    bool shared = false;         // a shared mutex's reader
    bool from_observer = false;  // a lost signal logged by config::observer
};
extra with_deadline(long long deadline, long long lease_ns = 0) {
    extra x;
    x.deadline = deadline;
    x.lease_ns = lease_ns;
    return x;
}
extra with_prev(long long prev) {
    extra x;
    x.prev = prev;
    return x;
}
extra with_error(std::string error) {
    extra x;
    x.error = std::move(error);
    return x;
}

// What the history calls a holder's token and its release: a guard's own,
// and for a term of leadership (mode elect-cycle) its epoch and resign.
std::uint64_t token_of(const corolock::guard& g) { return g.token(); }
std::uint64_t token_of(const corolock::leadership& l) { return l.epoch(); }
asio::awaitable<corolock::error_code> release_of(corolock::guard& g) { return g.release(); }
asio::awaitable<corolock::error_code> release_of(corolock::leadership& l) { return l.resign(); }

struct event_log {
    std::ofstream out;
    // One line per event, flushed at once: a kill -9 may cut only the line
    // being written, which the checker's loader then skips.
    void write(const std::string& ev, int task, const std::string& lock, std::uint64_t token,
               const extra& x = extra()) {
        if (!out.is_open()) return;
        std::string line = "{\"ev\":\"" + ev + "\",\"pid\":" + std::to_string(::getpid()) +
                           ",\"task\":" + std::to_string(task) + ",\"lock\":" + quoted(lock) +
                           ",\"token\":" + std::to_string(token) + ",\"t\":" + std::to_string(mono_ns());
        if (x.deadline != 0) line += ",\"deadline\":" + std::to_string(x.deadline);
        if (x.lease_ns != 0) line += ",\"lease_ns\":" + std::to_string(x.lease_ns);
        if (x.prev >= 0) line += ",\"prev\":" + std::to_string(x.prev);
        if (!x.error.empty()) line += ",\"error\":" + quoted(x.error);
        if (x.capacity != 0) {
            line += ",\"permits\":" + std::to_string(x.permits);
            line += ",\"capacity\":" + std::to_string(x.capacity);
        }
        if (x.shared) line += ",\"shared\":1";
        if (x.from_observer) line += ",\"from\":\"observer\"";
        line += "}\n";
        out << line << std::flush;
    }
    template <class Holder>  // a corolock::guard, or a corolock::leadership
    void acquired(int task, const std::string& lock, const Holder& g,
                  std::chrono::steady_clock::duration lease, std::uint32_t permits = 0,
                  std::uint32_t capacity = 0, bool shared = false) {
        auto x = with_deadline(to_mono_ns(g.lease_deadline()),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(lease).count());
        x.permits = permits;
        x.capacity = capacity;
        x.shared = shared;
        write("acquire_ok", task, lock, token_of(g), x);
    }
};

// Logs a lost signal the moment the library reports it (config::observer's
// on_lost runs on the client's strand as the guards' signals fire), not when
// the worker's coroutine resumes: the checker's allowance for a late log
// (observe_slack) then covers only the log's own write. Only a Redis lock
// reached through the worker's client has a config; a backend opened by URL
// (--resource) has none, and its lost signal is logged by watch() when
// guard::async_until_lost completes.
class lost_observer final : public corolock::observer {
public:
    explicit lost_observer(event_log& log) : log_(log) {}

    // The section of `lock` under `token` began; its loss is logged once.
    void holding(const std::string& lock, std::uint64_t token) {
        lock_ = lock;
        token_ = token;
        logged_ = false;
    }
    void released() { lock_.clear(); }
    // Whether the loss of the current section was logged here.
    bool logged() const { return logged_; }

    void on_lost(std::string_view lock, std::string_view) override {
        if (lock_.empty() || lock != lock_ || logged_) return;
        logged_ = true;
        extra x;
        x.from_observer = true;
        log_.write("lost", 0, lock_, token_, x);
    }

private:
    event_log& log_;
    std::string lock_;
    std::uint64_t token_ = 0;
    bool logged_ = false;
};

// A short, stable name for the errors the checker reads.
std::string error_name(const corolock::error_code& ec) {
    if (ec == corolock::error::expired) return "expired";
    if (ec == corolock::error::not_owner) return "not_owner";
    if (ec == corolock::error::timeout) return "timeout";
    if (ec == corolock::error::wait_timeout) return "wait_timeout";
    if (ec == corolock::error::lock_lost) return "lock_lost";
    if (ec == corolock::error::released) return "released";
    return ec.message();
}

int usage() {
    std::cerr << "usage: lock_worker increment|hold|wait|cycle ...\n";
    return 64;
}

// The fault tests' workload (mode "cycle"); see the top of this file.
struct cycle_worker {
    corolock::client& c;           // the resource
    const corolock::backend& locks;
    std::string name;
    std::string counter_key;
    std::string oracle_key;
    std::chrono::milliseconds lease;
    std::chrono::milliseconds hold;
    std::chrono::steady_clock::time_point until;
    event_log& log;
    std::mt19937 rng;
    long cycles = 0;
    std::uint32_t permits = 0;   // --semaphore=K/N: K of N permits; 0: a mutex
    std::uint32_t capacity = 0;
    bool fair = false;  // mode fair-cycle: a corolock::fair_mutex
    bool rw = false;    // mode rw-cycle: a corolock::shared_mutex
    bool multi = false; // mode multi-cycle: a corolock::multi_lock on the names in `name`
    bool elect = false; // mode elect-cycle: terms of a corolock::election
    std::chrono::milliseconds rest{0};  // --rest=MS: the pause after a release
    lost_observer* observer = nullptr;  // set when the lock has a config (see lost_observer)

    template <class Duration>
    static asio::awaitable<void> pause_for(Duration d) {
        asio::steady_timer t(co_await asio::this_coro::executor, d);
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }

    // Logs the lost signal (guard::until_lost) and every move of the lease
    // deadline (renewals), polled every 5 ms, until the section is over.
    template <class Holder>
    asio::awaitable<void> watch(const Holder& g, const bool& holding) {
        using namespace asio::experimental::awaitable_operators;
        auto lost = [&]() -> asio::awaitable<void> {
            auto [ec] = co_await g.async_until_lost(asio::as_tuple(asio::use_awaitable));
            if (ec == corolock::error::lock_lost && !(observer && observer->logged()))
                log.write("lost", 0, name, token_of(g));
        };
        auto deadlines = [&]() -> asio::awaitable<void> {
            long long last = to_mono_ns(g.lease_deadline());
            while (holding) {
                co_await pause_for(5ms);
                const long long now = to_mono_ns(g.lease_deadline());
                if (now != last && holding) {
                    log.write("lease", 0, name, token_of(g), with_deadline(now));
                    last = now;
                }
            }
        };
        // The lost wait ends the watch; so does the end of the section, which
        // cancels the wait (a released guard's wait never completes by itself).
        co_await (lost() || deadlines());
    }

    // A reader's section: the pause only.
    asio::awaitable<void> read_section(corolock::guard& g, bool& holding) {
        const auto token = g.token();
        std::uniform_int_distribution<long> spread(hold.count() / 2, hold.count());
        co_await pause_for(std::chrono::milliseconds(spread(rng)));
        log.write("release_invoked", 0, name, token);
        const auto ec = co_await g.release();
        if (ec) log.write("release_failed", 0, name, token, with_error(error_name(ec)));
        else log.write("release_ok", 0, name, token);
        holding = false;
    }

    template <class Holder>
    asio::awaitable<void> section(Holder& g, bool& holding) {
        const auto token = token_of(g);
        log.write("increment_invoked", 0, name, token);
        auto [ec1, v] = co_await c.async_exec(corolock::command{"GET", counter_key},
                                              asio::as_tuple(asio::use_awaitable));
        if (ec1) {
            log.write("increment_failed", 0, name, token, with_error(error_name(ec1)));
        } else {
            const long n = v.is_null() ? 0 : std::stol(v.str);
            auto [ec2, ok] = co_await c.async_exec(
                corolock::command{"SET", counter_key, std::to_string(n + 1)},
                asio::as_tuple(asio::use_awaitable));
            if (ec2) log.write("increment_failed", 0, name, token, with_error(error_name(ec2)));
            else log.write("increment_ok", 0, name, token);
        }

        std::uniform_int_distribution<long> spread(hold.count() / 2, hold.count());
        co_await pause_for(std::chrono::milliseconds(spread(rng)));

        if constexpr (std::is_same_v<Holder, corolock::leadership>) {
            // A leader proclaims a new value before its write: refused
            // (proclaim_failed) once the term is lost, as after a pause past
            // its lease. The checker does not read it; the election fault
            // tests do.
            auto [ecp] = co_await g.async_proclaim("worker " + std::to_string(::getpid()) +
                                                       " epoch " + std::to_string(token),
                                                   asio::as_tuple(asio::use_awaitable));
            if (ecp) log.write("proclaim_failed", 0, name, token, with_error(error_name(ecp)));
            else log.write("proclaim_ok", 0, name, token);
        }

        log.write("write_invoked", 0, name, token);
        auto [ec3, w] = co_await c.async_exec(
            corolock::command{"EVAL", std::string(corolock::test::history::oracle_lua), "1",
                              oracle_key, std::to_string(token)},
            asio::as_tuple(asio::use_awaitable));
        if (ec3 || w.elements.size() != 2) {
            log.write("write_failed", 0, name, token,
                      with_error(ec3 ? error_name(ec3) : "bad reply " + corolock::to_string(w)));
        } else {
            log.write(w.elements[0].integer == 1 ? "write_accepted" : "write_rejected", 0, name,
                      token, with_prev(w.elements[1].integer));
        }

        log.write("release_invoked", 0, name, token);
        const auto ec4 = co_await release_of(g);
        if (ec4) log.write("release_failed", 0, name, token, with_error(error_name(ec4)));
        else log.write("release_ok", 0, name, token);
        holding = false;
    }

    // multi-cycle: the GET/SET increment of one member's counter.
    asio::awaitable<void> increment(int task, const std::string& member, std::uint64_t token) {
        const auto key = counter_key + ":" + member;
        log.write("increment_invoked", task, member, token);
        auto [ec1, v] = co_await c.async_exec(corolock::command{"GET", key},
                                              asio::as_tuple(asio::use_awaitable));
        if (ec1) {
            log.write("increment_failed", task, member, token, with_error(error_name(ec1)));
            co_return;
        }
        const long n = v.is_null() ? 0 : std::stol(v.str);
        auto [ec2, ok] = co_await c.async_exec(corolock::command{"SET", key, std::to_string(n + 1)},
                                               asio::as_tuple(asio::use_awaitable));
        if (ec2) log.write("increment_failed", task, member, token, with_error(error_name(ec2)));
        else log.write("increment_ok", task, member, token);
    }

    // multi-cycle: the fenced write of one member's token to its oracle.
    asio::awaitable<void> fenced_write(int task, const std::string& member, std::uint64_t token) {
        log.write("write_invoked", task, member, token);
        auto [ec, w] = co_await c.async_exec(
            corolock::command{"EVAL", std::string(corolock::test::history::oracle_lua), "1",
                              oracle_key + ":" + member, std::to_string(token)},
            asio::as_tuple(asio::use_awaitable));
        if (ec || w.elements.size() != 2) {
            log.write("write_failed", task, member, token,
                      with_error(ec ? error_name(ec) : "bad reply " + corolock::to_string(w)));
        } else {
            log.write(w.elements[0].integer == 1 ? "write_accepted" : "write_rejected", task, member,
                      token, with_prev(w.elements[1].integer));
        }
    }

    // multi-cycle: one member's lease moves, polled every 5 ms while held.
    asio::awaitable<void> watch_multi(const corolock::multi_guard& g, const bool& holding) {
        using namespace asio::experimental::awaitable_operators;
        auto lost = [&]() -> asio::awaitable<void> {
            auto [ec] = co_await g.async_until_lost(asio::as_tuple(asio::use_awaitable));
            if (ec != corolock::error::lock_lost) co_return;
            int i = 0;
            for (const auto& m : g.members()) log.write("lost", i++, m.name(), m.token());
        };
        auto deadlines = [&]() -> asio::awaitable<void> {
            std::vector<long long> last;
            for (const auto& m : g.members()) last.push_back(to_mono_ns(m.lease_deadline()));
            while (holding) {
                co_await pause_for(5ms);
                for (std::size_t i = 0; i < last.size() && holding; ++i) {
                    const auto& m = g.members()[i];
                    const long long now = to_mono_ns(m.lease_deadline());
                    if (now == last[i]) continue;
                    log.write("lease", static_cast<int>(i), m.name(), m.token(), with_deadline(now));
                    last[i] = now;
                }
            }
        };
        co_await (lost() || deadlines());
    }

    asio::awaitable<void> multi_section(corolock::multi_guard& g, bool& holding) {
        const auto& members = g.members();
        for (std::size_t i = 0; i < members.size(); ++i)
            co_await increment(static_cast<int>(i), members[i].name(), members[i].token());
        std::uniform_int_distribution<long> spread(hold.count() / 2, hold.count());
        co_await pause_for(std::chrono::milliseconds(spread(rng)));
        for (std::size_t i = 0; i < members.size(); ++i)
            co_await fenced_write(static_cast<int>(i), members[i].name(), members[i].token());
        for (std::size_t i = 0; i < members.size(); ++i)
            log.write("release_invoked", static_cast<int>(i), members[i].name(), members[i].token());
        const auto ec = co_await g.release();
        // The set's release answers with its first failure: a failure is
        // logged for every member (the checker only holds release_ok to account).
        for (std::size_t i = 0; i < members.size(); ++i) {
            if (ec)
                log.write("release_failed", static_cast<int>(i), members[i].name(),
                          members[i].token(), with_error(error_name(ec)));
            else
                log.write("release_ok", static_cast<int>(i), members[i].name(), members[i].token());
        }
        holding = false;
    }

    asio::awaitable<void> run_multi() {
        using namespace asio::experimental::awaitable_operators;
        corolock::multi_lock ml(locks, split(name, ','));
        const auto members = ml.names();
        std::uniform_int_distribution<int> backoff(10, 50);
        while (std::chrono::steady_clock::now() < until) {
            for (std::size_t i = 0; i < members.size(); ++i)
                log.write("acquire_invoked", static_cast<int>(i), members[i], 0);
            const corolock::lock_options opts{.lease = lease, .wait = 3s};
            auto [ec, g] = co_await ml.async_acquire(opts, asio::as_tuple(asio::use_awaitable));
            if (ec) {
                for (std::size_t i = 0; i < members.size(); ++i)
                    log.write("acquire_failed", static_cast<int>(i), members[i], 0,
                              with_error(error_name(ec)));
                co_await pause_for(std::chrono::milliseconds(backoff(rng)));
                continue;
            }
            for (std::size_t i = 0; i < members.size(); ++i)
                log.acquired(static_cast<int>(i), members[i], g.members()[i], lease);
            bool holding = true;
            co_await (multi_section(g, holding) && watch_multi(g, holding));
            ++cycles;
        }
    }

    // elect-cycle: each cycle is a term, won by a campaign and resigned at
    // the section's end; the term's epoch is its token in the history.
    asio::awaitable<void> run_elect() {
        using namespace asio::experimental::awaitable_operators;
        corolock::election e(locks, name);
        const std::string value = "worker " + std::to_string(::getpid());
        std::uniform_int_distribution<int> backoff(10, 50);
        while (std::chrono::steady_clock::now() < until) {
            log.write("acquire_invoked", 0, name, 0);
            const corolock::lock_options opts{.lease = lease, .wait = 5s};
            auto [ec, term] = co_await e.async_campaign(value, opts, asio::as_tuple(asio::use_awaitable));
            if (ec) {
                log.write("acquire_failed", 0, name, 0, with_error(error_name(ec)));
                co_await pause_for(std::chrono::milliseconds(backoff(rng)));
                continue;
            }
            log.acquired(0, name, term, lease);
            if (observer) observer->holding(name, term.epoch());
            bool holding = true;
            co_await (section(term, holding) && watch(term, holding));
            if (observer) observer->released();
            ++cycles;
            if (rest.count() > 0) {
                std::uniform_int_distribution<long> spread(rest.count() / 2, rest.count());
                co_await pause_for(std::chrono::milliseconds(spread(rng)));
            }
        }
    }

    asio::awaitable<void> run() {
        if (elect)
            co_await run_elect();
        else if (multi)
            co_await run_multi();
        else if (rw)
            co_await run_with<corolock::shared_mutex>();
        else if (fair)
            co_await run_with<corolock::fair_mutex>();
        else
            co_await run_with<corolock::mutex>();
    }

    static asio::awaitable<std::tuple<corolock::error_code, corolock::guard>> acquire_shared(
        corolock::shared_mutex& m, const corolock::lock_options& opts) {
        co_return co_await m.async_acquire_shared(opts, asio::as_tuple(asio::use_awaitable));
    }
    template <class Lock>
    static asio::awaitable<std::tuple<corolock::error_code, corolock::guard>> acquire_shared(
        Lock&, const corolock::lock_options&) {
        co_return std::tuple<corolock::error_code, corolock::guard>{
            corolock::error::invalid_argument, corolock::guard{}};
    }

    template <class Lock>
    asio::awaitable<void> run_with() {
        using namespace asio::experimental::awaitable_operators;
        std::optional<Lock> m;
        std::optional<corolock::semaphore> sem;
        if (capacity > 0) sem.emplace(locks, name, capacity);
        else m.emplace(locks, name);
        std::uniform_int_distribution<int> backoff(10, 50);
        while (std::chrono::steady_clock::now() < until) {
            const bool reading = rw && std::uniform_int_distribution<int>(0, 2)(rng) != 0;
            log.write("acquire_invoked", 0, name, 0);
            const corolock::lock_options opts{.lease = lease, .wait = 5s};
            corolock::error_code ec;
            corolock::guard g;
            if (sem) {
                std::tie(ec, g) = co_await sem->async_acquire(permits, opts,
                                                              asio::as_tuple(asio::use_awaitable));
            } else if (reading) {
                std::tie(ec, g) = co_await acquire_shared(*m, opts);
            } else {
                std::tie(ec, g) = co_await m->async_acquire(opts, asio::as_tuple(asio::use_awaitable));
            }
            if (ec) {
                log.write("acquire_failed", 0, name, 0, with_error(error_name(ec)));
                co_await pause_for(std::chrono::milliseconds(backoff(rng)));
                continue;
            }
            log.acquired(0, name, g, lease, permits, capacity, reading);
            if (observer) observer->holding(name, g.token());
            bool holding = true;
            if (reading)
                co_await (read_section(g, holding) && watch(g, holding));
            else
                co_await (section(g, holding) && watch(g, holding));
            if (observer) observer->released();
            ++cycles;
            if (rest.count() > 0) {
                std::uniform_int_distribution<long> spread(rest.count() / 2, rest.count());
                co_await pause_for(std::chrono::milliseconds(spread(rng)));
            }
        }
    }
};

// The option FLAG=VALUE (flag with its '='), taken out of the arguments
// wherever it is: its last value, empty when absent.
std::string take_option(std::vector<std::string>& args, const std::string& flag) {
    std::string value;
    for (auto it = args.begin(); it != args.end();) {
        if (it->rfind(flag, 0) == 0) {
            value = it->substr(flag.size());
            it = args.erase(it);
        } else {
            ++it;
        }
    }
    return value;
}

// The option --resource=URL.
std::string take_resource_option(std::vector<std::string>& args) {
    return take_option(args, "--resource=");
}

// The option --semaphore=K/N: K permits of a semaphore of N (0/0: absent).
std::pair<std::uint32_t, std::uint32_t> take_semaphore_option(std::vector<std::string>& args) {
    std::pair<std::uint32_t, std::uint32_t> kn{0, 0};
    const auto parts = split(take_option(args, "--semaphore="), '/');
    if (parts.size() == 2)
        kn = {static_cast<std::uint32_t>(std::stoul(parts[0])),
              static_cast<std::uint32_t>(std::stoul(parts[1]))};
    return kn;
}

// The option --rest=MS (0: absent).
std::chrono::milliseconds take_rest_option(std::vector<std::string>& args) {
    const auto ms = take_option(args, "--rest=");
    return std::chrono::milliseconds(ms.empty() ? 0 : std::stol(ms));
}

// The lock service and the protected resource. Without a resource URL both
// are one Redis client (the lock through client::lock_backend()); with one,
// the lock URL opens a backend of its own, of whatever scheme.
struct endpoints {
    std::unique_ptr<corolock::client> resource;
    corolock::backend locks = corolock::detail::backend_access::handle(nullptr, false);

    endpoints(asio::io_context& ioc, const std::string& lock_url, const std::string& resource_url,
              const std::function<corolock::config(const std::string&)>& resource_config) {
        if (resource_url.empty()) {
            resource = std::make_unique<corolock::client>(ioc.get_executor(), resource_config(lock_url));
            locks = resource->lock_backend();
        } else {
            resource =
                std::make_unique<corolock::client>(ioc.get_executor(), resource_config(resource_url));
            locks = corolock::backend(ioc.get_executor(), lock_url);
        }
    }
    void stop() {
        locks.stop();
        resource->stop();
    }
};

corolock::config plain_config(const std::string& url) { return corolock::config::from_url(url); }

}  // namespace

int main(int argc, char** argv_in) {
    std::vector<std::string> args(argv_in, argv_in + argc);
    const std::string resource_url = take_resource_option(args);
    const auto [sem_permits, sem_capacity] = take_semaphore_option(args);
    const auto rest = take_rest_option(args);
    argc = static_cast<int>(args.size());
    std::vector<char*> argv_list;
    for (auto& a : args) argv_list.push_back(a.data());
    argv_list.push_back(nullptr);
    char** argv = argv_list.data();
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
        endpoints ep(ioc, url, resource_url, plain_config);
        corolock::client& c = *ep.resource;
        int done = 0;
        long violations = 0;
        for (int t = 0; t < tasks; ++t) {
            asio::co_spawn(ioc, [&, t]() -> asio::awaitable<void> {
                const std::string& name = names[static_cast<std::size_t>(t) % names.size()];
                corolock::mutex m(ep.locks, name);
                for (int i = 0; i < iterations; ++i) {
                    log.write("acquire_invoked", t, name, 0);
                    auto g = co_await m.acquire({.lease = lease, .wait = 60s});
                    log.acquired(t, name, g, lease);
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
                    if (ec) log.write("release_failed", t, name, g.token(), with_error(error_name(ec)));
                    else log.write("release_ok", t, name, g.token());
                }
                if (++done == tasks) ep.stop();
            }, [&](std::exception_ptr e) {
                if (!e) return;
                try { std::rethrow_exception(e); } catch (const std::exception& ex) {
                    std::cerr << "task failed: " << ex.what() << "\n";
                }
                exit_code = 1;
                ep.stop();
            });
        }
        ioc.run_for(120s);
        std::cout << "violations " << violations << std::endl;
        return exit_code != 0 ? exit_code : (done == tasks ? 0 : 2);
    }

    if (mode == "hold" && argc >= 5) {
        corolock::backend c(ioc.get_executor(), std::string_view(argv[2]));
        const auto lease = std::chrono::milliseconds(std::stoi(argv[4]));
        const auto delay = std::chrono::milliseconds(argc >= 6 ? std::stoi(argv[5]) : 0);
        const bool release = argc >= 7 && std::string_view(argv[6]) == "release";
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(c, argv[3]);
            auto g = co_await m.acquire({.lease = lease, .wait = 30s, .lock_delay = delay});
            std::cout << "acquired " << g.token() << std::endl;
            if (release) {
                const auto ec = co_await g.release();
                std::cout << "released " << (ec ? ec.message() : "ok") << " " << mono_ns()
                          << std::endl;
                c.stop();
                co_return;
            }
            asio::steady_timer forever(ioc, std::chrono::hours(1));
            co_await forever.async_wait(asio::use_awaitable);
        }, asio::detached);
        ioc.run_for(std::chrono::minutes(5));
        return 0;
    }

    if ((mode == "wait" || mode == "fair-wait") && argc >= 5) {
        corolock::backend c(ioc.get_executor(), std::string_view(argv[2]));
        const auto wait = std::chrono::milliseconds(std::stoi(argv[4]));
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            std::cout << "waiting" << std::endl;
            constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
            std::tuple<corolock::error_code, corolock::guard> result;
            if (mode == "fair-wait") {
                corolock::fair_mutex m(c, argv[3]);
                result = co_await m.async_acquire({.wait = wait}, nothrow);
            } else {
                corolock::mutex m(c, argv[3]);
                result = co_await m.async_acquire({.wait = wait}, nothrow);
            }
            auto& [ec, g] = result;
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
    if ((mode == "cycle" || mode == "fair-cycle" || mode == "rw-cycle" ||
         mode == "multi-cycle" || mode == "elect-cycle") && argc >= 10) {
        if (!steady_clock_is_monotonic()) {
            std::cerr << "steady_clock is not CLOCK_MONOTONIC here: deadlines cannot be logged\n";
            return 70;
        }
        event_log log;
        log.out.open(argv[9], std::ios::app);
        if (!log.out) {
            std::cerr << "cannot open " << argv[9] << "\n";
            return 73;
        }
        const auto duration = std::chrono::milliseconds(std::stol(argv[8]));
        const unsigned long seed = argc >= 11 ? std::stoul(argv[10]) : 1;
        // Short timeouts and a fast reconnect, as the in-process tests use
        // (test/support/lock_testing.cpp's config_for): a fault then costs
        // the run seconds, not the library's production defaults. A lock
        // backend opened by URL (with --resource) has its own defaults.
        auto observer = std::make_shared<lost_observer>(log);
        const bool observed = resource_url.empty() && mode != "multi-cycle";
        const auto short_timeouts = [&](const std::string& url) {
            auto cfg = corolock::config::from_url(url);
            if (observed) cfg.observer = observer;
            cfg.command_timeout = 2s;
            cfg.connect_timeout = 2s;
            cfg.reconnect_min = 20ms;
            cfg.reconnect_max = 200ms;
            return cfg;
        };
        endpoints ep(ioc, argv[2], resource_url, short_timeouts);
        corolock::client& c = *ep.resource;
        cycle_worker w{c,
                       ep.locks,
                       argv[3],
                       argv[4],
                       argv[5],
                       std::chrono::milliseconds(std::stol(argv[6])),
                       std::chrono::milliseconds(std::stol(argv[7])),
                       std::chrono::steady_clock::now() + duration,
                       log,
                       std::mt19937(static_cast<std::mt19937::result_type>(seed * 7919 + ::getpid())),
                       0};
        w.permits = sem_permits;
        w.rest = rest;
        w.capacity = sem_capacity;
        w.fair = mode == "fair-cycle";
        w.rw = mode == "rw-cycle";
        w.multi = mode == "multi-cycle";
        w.elect = mode == "elect-cycle";
        if (observed) w.observer = observer.get();
        bool finished = false;
        std::cout << "running " << ::getpid() << std::endl;
        asio::co_spawn(ioc, w.run(), [&](std::exception_ptr e) {
            finished = true;
            if (e) {
                try { std::rethrow_exception(e); } catch (const std::exception& ex) {
                    std::cerr << "worker failed: " << ex.what() << "\n";
                }
                exit_code = 1;
            }
            ep.stop();
        });
        ioc.run_for(duration + std::chrono::seconds(60));
        std::cout << "done " << w.cycles << std::endl;
        return finished ? exit_code : 2;
    }
    return usage();
}
