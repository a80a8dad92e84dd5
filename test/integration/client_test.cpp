// The connection layer against a live redis-server that each test starts on
// a free loopback port.
#include <corolock/client.hpp>
#include <corolock/mutex.hpp>
#include "redis/connection/client_impl.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <catch2/catch.hpp>

#include <cctype>
#include <string_view>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::error;
using corolock::error_code;
using corolock::reply;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;
}  // namespace

TEST_CASE("client: 1,000 coroutines issue 10,000 commands and each gets its own reply",
          "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    int finished = 0;
    int mismatches = 0;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        auto ex = co_await asio::this_coro::executor;
        for (int i = 0; i < 1000; ++i) {
            asio::co_spawn(
                ex,
                [&, i]() -> asio::awaitable<void> {
                    for (int j = 0; j < 10; ++j) {
                        const std::string value = std::to_string(i) + ":" + std::to_string(j);
                        // ECHO returns exactly what this coroutine sent, so a
                        // reply delivered to the wrong caller shows up.
                        auto [ec, r] = co_await c.async_exec(command{"ECHO", value}, use_nothrow);
                        if (ec || r.str != value) ++mismatches;
                    }
                    ++finished;
                },
                asio::detached);
        }
        asio::steady_timer t(ex);
        for (int k = 0; k < 2000 && finished < 1000; ++k) {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
    }, 60s);
    CHECK(finished == 1000);
    CHECK(mismatches == 0);
    const auto st = c.stats();
    CHECK(st.commands_sent >= 10000);
    // Auto-pipelining: concurrent commands share writes.
    CHECK(st.writes < st.commands_sent / 4);
    c.stop();
}

TEST_CASE("client: a burst queued by one handler goes out in slices, every reply in order",
          "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    constexpr int n = 1000;
    std::vector<std::string> got(n);
    int completed = 0;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        const auto before = c.stats();
        // One handler queues every command before it returns.
        for (int i = 0; i < n; ++i) {
            c.async_exec(command{"ECHO", std::to_string(i)}, [&, i](error_code ec, reply r) {
                got[i] = ec ? "error: " + ec.message() : r.str;
                ++completed;
            });
        }
        asio::steady_timer t(co_await asio::this_coro::executor);
        for (int k = 0; k < 2000 && completed < n; ++k) {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        const auto after = c.stats();
        const auto writes = after.writes - before.writes;
        // The server starts on the first slice while the rest is queued:
        // more than one write, yet still batched, in slices that grow
        // (16, 32, 64, ...: 7 writes here, not 1000 / 16).
        CHECK(writes > 1);
        CHECK(writes <= 12);
    }, 30s);
    REQUIRE(completed == n);
    for (int i = 0; i < n; ++i) CHECK(got[i] == std::to_string(i));
    c.stop();
}

TEST_CASE("client: a command queued by the handler of a read's last reply goes out at once",
          "[client][integration]") {
    // Nothing else in flight and no reply left to hand out: nothing can join
    // the command, so it is written before the handler that queued it
    // returns, not after the reader has unwound.
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    std::uint64_t writes_before = 0;
    std::uint64_t writes_after = 0;
    bool queued = false;
    std::string second;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        c.async_exec(command{"PING"}, [&](error_code ec, reply) {
            // Runs inside the client's reader: the handler's executor is the
            // client's, and this thread runs it.
            if (ec) return;
            writes_before = c.stats().writes;
            c.async_exec(command{"ECHO", "next"}, [&](error_code ec2, reply r) {
                second = ec2 ? "error: " + ec2.message() : r.str;
            });
            writes_after = c.stats().writes;
            queued = true;
        });
        asio::steady_timer t(co_await asio::this_coro::executor);
        for (int k = 0; k < 1000 && second.empty(); ++k) {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
    }, 10s);
    REQUIRE(queued);
    CHECK(writes_after == writes_before + 1);
    CHECK(second == "next");
    c.stop();
}

TEST_CASE("client: a write larger than the socket takes is finished in order",
          "[client][integration]") {
    // 16 MiB in one burst: far beyond a loopback socket's send buffer, so
    // the direct send takes only part and an asynchronous write finishes it,
    // while commands queued meanwhile wait their turn.
    corolock::test::redis_server_options opts;
    SECTION("plain TCP") {}
    SECTION("TLS") { opts.tls = true; }
    redis_server server(opts);
    asio::io_context ioc;
    auto cfg = plain_config_for(server);
    if (opts.tls) cfg.tls.ca_file = server.ca_file();
    corolock::client c(ioc.get_executor(), cfg);
    constexpr int n = 32;
    const std::size_t size = 512 * 1024;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        auto ex = co_await asio::this_coro::executor;
        int done = 0, failed = 0;
        for (int i = 0; i < n; ++i) {
            std::string value(size, static_cast<char>('a' + i % 26));
            c.async_exec(command{"SET", "big:" + std::to_string(i), std::move(value)},
                         [&](error_code ec, reply r) {
                             if (ec || r.str != "OK") ++failed;
                             ++done;
                         });
            // Small commands between the big ones.
            c.async_exec(command{"ECHO", std::to_string(i)}, [&, i](error_code ec, reply r) {
                if (ec || r.str != std::to_string(i)) ++failed;
                ++done;
            });
        }
        asio::steady_timer t(ex);
        for (int k = 0; k < 4000 && done < 2 * n; ++k) {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        CHECK(done == 2 * n);
        CHECK(failed == 0);
        for (int i = 0; i < n; i += 7) {
            auto [ec, r] = co_await c.async_exec(command{"GET", "big:" + std::to_string(i)}, use_nothrow);
            REQUIRE(!ec);
            CHECK(r.str == std::string(size, static_cast<char>('a' + i % 26)));
        }
    }, 60s);
    CHECK(c.stats().disconnects == 0);
    c.stop();
}

TEST_CASE("client: every completion token works", "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));

    SECTION("use_awaitable throws on server errors and returns replies") {
        run_async(ioc, [&]() -> asio::awaitable<void> {
            reply r = co_await c.async_exec(command{"SET", "k", "v"}, asio::use_awaitable);
            CHECK(r.str == "OK");
            bool threw = false;
            try {
                co_await c.async_exec(command{"NOSUCHCOMMAND"}, asio::use_awaitable);
            } catch (const boost::system::system_error& e) {
                threw = e.code() == error::server_error;
            }
            CHECK(threw);
        });
    }
    SECTION("deferred") {
        run_async(ioc, [&]() -> asio::awaitable<void> {
            auto op = c.async_exec(command{"PING"}, asio::deferred);
            reply r = co_await std::move(op)(asio::use_awaitable);
            CHECK(r.str == "PONG");
        });
    }
    SECTION("callback") {
        bool called = false;
        c.async_exec(command{"PING"}, [&](error_code ec, reply r) {
            called = true;
            CHECK(!ec);
            CHECK(r.str == "PONG");
        });
        for (int i = 0; i < 500 && !called; ++i) ioc.run_one_for(10ms);
        CHECK(called);
    }
    SECTION("use_future from another thread") {
        std::thread runner([&] { ioc.run_for(10s); });
        auto fut = c.async_exec(command{"ECHO", "hi"}, asio::use_future);
        REQUIRE(fut.wait_for(5s) == std::future_status::ready);
        CHECK(fut.get().str == "hi");
        c.stop();
        runner.join();
    }
    SECTION("server errors keep the server's message") {
        run_async(ioc, [&]() -> asio::awaitable<void> {
            co_await c.async_exec(command{"SET", "str", "x"}, asio::use_awaitable);
            auto [ec, r] = co_await c.async_exec(command{"HGET", "str", "f"}, use_nothrow);
            CHECK(ec == error::wrong_type);
            CHECK(r.is_error());
            CHECK_THAT(r.str, Catch::Contains("WRONGTYPE"));
        });
    }
    c.stop();
}

TEST_CASE("client: binary-safe arguments round-trip", "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        const std::string value("a\0b\r\nc", 6);
        co_await c.async_exec(command{"SET", "bin", value}, asio::use_awaitable);
        auto r = co_await c.async_exec(command{"GET", "bin"}, asio::use_awaitable);
        CHECK(r.str == value);
        co_await c.async_exec(command{"SET", "empty", ""}, asio::use_awaitable);
        r = co_await c.async_exec(command{"GET", "empty"}, asio::use_awaitable);
        CHECK(r.type == corolock::resp3_type::bulk_string);
        CHECK(r.str.empty());
        r = co_await c.async_exec(command{"GET", "missing"}, asio::use_awaitable);
        CHECK(r.is_null());
    });
    c.stop();
}

TEST_CASE("client: a killed and restarted server fails written commands and the client reconnects",
          "[client][integration][fault]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        // BLPOP keeps a command written and unanswered while we kill the server.
        auto ex = co_await asio::this_coro::executor;
        std::optional<error_code> blocked_result;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await c.async_exec(command{"BLPOP", "never", "1.5"}, use_nothrow);
            blocked_result = ec;
        }, asio::detached);
        co_await sleep_for(100ms);
        server.kill9();
        asio::steady_timer t(ex);
        for (int i = 0; i < 400 && !blocked_result; ++i) {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        REQUIRE(blocked_result);
        CHECK(*blocked_result == error::connection_lost);
        CHECK_FALSE(c.is_connected());

        server.restart();
        co_await wait_connected(c);
        auto [ec, r] = co_await c.async_exec(command{"PING"}, use_nothrow);
        CHECK(!ec);
        CHECK(r.str == "PONG");
        CHECK(c.stats().connects >= 2);
    }, 30s);
    c.stop();
}

TEST_CASE("client: an idempotent command is re-sent once after the connection drops",
          "[client][integration][fault]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        auto ex = co_await asio::this_coro::executor;
        std::optional<error_code> result;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            // BLPOP with a short timeout answers nil; re-sending it is harmless.
            auto [ec, r] = co_await c.async_exec(command{"BLPOP", "never", "0.3"}.idempotent(),
                                                 use_nothrow);
            result = ec;
        }, asio::detached);
        co_await sleep_for(100ms);
        // Drop the connection from the server side.
        server.cmd({"CLIENT", "KILL", "TYPE", "normal"});
        asio::steady_timer t(ex);
        for (int i = 0; i < 600 && !result; ++i) {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        REQUIRE(result);
        CHECK(!*result);
        CHECK(c.stats().retries >= 1);
    }, 30s);
    c.stop();
}

TEST_CASE("client: a wrong password gives auth_failed", "[client][integration]") {
    corolock::test::redis_server_options opts;
    opts.password = "right-password";
    redis_server server(opts);
    asio::io_context ioc;
    auto cfg = plain_config_for(server);
    cfg.password = "wrong-password";
    corolock::client c(ioc.get_executor(), cfg);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await c.async_exec(command{"PING"}, use_nothrow);
        CHECK(ec == error::auth_failed);
    });
    c.stop();

    // And the right one works, as an ACL user too.
    asio::io_context ioc2;
    auto good = plain_config_for(server);
    good.password = "right-password";
    corolock::client c2(ioc2.get_executor(), good);
    run_async(ioc2, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await c2.async_exec(command{"PING"}, use_nothrow);
        CHECK(!ec);
    });
    c2.stop();
}

TEST_CASE("client: an ACL user authenticates through HELLO", "[client][integration]") {
    corolock::test::redis_server_options opts;
    opts.acl_user = "locker";
    opts.acl_password = "s3cret";
    redis_server server(opts);
    asio::io_context ioc;
    auto cfg = plain_config_for(server);
    cfg.username = "locker";
    cfg.password = "s3cret";
    cfg.database = 2;
    cfg.client_name = "corolock-test";
    corolock::client c(ioc.get_executor(), cfg);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await c.async_exec(command{"CLIENT", "GETNAME"}, use_nothrow);
        CHECK(!ec);
        CHECK(r.str == "corolock-test");
        co_await c.async_exec(command{"SET", "in-db-2", "1"}, asio::use_awaitable);
    });
    CHECK(server.cmd1({"EXISTS", "in-db-2"}) == "0");  // the admin client is on db 0
    c.stop();
}

TEST_CASE("client: an unanswered command times out", "[client][integration][fault]") {
    redis_server server;
    asio::io_context ioc;
    auto cfg = plain_config_for(server);
    cfg.command_timeout = 300ms;
    corolock::client c(ioc.get_executor(), cfg);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        server.pause();
        const auto start = std::chrono::steady_clock::now();
        auto [ec, r] = co_await c.async_exec(command{"PING"}, use_nothrow);
        const auto took = std::chrono::steady_clock::now() - start;
        server.resume();
        CHECK(ec == error::timeout);
        CHECK(took >= 250ms);
        CHECK(took < 3s);
        // The client recovers once the server answers again.
        for (int i = 0; i < 100; ++i) {
            auto [ec2, r2] = co_await c.async_exec(command{"PING"}, use_nothrow);
            if (!ec2) break;
        }
        auto [ec3, r3] = co_await c.async_exec(command{"PING"}, use_nothrow);
        CHECK(!ec3);
    }, 30s);
    c.stop();
}

TEST_CASE("client: an idle connection is health-checked, and a silent server is dropped",
          "[client][integration][fault]") {
    redis_server server;
    asio::io_context ioc;
    auto cfg = plain_config_for(server);
    cfg.health_check_interval = 100ms;
    cfg.command_timeout = 300ms;
    corolock::client c(ioc.get_executor(), cfg);
    auto pings = [&] {
        const std::string info = server.cmd1({"INFO", "commandstats"});
        const auto pos = info.find("cmdstat_ping:calls=");
        return pos == std::string::npos ? 0L : std::stol(info.substr(pos + 19));
    };
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        // Idle: the client asks on its own, about once an interval.
        const long before = pings();
        co_await sleep_for(1s);
        const long idle_pings = pings() - before;
        CHECK(idle_pings >= 3);
        CHECK(idle_pings <= 12);
        // A frozen server: the unanswered PING tears the connection down.
        const auto drops = c.stats().disconnects;
        server.pause();
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (c.stats().disconnects == drops && std::chrono::steady_clock::now() < deadline)
            co_await sleep_for(10ms);
        server.resume();
        CHECK(c.stats().disconnects == drops + 1);
        co_await wait_connected(c);
    }, 30s);
    c.stop();
}

TEST_CASE("client: a cancelled command that was not written is never sent",
          "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        server.kill9();
        // Wait until the client notices, so the next command is queued, not written.
        for (int i = 0; i < 400 && c.is_connected(); ++i) co_await sleep_for(5ms);
        REQUIRE_FALSE(c.is_connected());

        asio::cancellation_signal signal;
        std::optional<error_code> result;
        c.async_exec(command{"SET", "cancelled", "1"},
                     asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, reply) {
                         result = ec;
                     }));
        co_await sleep_for(20ms);
        signal.emit(asio::cancellation_type::total);
        for (int i = 0; i < 100 && !result; ++i) co_await sleep_for(5ms);
        REQUIRE(result);
        CHECK(*result == asio::error::operation_aborted);

        server.restart();
        co_await wait_connected(c);
        auto r = co_await c.async_exec(command{"EXISTS", "cancelled"}, asio::use_awaitable);
        CHECK(r.integer == 0);
    }, 30s);
    c.stop();
}

// A cancellation emitted right after async_exec returns, before the command
// reached the connection's strand, used to find the slot empty: the command
// was sent anyway and completed with its reply.
TEST_CASE("client: a command cancelled right after it is started is never sent",
          "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> { co_await wait_connected(c); });
    for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                            asio::cancellation_type::total}) {
        asio::cancellation_signal signal;
        std::optional<error_code> result;
        c.async_exec(command{"INCR", "cancelled-early"},
                     asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, reply) {
                         result = ec;
                     }));
        signal.emit(type);
        run_async(ioc, [&]() -> asio::awaitable<void> {
            // Its reply: the connection wrote all that was queued before it.
            auto r = co_await c.async_exec(command{"PING"}, asio::use_awaitable);
            CHECK(r.str == "PONG");
        });
        REQUIRE(result);
        CHECK(*result == asio::error::operation_aborted);
    }
    CHECK(server.cmd1({"GET", "cancelled-early"}).empty());
    c.stop();
}

TEST_CASE("client: stop() ends every background task", "[client][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    std::optional<error_code> pending;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await wait_connected(c);
        auto ex = co_await asio::this_coro::executor;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await c.async_exec(command{"BLPOP", "never", "5"}, use_nothrow);
            pending = ec;
        }, asio::detached);
        co_await sleep_for(50ms);
    });
    c.stop();
    // With the client stopped and nothing else queued, run() must return by
    // itself: no timer, socket or coroutine of the client is left.
    const auto start = std::chrono::steady_clock::now();
    ioc.run_for(5s);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    CHECK(ioc.stopped());
    REQUIRE(pending);
    CHECK(*pending == error::client_stopped);
    // Using a stopped client fails cleanly.
    ioc.restart();
    std::optional<error_code> after;
    c.async_exec(command{"PING"}, [&](error_code ec, reply) { after = ec; });
    ioc.run_for(1s);
    REQUIRE(after);
    CHECK(*after == error::client_stopped);
    // The server saw the socket close: only the admin connection is left.
    auto connections = [&] {
        const std::string list = server.cmd1({"CLIENT", "LIST"});
        std::size_t n = 0;
        for (auto pos = list.find("id="); pos != std::string::npos; pos = list.find("id=", pos + 1)) ++n;
        return n;
    };
    for (int i = 0; i < 100 && connections() != 1; ++i) std::this_thread::sleep_for(10ms);
    CHECK(connections() == 1);
}

TEST_CASE("client: an io_context destroyed without running stop() frees the work queued in its clients",
          "[client][integration]") {
    // A coroutine that holds a lock and waits on a command owns, through its
    // lock handle, the client whose queue owns the coroutine. Asio destroys
    // its own pending handlers when the context goes; the client's queue is
    // not Asio's, so the client must drop it then too, or the cycle leaks
    // the coroutine, the lock state and the client.
    redis_server server;
    std::weak_ptr<int> frame_alive;
    bool waiting = false;
    {
        asio::io_context ioc;
        corolock::client c(ioc.get_executor(), plain_config_for(server));
        auto in_frame = std::make_shared<int>(0);
        frame_alive = in_frame;
        asio::co_spawn(ioc, [&c, &waiting, in_frame]() -> asio::awaitable<void> {
            corolock::mutex m(c, "abandon:lock");
            auto g = co_await m.acquire({.lease = 30s});
            waiting = true;
            // Never answered: the coroutine stays queued in the client.
            co_await c.async_exec(command{"BLPOP", "abandon:never", "0"}, asio::use_awaitable);
        }, asio::detached);
        in_frame.reset();
        for (int i = 0; i < 500 && !waiting; ++i) ioc.run_for(10ms);
        ioc.run_for(100ms);  // the BLPOP is written
        // The client goes first (its stop() is posted, and never runs), then
        // the context, without run() being called again.
    }
    REQUIRE(waiting);
    CHECK(frame_alive.expired());
}

TEST_CASE("client: several threads share one client", "[client][integration][threads]") {
    redis_server server;
    asio::io_context ioc(4);
    corolock::client c(ioc.get_executor(), plain_config_for(server));
    std::atomic<int> ok{0};
    for (int i = 0; i < 200; ++i) {
        asio::co_spawn(ioc, [&, i]() -> asio::awaitable<void> {
            for (int j = 0; j < 20; ++j) {
                auto [ec, r] = co_await c.async_exec(
                    command{"INCR", "counter:" + std::to_string(i % 7)}, use_nothrow);
                if (!ec) ++ok;
            }
        }, asio::detached);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&] { ioc.run_for(20s); });
    // run_for returns once all coroutines are done and the client is stopped.
    for (int i = 0; i < 2000 && ok < 4000; ++i) std::this_thread::sleep_for(5ms);
    c.stop();
    for (auto& t : threads) t.join();
    CHECK(ok == 4000);
    long total = 0;
    for (int k = 0; k < 7; ++k) total += std::stol(server.cmd1({"GET", "counter:" + std::to_string(k)}));
    CHECK(total == 4000);
}

namespace {
// Every byte but unreserved ones as %XX: the query's values are decoded.
std::string percent_encoded(std::string_view s) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '_' || c == '.') {
            out.push_back(c);
        } else {
            out.push_back('%');
            out.push_back(hex[u >> 4]);
            out.push_back(hex[u & 0xf]);
        }
    }
    return out;
}
}  // namespace

TEST_CASE("client: TLS options in the URL's query", "[client][integration][tls]") {
    corolock::test::redis_server_options opts;
    opts.tls = true;
    redis_server server(opts);
    // The test's timeouts, then the URL's fields, TLS options included.
    auto connect_via = [&](const std::string& query) {
        auto cfg = plain_config_for(server);
        std::string why;
        REQUIRE(!corolock::config::parse_url(server.url() + "?" + query, cfg, why));
        asio::io_context ioc;
        corolock::client c(ioc.get_executor(), cfg);
        corolock::error_code result;
        run_async(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await c.async_exec(command{"PING"}, use_nothrow);
            result = ec;
            INFO(r.str);
            if (!ec) CHECK(r.str == "PONG");
        });
        c.stop();
        return result;
    };
    const std::string ca = "tls_ca=" + percent_encoded(server.ca_file());
    const std::string wrong_ca = "tls_ca=" + percent_encoded(server.wrong_ca_file());
    CHECK_FALSE(connect_via(ca));
    CHECK(connect_via(wrong_ca) == error::tls_handshake_failed);
    // The certificate names 127.0.0.1 and localhost, nothing else.
    CHECK_FALSE(connect_via(ca + "&tls_server_name=localhost"));
    CHECK(connect_via(ca + "&tls_server_name=wrong.invalid") == error::tls_handshake_failed);
    CHECK_FALSE(connect_via(wrong_ca + "&tls_verify=no"));
}

TEST_CASE("client: TLS with verification", "[client][integration][tls]") {
    corolock::test::redis_server_options opts;
    opts.tls = true;
    redis_server server(opts);
    SECTION("the right CA connects") {
        asio::io_context ioc;
        auto cfg = plain_config_for(server);
        REQUIRE(cfg.tls.enabled);
        cfg.tls.ca_file = server.ca_file();
        corolock::client c(ioc.get_executor(), cfg);
        run_async(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await c.async_exec(command{"PING"}, use_nothrow);
            CHECK(!ec);
            CHECK(r.str == "PONG");
        });
        c.stop();
    }
    SECTION("a certificate from the wrong CA fails clearly") {
        asio::io_context ioc;
        auto cfg = plain_config_for(server);
        cfg.tls.ca_file = server.wrong_ca_file();
        corolock::client c(ioc.get_executor(), cfg);
        run_async(ioc, [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await c.async_exec(command{"PING"}, use_nothrow);
            CHECK(ec == error::tls_handshake_failed);
        });
        c.stop();
    }
}
