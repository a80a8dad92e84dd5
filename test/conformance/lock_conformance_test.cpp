// Conformance, in one process: what every backend's lock must do, stated
// through the public API only (corolock::backend opened by URL, mutex, guard,
// lock_options) against the fixture of the backend under test
// (COROLOCK_CONFORMANCE_BACKEND; support/lock_server.hpp).
//
// What each case asserts:
//  - re-entry: acquiring again through one handle adds a level
//    (held_levels() counts them) with a strictly larger token; another
//    handle is another owner and cannot get in until the last level is
//    released; the next owner's token is larger still. Where tokens are no
//    fencing tokens (RedLock: lock_server::tokens_unfenced()), a re-entry
//    carries the tenure's token and the next owner's is not compared. Releasing a guard a
//    second time, or an empty guard, gives error::released.
//  - release outcomes (include/corolock/guard.hpp): after the lease ran out
//    and the lock is gone, error::expired; after another owner took over,
//    error::not_owner, and that owner keeps the lock; after the same handle
//    took a new tenure, error::lock_lost. Never success. A backend that
//    ends a tenure itself at its deadline (RedLock:
//    lock_server::ends_tenure_at_deadline()) answers lock_lost to all three.
//  - bad input: an empty name, a name over max_lock_name_length, a name
//    with braces (mutex constructor); a zero or negative lease, a lease
//    under 10 ms, a negative wait, a renew interval leaving less than a
//    quarter of the lease (acquire); a malformed URL and an unknown scheme
//    (backend constructor). Each is a clear error: invalid_argument (with
//    the reason as what() where an exception carries one), and nothing is
//    touched: a second backend handle gets the same name at once.
//  - cancellation at random points: several coroutines, each with its own
//    handle on one name, acquire under timers of random length that cancel
//    the acquire when they fire first. Every acquire ends (granted or
//    operation_aborted); every granted guard is released with success; no
//    handle holds a level afterwards; and a fresh handle on another backend
//    connection gets the lock within the lease (nothing is held by nobody).
//  - a frozen client: a holder whose client is cut off the moment after it
//    sent a request (a raw proxy that pauses both ways and holds back even a
//    close, as a SIGSTOP'd or partitioned process would leave its
//    connection): the server frees the lock within the lease plus the
//    backend's expiry slack (a lease more of room for a loaded machine) in
//    every state the session can be in: holding and idle on every backend;
//    on PostgreSQL also inside the locked transaction right after BEGIN,
//    and mid-statement (a statement runs at most a lease: statement_timeout).
//    The next owner comes no earlier than the frozen guard's deadline, and
//    the frozen guard's lost signal fires.
//  - a re-entry that asks for the watchdog (the tenure began without it)
//    keeps the tenure past its lease: the terms join (RedLock refuses it:
//    lock_server::reentry_cannot_add_watchdog()).
//  - a re-entry after a lost tenure never joins it: a holder whose lease
//    ran out (watchdog off) while another owner came and went acquires
//    again through the same handle: the old guard is lost, the new grant is
//    a tenure of its own (one level, a larger token than the other
//    owner's), and the old guard's release neither succeeds nor touches it.
//  - a given-up attempt: an acquire whose request reached the server, frozen
//    there by the proxy, is cancelled; its answer then comes late (the
//    connection healed) or never (reset). After a drain, nothing of it is
//    left on the server (lock_server::owners) and another owner gets the
//    lock with a try.
//  - a zero wait is a try: on a server where nothing of corolock exists
//    yet, an acquire with wait 0 is granted, and a second one is refused at
//    once (lock_held or wait_timeout).
//
// Not here, because no backend-neutral statement exists: how a backend stores
// a lock (key fields, HLEN), wrong_type (a key of another type: Redis),
// pub/sub handoff and unlock-channel counts, SCRIPT FLUSH and CLIENT KILL,
// handler executors: test/integration/lock_test.cpp and bad_input_test.cpp.
#include "conformance/conformance.hpp"
#include "support/descriptors.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"  // eventually()

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <random>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using namespace corolock::test::conformance;
using corolock::error;
using corolock::error_code;
using corolock::guard;
using corolock::lock_options;

TEST_CASE("re-entry on one handle counts levels and mints rising tokens",
          "[conformance][reentry]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "reentrant"), other(b, "reentrant");
        auto g1 = co_await m.acquire({.lease = 5s, .wait = 5s});
        auto g2 = co_await m.acquire({.lease = 5s, .wait = 5s});
        auto g3 = co_await m.acquire({.lease = 5s, .wait = 5s});
        CHECK(m.held_levels() == 3);
        const bool fenced = fencing_tokens(*server);
        if (fenced) {
            CHECK(g1.token() < g2.token());
            CHECK(g2.token() < g3.token());
        } else {
            // RedLock: a re-entry joins the tenure, without a round, and
            // carries its token (docs/redlock.md).
            CHECK(g2.token() == g1.token());
            CHECK(g3.token() == g1.token());
        }
        {
            const auto got = co_await other.try_acquire();
            CHECK_FALSE(got);
        }
        // Levels release in any order; the lock stays until the last.
        {
            const auto ec = co_await g2.release();
            CHECK_FALSE(ec);
        }
        {
            const auto ec = co_await g1.release();
            CHECK_FALSE(ec);
        }
        CHECK(m.held_levels() == 1);
        {
            const auto got = co_await other.try_acquire();
            CHECK_FALSE(got);
        }
        {
            const auto ec = co_await g3.release();
            CHECK_FALSE(ec);
        }
        CHECK(m.held_levels() == 0);
        auto g4 = co_await other.try_acquire();
        REQUIRE(g4);
        if (fenced) CHECK(g4->token() > g3.token());
        // Twice, and on an empty guard.
        {
            const auto ec = co_await g3.release();
            CHECK(ec == error::released);
        }
        guard empty;
        {
            const auto ec = co_await empty.release();
            CHECK(ec == error::released);
        }
        {
            const auto ec = co_await g4->release();
            CHECK_FALSE(ec);
        }
        b.stop();
    }, 30s);
}

TEST_CASE("a release after the lease ended or another owner took over never reports success",
          "[conformance][release]") {
    auto server = start_server();
    const auto lease = 300ms;
    const auto gone_within = std::chrono::duration_cast<std::chrono::milliseconds>(
        lease + server->expiry_slack() + 3s);
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex a(b, "rel"), other(b, "rel");
        const lock_options short_lease{.lease = lease, .wait = 5s, .watchdog = false};
        // RedLock ends the tenure at its deadline: lock_lost for both.
        const auto ends_itself = server->ends_tenure_at_deadline();
        if (!ends_itself.empty())
            WARN("expired and not_owner read as lock_lost on " << server->backend() << ": "
                                                                << ends_itself);
        const auto expired = ends_itself.empty() ? error::expired : error::lock_lost;
        const auto not_owner = ends_itself.empty() ? error::not_owner : error::lock_lost;

        // Expired: the lease ran out and the lock is gone (another owner
        // came and went), so there is nothing left to release.
        auto g1 = co_await a.acquire(short_lease);
        {
            auto x = co_await try_until(other, {.lease = 5s}, gone_within);
            REQUIRE(x);
            const auto ec = co_await x->release();
            CHECK_FALSE(ec);
        }
        {
            const auto ec = co_await g1.release();
            INFO(ec.message());
            CHECK(ec == expired);
        }

        // Not the owner: someone else holds it now, and keeps it.
        auto g2 = co_await a.acquire(short_lease);
        auto taken = co_await try_until(other, {.lease = 5s}, gone_within);
        REQUIRE(taken);
        {
            const auto ec = co_await g2.release();
            INFO(ec.message());
            CHECK(ec == not_owner);
        }
        {
            corolock::mutex third(b, "rel");
            const auto got = co_await third.try_acquire();
            CHECK_FALSE(got);  // the release did not touch the new owner's lock
        }
        {
            const auto ec = co_await taken->release();
            CHECK_FALSE(ec);
        }

        // Lost, then the same handle took a new tenure: the old level's
        // release must not report success (nor free the new tenure).
        auto g3 = co_await a.acquire(short_lease);
        {
            auto x = co_await try_until(other, {.lease = 5s}, gone_within);
            REQUIRE(x);
            const auto ec = co_await x->release();
            CHECK_FALSE(ec);
        }
        auto g4 = co_await a.acquire({.lease = 5s, .wait = 5s});
        {
            const auto ec = co_await g3.release();
            INFO(ec.message());
            CHECK(ec == error::lock_lost);
        }
        {
            const auto got = co_await other.try_acquire();
            CHECK_FALSE(got);  // g4's tenure is intact
        }
        {
            const auto ec = co_await g4.release();
            CHECK_FALSE(ec);
        }
        b.stop();
    }, 60s);
}

TEST_CASE("bad input gets a clear error and touches nothing", "[conformance][bad-input]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());

    // Names: refused by the mutex constructor, with the reason as what().
    const std::vector<std::pair<std::string, std::string>> names = {
        {"empty", ""},
        {"oversized", std::string(corolock::max_lock_name_length + 1, 'n')},
        {"braces", "a{b}c"},
    };
    for (const auto& [what, name] : names) {
        INFO("name: " << what);
        try {
            corolock::mutex m(b, name);
            FAIL("accepted");
        } catch (const boost::system::system_error& e) {
            CHECK(e.code() == error::invalid_argument);
            CHECK(std::string(e.what()).find("lock name") != std::string::npos);
        }
    }
    CHECK_NOTHROW(corolock::mutex(b, std::string(corolock::max_lock_name_length, 'n')));

    // URLs: refused by the backend constructor, with the reason as what().
    // backend.hpp documents error::invalid_argument; the Redis URL parser
    // reports error::invalid_url (config.hpp). Either is accepted here, and
    // a code other than invalid_argument is reported as a warning.
    const std::vector<std::pair<std::string, std::string>> urls = {
        {"malformed", "redis://127.0.0.1:notaport"},
        {"no scheme", "127.0.0.1:6379"},
        {"unknown scheme", "nosuchbackend://127.0.0.1:1"},
    };
    for (const auto& [what, url] : urls) {
        INFO("url: " << what << " " << url);
        try {
            corolock::backend bad(ioc.get_executor(), url);
            FAIL("accepted");
        } catch (const boost::system::system_error& e) {
            const bool documented = e.code() == error::invalid_argument;
            CHECK((documented || e.code() == error::invalid_url));
            if (!documented)
                WARN("url " << what << ": " << e.code().message() << " (" << e.code().value()
                            << "), not invalid_argument as backend.hpp says");
            CHECK(std::string(e.what()).size() > e.code().message().size());
        }
    }

    // Options: refused by acquire, before anything is sent.
    struct bad_options {
        const char* what;
        lock_options o;
    };
    const std::vector<bad_options> table = {
        {"zero lease", {.lease = 0s}},
        {"negative lease", {.lease = -1s}},
        {"lease under 10 ms", {.lease = 5ms}},
        {"negative wait", {.wait = -1s}},
        {"renew interval above the lease", {.lease = 1s, .renew_interval = 2s}},
        {"renew interval too close to the lease", {.lease = 1s, .renew_interval = 990ms}},
    };
    corolock::backend second(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "input");
        for (const auto& row : table) {
            INFO("options: " << row.what);
            auto [ec1, g1] = co_await m.async_acquire(row.o, use_nothrow);
            CHECK(ec1 == error::invalid_argument);
            CHECK_FALSE(g1.owns_lock());
            auto [ec2, g2] = co_await m.async_try_acquire(row.o, use_nothrow);
            if (row.o.wait && *row.o.wait < 0s) {
                // lock_options.hpp says try_acquire ignores wait; the core
                // refuses a negative one there too. Either is safe; the
                // difference from the documentation is reported.
                CHECK((!ec2 || ec2 == error::invalid_argument));
                if (ec2) WARN("try_acquire with a negative wait: " << ec2.message()
                              << " (lock_options.hpp: try_acquire ignores wait)");
                if (!ec2) co_await g2.release();
            } else {
                CHECK(ec2 == error::invalid_argument);
            }
            CHECK(m.held_levels() == 0);
        }
        // Nothing was touched: another connection gets the name at once.
        corolock::mutex check(second, "input");
        auto g = co_await check.try_acquire({.lease = 5s});
        CHECK(g);
        if (g) {
            const auto ec = co_await g->release();
            CHECK_FALSE(ec);
        }
        b.stop();
        second.stop();
    }, 30s);
}

TEST_CASE("cancelling acquires at random points never leaves a lock held by nobody",
          "[conformance][cancel]") {
    using namespace asio::experimental::awaitable_operators;
    auto server = start_server();
    const auto lease = 2s;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    corolock::backend fresh(ioc.get_executor(), server->url());
    constexpr int coroutines = 4;
    constexpr int trials = 40;
    int granted = 0, aborted = 0, other = 0, released_ok = 0, finished = 0;
    std::vector<std::unique_ptr<corolock::mutex>> handles;
    for (int i = 0; i < coroutines; ++i)
        handles.push_back(std::make_unique<corolock::mutex>(b, "cancel"));
    // The cancellation points are spread over a few uncontended acquires'
    // time on this backend (two etcd round trips take longer than one Redis
    // script), so that some acquires are granted and some cancelled.
    std::chrono::microseconds spread{4000};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        {
            corolock::mutex probe(fresh, "cancel-probe");
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 3; ++i) {
                auto g = co_await probe.acquire({.lease = 5s});
                co_await g.release();
            }
            const auto one = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - t0) / 3;
            spread = std::max(spread, 4 * one);
        }
        for (int c = 0; c < coroutines; ++c) {
            asio::co_spawn(ex, [&, c]() -> asio::awaitable<void> {
                std::mt19937 rng(static_cast<unsigned>(1000 + c));
                corolock::mutex& m = *handles[static_cast<std::size_t>(c)];
                for (int t = 0; t < trials; ++t) {
                    asio::steady_timer timer(co_await asio::this_coro::executor,
                                             std::chrono::microseconds(rng() % spread.count()));
                    auto r = co_await (m.async_acquire({.lease = lease, .wait = 10s}, use_nothrow) ||
                                       timer.async_wait(use_nothrow));
                    if (r.index() == 0) {
                        auto& [ec, g] = std::get<0>(r);
                        if (!ec) {
                            ++granted;
                            asio::steady_timer hold(co_await asio::this_coro::executor,
                                                    std::chrono::microseconds(rng() % 1000));
                            co_await hold.async_wait(use_nothrow);
                            const auto rec = co_await g.release();
                            if (!rec) ++released_ok;
                            else UNSCOPED_INFO("release: " << rec.message());
                        } else if (ec == asio::error::operation_aborted) {
                            ++aborted;
                        } else {
                            ++other;
                            UNSCOPED_INFO("acquire: " << ec.message());
                        }
                    } else {
                        ++aborted;  // the timer won: the acquire was cancelled
                    }
                }
                ++finished;
            }, asio::detached);
        }
        {
            const auto done = co_await eventually([&] { return finished == coroutines; }, 60s);
            REQUIRE(done);
        }
        for (const auto& h : handles) CHECK(h->held_levels() == 0);
        // Nothing is held by nobody: a fresh owner on another connection gets
        // the lock within the lease (a grant that landed after its cancel is
        // given back, or expires with its lease).
        corolock::mutex probe(fresh, "cancel");
        auto g = co_await try_until(
            probe, {.lease = 5s},
            std::chrono::duration_cast<std::chrono::milliseconds>(lease + server->expiry_slack()));
        REQUIRE(g);
        const auto ec = co_await g->release();
        CHECK_FALSE(ec);
        b.stop();
        fresh.stop();
    }, 90s);
    std::cout << "cancellation: " << granted << " granted, " << aborted << " cancelled, " << other
              << " other, of " << coroutines * trials << std::endl;
    CHECK(granted + aborted + other == coroutines * trials);
    CHECK(other == 0);
    CHECK(released_ok == granted);
    CHECK(granted > 0);
    CHECK(aborted > 0);
}

TEST_CASE("the server frees the lock within the lease while the client is frozen in any state",
          "[conformance][frozen]") {
    auto server = start_server();
    if (!proxy_in_lock_path(*server)) return;
    const auto lease = 1000ms;
    struct state {
        std::string what;
        std::string needle;  // the request after which the proxy freezes; "": at once
        std::vector<corolock::sql_statement> statements;
        std::chrono::milliseconds runs;  // how long the frozen request may run on the server
    };
    std::vector<state> states{{"holding, idle", "", {}, 0ms}};
    if (server->runs_locked_statements()) {
        states.push_back({"inside its locked transaction, right after BEGIN", "BEGIN",
                          {{"SELECT 1", {}}}, 0ms});
        // Longer than the test's bound: only the server's statement timeout
        // can end it in time.
        states.push_back({"mid-statement", "pg_sleep", {{"SELECT pg_sleep(30)", {}}}, lease});
    }
    int round = 0;
    for (const auto& s : states) {
        INFO("frozen " << s.what);
        fault_proxy proxy(server->port(), "127.0.0.1", fault_proxy::framing::raw);
        asio::io_context ioc;
        corolock::backend frozen_side(ioc.get_executor(), server->url_via(proxy.port()));
        corolock::backend other_side(ioc.get_executor(), server->url());
        run_async(ioc, [&]() -> asio::awaitable<void> {
            const std::string name = "frozen" + std::to_string(round);
            corolock::mutex held(frozen_side, name), other(other_side, name);
            auto g = co_await held.acquire({.lease = lease, .wait = 10s});
            if (s.needle.empty()) {
                proxy.pause();
            } else {
                proxy.freeze_after_next(s.needle);
                asio::co_spawn(
                    ioc,
                    [&]() -> asio::awaitable<void> {
                        co_await corolock::async_execute_locked(g, s.statements, use_nothrow);
                    },
                    asio::detached);
                for (int i = 0; i < 1000 && !proxy.froze(); ++i) co_await sleep_for(5ms);
                REQUIRE(proxy.froze());
            }
            const auto frozen_at = std::chrono::steady_clock::now();
            const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(
                s.runs + lease + server->expiry_slack() + lease);
            auto taken = co_await try_until(other, {.lease = 5s}, bound);
            const auto taken_at = std::chrono::steady_clock::now();
            REQUIRE(taken);
            std::cout << server->backend() << ", frozen " << s.what << ": the next owner "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(taken_at - frozen_at)
                             .count()
                      << " ms after the freeze (lease " << lease.count() << " ms)" << std::endl;
            // The frozen guard's deadline came first, and its lost signal fires.
            CHECK(g.lease_deadline() <= taken_at);
            const auto r1_ = co_await eventually([&] { return g.lost(); }, 5s);
            CHECK(r1_);
            const auto r2_ = co_await taken->release();
            CHECK_FALSE(r2_);
            frozen_side.stop();
            other_side.stop();
        }, 60s);
        proxy.heal();
        ++round;
    }
}

TEST_CASE("a re-entry after a lost tenure never joins it", "[conformance][reentry]") {
    auto server = start_server();
    const auto lease = 300ms;
    const auto gone_within = std::chrono::duration_cast<std::chrono::milliseconds>(
        lease + server->expiry_slack() + 3s);
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    corolock::backend other_side(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex h(b, "rejoin"), other(other_side, "rejoin");
        auto g1 = co_await h.acquire({.lease = lease, .wait = 5s, .watchdog = false});
        std::uint64_t others_token = 0;
        {
            // The lease runs out; another owner takes the lock and leaves.
            auto x = co_await try_until(other, {.lease = 5s}, gone_within);
            REQUIRE(x);
            others_token = x->token();
            const auto r3_ = co_await x->release();
            CHECK_FALSE(r3_);
        }
        auto g2 = co_await h.acquire({.lease = 5s, .wait = 5s});
        const auto r4_ = co_await eventually([&] { return g1.lost(); }, 5s);
        CHECK(r4_);
        CHECK_FALSE(g2.lost());
        CHECK(h.held_levels() == 1);  // a tenure of its own, not a second level of g1's
        if (fencing_tokens(*server)) CHECK(g2.token() > others_token);
        {
            const auto ec = co_await g1.release();
            INFO(ec.message());
            CHECK(ec);
        }
        const auto r5_ = co_await other.try_acquire();
        CHECK_FALSE(r5_);  // g2's tenure is intact
        const auto r6_ = co_await g2.release();
        CHECK_FALSE(r6_);
        b.stop();
        other_side.stop();
    }, 60s);
}

TEST_CASE("a given-up attempt leaves nothing on the server", "[conformance][given-up]") {
    auto server = start_server();
    if (!proxy_in_lock_path(*server)) return;
    for (const bool answer_lost : {false, true}) {
        INFO((answer_lost ? "the answer lost" : "the answer late"));
        fault_proxy proxy(server->port(), "127.0.0.1", fault_proxy::framing::raw);
        asio::io_context ioc;
        corolock::backend b(ioc.get_executor(), server->url_via(proxy.port()));
        corolock::backend other_side(ioc.get_executor(), server->url());
        const std::string name = answer_lost ? "given-up-lost" : "given-up-late";
        run_async(ioc, [&]() -> asio::awaitable<void> {
            {
                // The lock's own structures exist (ZooKeeper's directory):
                // the frozen request below is the acquire's own.
                corolock::mutex first(b, name);
                auto g = co_await first.acquire({.lease = 5s, .wait = 10s});
                const auto r7_ = co_await g.release();
                CHECK_FALSE(r7_);
            }
            proxy.freeze_after_next(server->wire_marker(name));
            corolock::mutex m(b, name);
            asio::cancellation_signal cancel;
            std::optional<error_code> result;
            asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
                auto [ec, g] = co_await m.async_acquire(
                    {.lease = 5s, .wait = 30s},
                    asio::bind_cancellation_slot(cancel.slot(), use_nothrow));
                result = ec;
            }, asio::detached);
            const auto r8_ = co_await eventually([&] { return proxy.froze(); }, 10s);
            REQUIRE(r8_);
            cancel.emit(asio::cancellation_type::terminal);
            const auto r9_ = co_await eventually([&] { return result.has_value(); }, 10s);
            REQUIRE(r9_);
            CHECK(*result == asio::error::operation_aborted);
            if (answer_lost) proxy.reset_all();
            proxy.heal();
            {
                auto [ec] = co_await b.async_drain(15s, use_nothrow);
                INFO(ec.message());
                CHECK_FALSE(ec);
            }
            const auto r10_ =
                co_await eventually([&] { return server->owners(name).empty(); }, 10s, 50ms);
            CHECK(r10_);
            corolock::mutex late(other_side, name);
            auto got = co_await late.try_acquire();
            CHECK(got);
            if (got) {
                const auto r11_ = co_await got->release();
                CHECK_FALSE(r11_);
            }
            b.stop();
            other_side.stop();
        }, 60s);
    }
}

TEST_CASE("a zero wait is a try, on a fresh server too", "[conformance][try]") {
    // Nothing of corolock exists on the server yet (no ZooKeeper directory,
    // no PostgreSQL table): a zero wait still answers as a try does.
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex first(b, "zero-wait"), second(b, "zero-wait");
        auto [ec, g] = co_await first.async_acquire({.lease = 5s, .wait = 0ms}, use_nothrow);
        INFO(ec.message());
        REQUIRE_FALSE(ec);
        auto [ec2, g2] = co_await second.async_acquire({.lease = 5s, .wait = 0ms}, use_nothrow);
        // Refused without waiting: lock_held as a try answers, or the spent
        // wait's wait_timeout (the mutex's documented answer to a wait).
        CHECK((ec2 == error::lock_held || ec2 == error::wait_timeout));
        const auto r12_ = co_await g.release();
        CHECK_FALSE(r12_);
        b.stop();
    }, 60s);
}

TEST_CASE("a re-entry that asks for the watchdog keeps its tenure past the lease",
          "[conformance][reentry]") {
    // The tenure began without the watchdog; a re-entry asks for it: the
    // tenure's terms join (docs/safety.md, "Tenures"), and renewals keep
    // both levels past the first lease.
    auto server = start_server();
    const auto lease = 1000ms;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    corolock::backend other_side(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex h(b, "join-watchdog"), other(other_side, "join-watchdog");
        auto g1 = co_await h.acquire({.lease = lease, .wait = 5s, .watchdog = false});
        if (const auto why = server->reentry_cannot_add_watchdog(); !why.empty()) {
            WARN("refused, not joined, on " << server->backend() << ": " << why);
            auto [ec, g] = co_await h.async_acquire({.lease = lease, .wait = 5s}, use_nothrow);
            CHECK(ec == error::invalid_argument);
            CHECK(h.held_levels() == 1);
            const auto e1 = co_await g1.release();
            CHECK_FALSE(e1);
            b.stop();
            other_side.stop();
            co_return;
        }
        const auto first_end = g1.lease_deadline();
        auto g2 = co_await h.acquire({.lease = lease, .wait = 5s});
        // Until the first lease and the server's expiry slack are over (a
        // tenure without renewals would be lost, and the lock free), and
        // renewals have moved the deadline a whole lease past the first.
        const auto renewed = co_await eventually([&] {
            return std::chrono::steady_clock::now() > first_end + server->expiry_slack() &&
                   g1.lease_deadline() > first_end + lease;
        }, 10s);
        CHECK(renewed);
        CHECK_FALSE(g1.lost());
        CHECK_FALSE(g2.lost());
        const auto taken = co_await other.try_acquire();
        CHECK_FALSE(taken);
        const auto e2 = co_await g2.release();
        CHECK_FALSE(e2);
        const auto e1 = co_await g1.release();
        CHECK_FALSE(e1);
        b.stop();
        other_side.stop();
    }, 60s);
}

TEST_CASE("every descriptor the backend opens is close-on-exec", "[conformance][cloexec]") {
    // A child that execs (corolock run's COMMAND, a forked worker) must not
    // inherit the connection to the lock server: it could speak for the
    // holder, or keep its session (and so its lock) alive after the holder
    // is gone. Looked at while the lock is held, every connection open.
    auto server = start_server();
    asio::io_context ioc;
    const auto before = open_descriptors();
    corolock::backend b(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(b, "cloexec");
        auto g = co_await m.acquire({.lease = 10s});
        const auto opened = opened_since(before);
        for (const auto& [fd, cloexec] : opened) {
            INFO("descriptor " << fd);
            CHECK(cloexec);
        }
        CHECK(opened.size() >= 1);  // the connection to the server at least
        const auto released = co_await g.release();
        CHECK_FALSE(released);
        b.stop();
    }, 60s);
}

TEST_CASE("a backend stopped just before its io_context ends leaves no connection open",
          "[conformance][lifetime]") {
    // stop() closes the connections on the backend's executor. An
    // io_context destroyed before that step ran (run_async returns as soon
    // as the body ends) must close them all the same, and free what they
    // own (LeakSanitizer checks that under ASan), here with a lock held and
    // its release in flight. A connection left open would be a leak, and
    // on a session store (ZooKeeper) the handle that keeps the lock's
    // session.
    auto server = start_server();
    const auto before = open_descriptors();
    {
        asio::io_context ioc;
        corolock::backend b(ioc.get_executor(), server->url());
        run_async(ioc, [&]() -> asio::awaitable<void> {
            corolock::mutex m(b, "lifetime");
            auto g = co_await m.acquire({.lease = 10s});
            CHECK_FALSE(opened_since(before).empty());
            b.stop();
        }, 60s);  // `g`'s release is still in flight when the body ends
    }
    std::map<int, bool> left;
    const bool closed = wait_until([&] { return (left = opened_since(before)).empty(); }, 10000ms);
    for (const auto& [fd, cloexec] : left) UNSCOPED_INFO("descriptor " << fd << " still open");
    CHECK(closed);
}
