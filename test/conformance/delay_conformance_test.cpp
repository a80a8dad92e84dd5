// Conformance of lock-delay (lock_options::lock_delay; docs/safety.md,
// "Lock-delay") on every backend, through the public API.
//
// What each case asserts, on a backend that honours it:
//  - a holder that ends without a release (its backend stopped right after
//    the grant, as a crash would: no release, no renewal) keeps the name from
//    everyone until its lease plus the delay, counted from when its acquire
//    was sent (the earliest the server could have started either), and the
//    name is free after; status shows the delay and, past the lease, that
//    the name is in lock-delay (where the backend has admin);
//  - a holder whose lease ran out while it watched (no watchdog) gets its
//    lost signal at the lease, and its own clean-up does not shorten the
//    delay: the same bound;
//  - a clean release frees the name at once, delay or not: the next owner's
//    first try gets it;
//  - a delay of 0 is today's lock: the name is free once the lease ends,
//    and status shows no delay.
// On a backend that refuses it (etcd, ZooKeeper, PostgreSQL): a nonzero
// delay gets error::not_supported and leaves nothing held; 0 is accepted.
//
// The bounds on time are loose: a lower one the server cannot beat (it
// started the TTL after the acquire was sent) less its clock's tolerance,
// and the generous upper bounds of the other expiry cases.
#include "conformance/conformance.hpp"
#include "support/lock_testing.hpp"  // eventually()

#include <boost/asio/io_context.hpp>

#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using namespace corolock::test::conformance;
using corolock::error;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto lease = 1000ms;
constexpr auto delay = 2000ms;

bool admin_offered(const corolock::backend& b) { return b.scheme().substr(0, 7) != "redlock"; }

// Whether the backend under test honours lock-delay; when not, says why.
bool honours_delay(const lock_server& s) {
    const auto why = s.lock_delay_refused();
    if (why.empty()) return true;
    WARN("lock-delay refused on " << s.backend() << ": " << why);
    return false;
}

// How early a server may free a name against our steady clock: its own
// clock's rate (1%, as the drift allowance) and a few ms of rounding.
std::chrono::milliseconds clock_tolerance(std::chrono::milliseconds span) {
    return span / 100 + 20ms;
}

std::chrono::milliseconds ms_since(clock_type::time_point from, clock_type::time_point to) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(to - from);
}

// The other owner's first grant of the name after a holder's tenure ended
// without a release: never before sent + lease + delay, and within a
// generous bound after it.
asio::awaitable<void> free_only_after_delay(const lock_server& s, corolock::mutex& other,
                                            clock_type::time_point sent) {
    const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(
        lease + delay + s.expiry_slack() + 10s);
    auto taken = co_await try_until(other, {.lease = 5s}, bound);
    const auto taken_at = clock_type::now();
    REQUIRE(taken);
    const auto after = ms_since(sent, taken_at);
    INFO("the next owner got the name " << after.count() << " ms after the holder's acquire");
    CHECK(after >= lease + delay - clock_tolerance(lease + delay));
    const auto released = co_await taken->release();
    CHECK_FALSE(released);
}

}  // namespace

TEST_CASE("lock-delay: a holder that ends without a release keeps the name until lease plus delay",
          "[conformance][lock-delay]") {
    auto server = start_server();
    if (!honours_delay(*server)) return;
    asio::io_context ioc;
    corolock::backend crashed(ioc.get_executor(), server->url());
    corolock::backend watched(ioc.get_executor(), server->url());
    corolock::backend others(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        {
            INFO("a crashed holder: its backend stopped without a release");
            corolock::mutex held(crashed, "delay-crash"), other(others, "delay-crash");
            const auto sent = clock_type::now();
            auto g = co_await held.acquire(
                {.lease = lease, .wait = 10s, .watchdog = false, .lock_delay = delay});
            crashed.stop();
            if (admin_offered(others)) {
                auto [ec, st] = co_await corolock::async_lock_status(others, "delay-crash",
                                                                     use_nothrow);
                REQUIRE_FALSE(ec);
                CHECK(st.held);
                CHECK(st.lock_delay == delay);
                // Past the lease (by the holder's own deadline), it is in lock-delay.
                const auto past_lease = co_await eventually(
                    [&] { return clock_type::now() >= sent + lease + 50ms; }, 10s);
                CHECK(past_lease);
                auto [ec2, st2] = co_await corolock::async_lock_status(others, "delay-crash",
                                                                       use_nothrow);
                REQUIRE_FALSE(ec2);
                if (clock_type::now() < sent + lease + delay - 100ms) {
                    CHECK(st2.held);
                    CHECK(st2.delayed_for > 0ms);
                    CHECK(st2.delayed_for <= delay);
                }
            }
            co_await free_only_after_delay(*server, other, sent);
        }
        {
            INFO("a holder whose lease ran out while it watched");
            corolock::mutex held(watched, "delay-lapse"), other(others, "delay-lapse");
            const auto sent = clock_type::now();
            auto g = co_await held.acquire(
                {.lease = lease, .wait = 10s, .watchdog = false, .lock_delay = delay});
            const auto lost = co_await eventually([&] { return g.lost(); }, 10s);
            CHECK(lost);
            CHECK(clock_type::now() < sent + lease + delay);  // told at the lease, not the delay
            co_await free_only_after_delay(*server, other, sent);
            const auto released = co_await g.release();
            CHECK(released);  // a lost tenure's release never reports success
        }
        watched.stop();
        others.stop();
    }, 120s);
}

TEST_CASE("lock-delay: a clean release frees the name at once, and a delay of 0 is no delay",
          "[conformance][lock-delay]") {
    auto server = start_server();
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url());
    corolock::backend others(ioc.get_executor(), server->url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex held(b, "delay-clean"), other(others, "delay-clean");
        if (!honours_delay(*server)) {
            auto [ec, g] = co_await held.async_acquire({.lease = lease, .lock_delay = delay},
                                                       use_nothrow);
            CHECK(ec == error::not_supported);
            CHECK_FALSE(g.owns_lock());
            // Refused before any request: the name is free.
            auto [oec, og] = co_await other.async_try_acquire({.lease = lease}, use_nothrow);
            CHECK_FALSE(oec);
            if (!oec) {
                const auto r = co_await og.release();
                CHECK_FALSE(r);
            }
        } else {
            // The same holder's clean release, then another owner: no wait.
            auto g = co_await held.acquire({.lease = lease, .wait = 10s, .lock_delay = delay});
            const auto released = co_await g.release();
            CHECK_FALSE(released);
            auto [oec, og] = co_await other.async_try_acquire({.lease = lease}, use_nothrow);
            INFO(oec.message());
            CHECK_FALSE(oec);
            if (!oec) {
                const auto r = co_await og.release();
                CHECK_FALSE(r);
            }
            // A re-entry keeps the delay, and the clean release of the last
            // level still frees at once.
            auto g1 = co_await held.acquire({.lease = lease, .wait = 10s, .lock_delay = delay});
            auto g2 = co_await held.acquire({.lease = lease, .wait = 10s});
            CHECK(held.held_levels() == 2);
            const auto r2 = co_await g2.release();
            CHECK_FALSE(r2);
            if (admin_offered(others)) {
                auto [sec, st] = co_await corolock::async_lock_status(others, "delay-clean",
                                                                      use_nothrow);
                REQUIRE_FALSE(sec);
                CHECK(st.lock_delay == delay);
            }
            const auto r1 = co_await g1.release();
            CHECK_FALSE(r1);
            auto [rec, rg] = co_await other.async_try_acquire({.lease = lease}, use_nothrow);
            CHECK_FALSE(rec);
            if (!rec) {
                const auto r = co_await rg.release();
                CHECK_FALSE(r);
            }
        }
        {
            // Delay 0 (the default, and allowed everywhere): free at the lease end.
            auto [ec, g] = co_await held.async_acquire(
                {.lease = lease, .wait = 10s, .watchdog = false, .lock_delay = 0ms}, use_nothrow);
            REQUIRE_FALSE(ec);
            if (admin_offered(others)) {
                auto [sec, st] = co_await corolock::async_lock_status(others, "delay-clean",
                                                                      use_nothrow);
                REQUIRE_FALSE(sec);
                CHECK(st.lock_delay == 0ms);
                CHECK(st.delayed_for == 0ms);
            }
            const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(
                lease + server->expiry_slack() + 10s);
            auto taken = co_await try_until(other, {.lease = 5s}, bound);
            REQUIRE(taken);
            const auto r = co_await taken->release();
            CHECK_FALSE(r);
            (void)co_await g.release();
        }
        b.stop();
        others.stop();
    }, 120s);
}
