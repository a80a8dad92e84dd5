// The ZooKeeper backend across a leader failover: a three-server ensemble
// on loopback holds the locks; lock_worker processes (test/worker, "cycle"
// mode) take them through a URL that lists all three servers, while the
// protected resource (the non-atomic counter and the fenced oracle) lives on
// a separate redis-server. The leader is killed with SIGKILL while one
// worker of a name holds it and the others wait.
//
// What it asserts, from the merged histories (test/support/history.hpp):
//  - I1: no two holders of a name inside their safe windows, across the
//    failover; I2: tokens (zxids) still rise, and the fenced oracle refuses
//    every stale write; I3, I5; the counters end exact.
//  - waiters get through: each name is granted again after the kill, and
//    every worker exits cleanly.
// It prints the time from the kill to the first grant after it (no timed
// assertion: speed belongs to bench/).
//
// The session is the lease: sessions survive the election (the new leader
// restores them with a fresh timeout) when their clients reconnect within
// the timeout; a holder whose heartbeats go unanswered for longer is told
// lost (safe, and counted by the checker, never an overlap).
//
// A second case takes the quorum away for longer than a release's retries
// and checks that the lost release is finished once it is back.
#include <corolock/corolock.hpp>

#include "fault/failover_checks.hpp"
#include "fault/fault_fleet.hpp"
#include "support/async_test.hpp"
#include "support/redis_server.hpp"
#include "support/zk_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace corolock::test;
using namespace corolock::test::fault;
using clock_type = std::chrono::steady_clock;

TEST_CASE("zk: the leader killed while locks are held and waited on", "[zk][fault][failover]") {
    const auto seed = fault_seed("zk leader failover");
    zk_server_options zo;
    zo.servers = 3;
    zk_ensemble ensemble(zo);
    redis_server resource;
    const auto lease = 2000ms;
    const std::string url = ensemble.url() + "?session_timeout_ms=2000";

    // Two names, three workers each, cycling for long enough to span the
    // kill, the election and a good run after it. The workers' duration is
    // fixed when they start (lock_worker's DURATION_MS): the kill comes as
    // soon as both names cycle, so most of it lies after the kill.
    std::vector<std::unique_ptr<fleet>> fleets;
    for (const char* name : {"failover:a", "failover:b"}) {
        fleets.push_back(std::make_unique<fleet>(
            resource,
            fleet_options{.workers = 3, .lease = lease, .hold = 120ms, .duration = 12000ms,
                          .name = name, .urls = {url}, .separate_resource = true},
            seed));
    }
    for (auto& f : fleets) f->start();

    // Both names cycle: each has passed its lock around (three grants).
    const bool cycling = wait_for_grants(fleets, 3, 0, 30s);
    REQUIRE(cycling);
    // Whom to kill, known before the moment comes (the query takes a
    // while, and a section lasts 60 to 120 ms); then the kill at once when
    // a worker of the first name is inside its critical section and
    // another waits for the lock.
    const std::size_t killed = ensemble.leader();
    const auto victim = worker_in_section_with_waiter(*fleets[0], 10s);
    REQUIRE(victim);
    const long long killed_at = mono_ns();
    ensemble.kill9(killed);
    const std::size_t new_leader = ensemble.leader();
    CHECK(new_leader != killed);

    // Waiters get through: each name is granted again after the kill. Wait
    // for it (bounded; it gives up once a name's workers have all ended)
    // rather than count on the run lasting long enough.
    const bool granted_again = wait_for_grants(fleets, 1, killed_at, 60s);
    CHECK(granted_again);

    long cycles = 0;
    for (auto& f : fleets) cycles += f->finish();
    CHECK(cycles > 0);

    const long long first_grant_after = check_fleets_across_kill(fleets, killed_at);
    REQUIRE(first_grant_after >= 0);
    std::cout << "zk leader failover: server " << killed << " killed, server " << new_leader
              << " leads; first grant " << ms_of(first_grant_after - killed_at)
              << " ms after the kill; " << cycles << " cycles in all (session 2000 ms)"
              << std::endl;
}

// A holder's release that cannot reach a quorum fails (its answer is
// lost), and its node stays while its session lives: the session survives
// the outage (the next leader restores it), so only a delete sent once the
// ensemble serves again frees the lock. The outage here outlasts any fixed
// run of retries: the leader and one follower are killed, the last server
// alone refuses clients, and the follower comes back seconds later. The
// waiter must get the lock once the quorum is back, not when the holder's
// process ends.
TEST_CASE("zk: a release lost in an outage longer than its retries is finished after it",
          "[zk][fault][failover]") {
    zk_server_options zo;
    zo.servers = 3;
    zk_ensemble ensemble(zo);
    // A session timeout far above the outage and the time a loaded machine
    // takes to restart a server and reconnect: the sessions survive, and a
    // grant well before it can only come from the delete sent again.
    const std::string url = ensemble.url() + "?session_timeout_ms=20000";
    asio::io_context ioc;
    corolock::backend holder_side(ioc.get_executor(), url);
    corolock::backend waiter_side(ioc.get_executor(), url);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex holder(holder_side, "outage"), waiter(waiter_side, "outage");
        auto g = co_await holder.acquire({.wait = 10s});
        std::optional<clock_type::time_point> granted_at;
        std::optional<corolock::guard> taken;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, t] = co_await waiter.async_acquire({.wait = 60s}, use_nothrow);
            INFO(ec.message());
            CHECK_FALSE(ec);
            if (!ec) taken.emplace(std::move(t));
            granted_at = clock_type::now();
        }, asio::detached);
        // The waiter's node is in line behind the holder's before the outage
        // (two ephemeral nodes in the lock's directory, as the leader sees
        // them), polled, bounded.
        const auto queued = [&] {
            std::size_t nodes = 0;
            try {
                for (const auto& path : ensemble.ephemerals())
                    nodes += path.find("/outage/") != std::string::npos ? 1 : 0;
            } catch (const std::exception&) {
                return false;  // no answer yet: ask again
            }
            return nodes >= 2;
        };
        const auto queue_deadline = clock_type::now() + 15s;
        bool in_line = queued();
        while (!in_line && clock_type::now() < queue_deadline) {
            co_await sleep_for(50ms);
            in_line = queued();
        }
        REQUIRE(in_line);
        REQUIRE_FALSE(granted_at);

        const std::size_t leader = ensemble.leader();
        const std::size_t follower = (leader + 1) % ensemble.size();
        ensemble.kill9(leader);
        ensemble.kill9(follower);
        const auto [rec] = co_await g.async_release(use_nothrow);
        INFO("release without a quorum: " << rec.message());
        CHECK(rec);  // its answer is lost; the node stays for now
        // The outage's length, not a bound on the code: twice the release's
        // run of retries (20, 100 ms apart), so that they are all spent.
        co_await sleep_for(4s);
        CHECK_FALSE(granted_at);

        // The follower comes back, and the two elect a leader. restart()
        // blocks this thread until the server serves (not from a thread of
        // its own: a child started there would die with that thread,
        // PR_SET_PDEATHSIG); the sessions reconnect after it.
        ensemble.restart(follower);
        const auto back_at = clock_type::now();
        for (int i = 0; i < 600 && !granted_at; ++i) co_await sleep_for(50ms);
        REQUIRE(granted_at);
        std::cout << "zk outage: the waiter got the lock "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(*granted_at - back_at)
                         .count()
                  << " ms after the quorum was back" << std::endl;
        // Well under the session timeout (20 s): the holder's session lived
        // on, so only the delete sent again freed the lock, not an expiry.
        CHECK(*granted_at - back_at < 15s);
        if (taken) {
            const auto [ec] = co_await taken->async_release(use_nothrow);
            CHECK_FALSE(ec);
        }
        holder_side.stop();
        waiter_side.stop();
    }, 90s);
}
