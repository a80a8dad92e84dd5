// Helpers shared by the tests that talk to a live server: a client
// configuration tuned for tests, bounded waits, and the lock's key names.
#pragma once

#include <corolock/client.hpp>
#include <corolock/config.hpp>
#include <corolock/reply.hpp>

#include "support/async_test.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace corolock::test {

// The server's URL with short timeouts and a fast reconnect, so a fault
// costs a test milliseconds, not the library's production defaults. Logs in
// as the restricted user when that run is on (see restricted_user).
corolock::config config_for(const redis_server& server);

// config_for() without the restricted user, ever: for a client that runs
// arbitrary commands on arbitrary keys (the generic client's own tests), or
// that tests the default user's credentials. Not a lock client.
corolock::config plain_config_for(const redis_server& server);

// Where a test keeps the data its lock clients touch inside a critical
// section (counters standing for the protected resource): under the lock's
// key prefix, which the restricted user's key pattern (~corolock:*) covers.
inline constexpr const char* data_prefix = "corolock:test-data:";

// The URL a lock client in another process uses: server.url(), with the
// restricted user's credentials when that run is on.
std::string client_url(const redis_server& server);

// CLOCK_MONOTONIC in nanoseconds: the clock every process on this machine
// shares, so events of several processes can be ordered exactly.
long long mono_ns();

// The lock's hash key (see docs/protocol.md).
std::string lock_key(const std::string& name);

// Waits, bounded, until pred() holds, asking it every `every`; other
// coroutines run meanwhile. Returns whether it held in time. A look at a
// server through a fixture (each may be a connection of its own) asks less
// often: every 50 ms.
template <class Pred>
boost::asio::awaitable<bool> eventually(Pred pred, std::chrono::milliseconds limit,
                                        std::chrono::milliseconds every = std::chrono::milliseconds(2)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline) co_return false;
        co_await sleep_for(every);
    }
    co_return true;
}

// Waits, bounded, until the client reports a live connection (it offers no
// notification, so this polls its flag); fails the test if it does not.
boost::asio::awaitable<void> wait_connected(corolock::client& c,
                                            std::chrono::milliseconds limit = std::chrono::seconds(5));

// The first line of a child's output starting with prefix, waiting up to
// limit for it; empty when none came.
std::string wait_for_line(child_process& p, const std::string& prefix,
                          std::chrono::milliseconds limit);

// Runs body(client, server) on a fresh redis-server and a connected
// config_for() client, within `limit`.
template <class Body>
void with_client(Body body, std::chrono::seconds limit = std::chrono::seconds(25)) {
    redis_server server;
    boost::asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> boost::asio::awaitable<void> {
        co_await wait_connected(c);
        co_await body(c, server);
    }, limit);
    c.stop();
}

// How many acquires wait on the client's unlock channels (all locks).
std::size_t local_waiters(corolock::client& c);

// Field i of a lock script's array reply, as an integer; fails the test on
// an error reply or a shorter array.
std::int64_t script_int(const corolock::reply& r, std::size_t i);

// Whether a semaphore or shared-lock script reply is a grant (field 0 is 1).
inline bool script_granted(const corolock::reply& r) { return script_int(r, 0) == 1; }

}  // namespace corolock::test
