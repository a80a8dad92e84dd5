// The bad-input table (docs/reliability.md): each row is one test case.
//
// Every row checks two things: the bad input gets its own clear error, and
// nothing else in flight is disturbed. The second half is a "bystander": a
// lock held with its watchdog running, plus a stream of INCR commands, on a
// client of its own or on the same client as the bad input. At the end of
// the row the bystander must still hold its lock (renewed after the bad
// input, same token), every INCR must have succeeded, and the counter on the
// server must match.
//
// The row "a malformed or oversized server reply" needs the fault proxy and
// lives in bad_reply_test.cpp.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/bystander.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::command;
using corolock::error;
using corolock::error_code;
using namespace corolock::test;

namespace {

using corolock::test::use_nothrow;

// How many times the server ran a command, from INFO commandstats.
long long calls_of(const redis_server& server, const std::string& cmd) {
    const auto info = server.cmd1({"INFO", "commandstats"});
    const auto at = info.find("cmdstat_" + cmd + ":calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(info.substr(at + cmd.size() + 15));
}

long long scripts_run(const redis_server& server) {
    return calls_of(server, "evalsha") + calls_of(server, "eval");
}

// The message of a system_error thrown by f, or "" when nothing was thrown.
template <class F>
std::pair<error_code, std::string> thrown_by(F f) {
    try {
        f();
    } catch (const boost::system::system_error& e) {
        return {e.code(), e.what()};
    }
    return {};
}

}  // namespace

TEST_CASE("bad input: an empty lock name", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "empty");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        const auto before = scripts_run(server);
        auto [ec, what] = thrown_by([&] { corolock::mutex m(c, ""); });
        CHECK(ec == error::invalid_argument);
        CHECK_THAT(what, Catch::Contains("empty"));
        CHECK(scripts_run(server) == before);
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: an oversized lock name", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "oversized");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        const auto before = scripts_run(server);
        const std::string too_long(corolock::max_lock_name_length + 1, 'n');
        auto [ec, what] = thrown_by([&] { corolock::mutex m(c, too_long); });
        CHECK(ec == error::invalid_argument);
        CHECK_THAT(what, Catch::Contains(std::to_string(corolock::max_lock_name_length)));
        CHECK(scripts_run(server) == before);
        // The limit itself is allowed.
        corolock::mutex longest(c, std::string(corolock::max_lock_name_length, 'n'));
        auto g = co_await longest.acquire({.lease = 5s});
        CHECK(g.owns_lock());
        const auto released = co_await g.release();
        CHECK_FALSE(released);
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: a lease of zero or below", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "lease");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        const auto before = scripts_run(server);
        corolock::mutex m(c, "lease-row");
        using duration = corolock::lock_options::duration;
        for (duration lease : {duration(0), duration(-1ns), duration(-30s)}) {
            auto [ec, g] = co_await m.async_acquire({.lease = lease}, use_nothrow);
            CHECK(ec == error::invalid_argument);
            CHECK_FALSE(g.owns_lock());
            auto [ec2, g2] = co_await m.async_try_acquire({.lease = lease}, use_nothrow);
            CHECK(ec2 == error::invalid_argument);
        }
        // The coroutine form throws the same code.
        error_code thrown;
        try {
            co_await m.acquire({.lease = 0s});
        } catch (const boost::system::system_error& e) {
            thrown = e.code();
        }
        CHECK(thrown == error::invalid_argument);
        CHECK(scripts_run(server) == before);
        CHECK(server.cmd1({"EXISTS", lock_key("lease-row")}) == "0");
        CHECK(m.held_levels() == 0);
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: a negative wait", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "wait");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        const auto before = scripts_run(server);
        corolock::mutex m(c, "wait-row");
        auto [ec, g] = co_await m.async_acquire({.wait = -1ms}, use_nothrow);
        CHECK(ec == error::invalid_argument);
        CHECK(scripts_run(server) == before);
        CHECK(server.cmd1({"EXISTS", lock_key("wait-row")}) == "0");
        // The same handle still works afterwards.
        auto [ec2, g2] = co_await m.async_acquire({.lease = 5s, .wait = 0s}, use_nothrow);
        CHECK_FALSE(ec2);
        const auto released = co_await g2.release();
        CHECK_FALSE(released);
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: a name whose key holds another type", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "type");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        server.cmd({"RPUSH", lock_key("typed"), "a", "b"});
        corolock::mutex m(c, "typed");
        auto [ec, g] = co_await m.async_acquire({.lease = 5s, .wait = 2s}, use_nothrow);
        CHECK(ec == error::wrong_type);
        // Redis's own words reach last_error(), with the script command.
        const auto detail = c.last_error();
        CHECK(detail.code == error::wrong_type);
        CHECK_THAT(detail.message, Catch::Contains(": WRONGTYPE Operation against a key holding "
                                                   "the wrong kind of value"));
        CHECK_THAT(detail.message, Catch::StartsWith("EVAL"));
        auto [ec2, g2] = co_await m.async_try_acquire({.lease = 5s}, use_nothrow);
        CHECK(ec2 == error::wrong_type);
        CHECK(m.held_levels() == 0);
        // The foreign key is untouched.
        CHECK(server.cmd({"LRANGE", lock_key("typed"), "0", "-1"}) ==
              std::vector<std::string>{"a", "b"});
        CHECK(server.cmd1({"TTL", lock_key("typed")}) == "-1");
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: a wrong password", "[bad-input][integration]") {
    redis_server_options opts;
    opts.password = "right-password";
    redis_server server(opts);
    asio::io_context ioc;
    // The default user's password is what this row is about.
    auto good_cfg = plain_config_for(server);
    good_cfg.password = "right-password";
    corolock::client good(ioc.get_executor(), good_cfg);
    auto bad_cfg = plain_config_for(server);
    bad_cfg.password = "wrong-password";
    corolock::client bad(ioc.get_executor(), bad_cfg);
    bystander b(good, "password");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        auto [ec, r] = co_await bad.async_exec(command{"PING"}, use_nothrow);
        CHECK(ec == error::auth_failed);
        CHECK(r.str == "HELLO: WRONGPASS invalid username-password pair or user is disabled.");
        corolock::mutex m(bad, "password-row");
        auto [ec2, g2] = co_await m.async_acquire({.lease = 5s, .wait = 1s}, use_nothrow);
        CHECK(ec2 == error::auth_failed);
        CHECK(server.cmd1({"EXISTS", lock_key("password-row")}) == "0");
        co_await b.end(server);
    });
    bad.stop();
    good.stop();
}

TEST_CASE("bad input: an unreachable host", "[bad-input][integration]") {
    redis_server server;
    // A loopback port nobody listens on: a second server, stopped.
    std::uint16_t dead_port = 0;
    {
        redis_server gone;
        dead_port = gone.port();
    }
    asio::io_context ioc;
    corolock::client good(ioc.get_executor(), config_for(server));
    auto bad_cfg = config_for(server);
    bad_cfg.port = dead_port;
    corolock::client bad(ioc.get_executor(), bad_cfg);
    bystander b(good, "unreachable");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        auto [ec, r] = co_await bad.async_exec(command{"PING"}, use_nothrow);
        INFO(ec.message());
        CHECK(ec == error::never_connected);
        CHECK(ec == corolock::condition::connection_failure);
        CHECK(r.str == "never connected: connection refused");
        CHECK(bad.last_error().message == "connection refused");
        corolock::mutex m(bad, "unreachable-row");
        auto [ec2, g2] = co_await m.async_acquire({.lease = 5s, .wait = 1s}, use_nothrow);
        INFO(ec2.message());
        CHECK(ec2 == error::never_connected);
        CHECK_FALSE(g2.owns_lock());
        // Without a wait too: it ends rather than hangs.
        auto [ec3, g3] = co_await m.async_acquire({.lease = 5s}, use_nothrow);
        CHECK(ec3 == error::never_connected);
        co_await b.end(server);
    });
    bad.stop();
    good.stop();
}

TEST_CASE("bad input: a malformed URL", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "url");
    struct row {
        const char* url;
        const char* names;  // what the message must mention
    };
    const row rows[] = {
        {"", "empty"},
        {"http://127.0.0.1:6379", "scheme"},
        {"redis://127.0.0.1:99999", "port"},
        {"redis://127.0.0.1:6379/notanumber", "database"},
        {"redis://alice:@127.0.0.1", "password"},
        {"redis://[::1", "]"},
    };
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        for (const auto& r : rows) {
            INFO("URL: " << r.url);
            auto [ec, what] = thrown_by([&] { corolock::client bad(ioc.get_executor(), r.url); });
            CHECK(ec == error::invalid_url);
            CHECK_THAT(what, Catch::Contains(r.names, Catch::CaseSensitive::No));
            corolock::config cfg;
            std::string why;
            CHECK(corolock::config::parse_url(r.url, cfg, why) == error::invalid_url);
            CHECK_FALSE(why.empty());
        }
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: releasing a guard twice", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    bystander b(c, "twice");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        corolock::mutex first(c, "twice-row"), second(c, "twice-row");
        auto g = co_await first.acquire({.lease = 5s});
        const auto once = co_await g.release();
        CHECK_FALSE(once);
        // Another owner takes the lock; the second release must not touch it.
        auto other = co_await second.acquire({.lease = 5s, .wait = 2s});
        const auto again = co_await g.release();
        CHECK(again == error::released);
        auto [ec3] = co_await g.async_release(use_nothrow);
        CHECK(ec3 == error::released);
        CHECK(other.owns_lock());
        CHECK(server.cmd1({"HGET", lock_key("twice-row"), "owner"}) == second.owner_id());
        const auto released = co_await other.release();
        CHECK_FALSE(released);
        co_await b.end(server);
    });
    c.stop();
}

TEST_CASE("bad input: using a guard after its client was stopped", "[bad-input][integration]") {
    redis_server server;
    asio::io_context ioc;
    corolock::client good(ioc.get_executor(), config_for(server));
    auto doomed = std::make_unique<corolock::client>(ioc.get_executor(), config_for(server));
    // Outlive the client they were made from.
    std::optional<corolock::mutex> m;
    corolock::guard kept;
    bystander b(good, "stopped");
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await b.begin();
        m.emplace(*doomed, "stopped-row");
        kept = co_await m->acquire({.lease = 1s});
        doomed->stop();
        const auto released = co_await kept.release();
        INFO(released.message());
        CHECK((released == error::client_stopped || released == error::not_connected));
        auto [lost] = co_await kept.async_until_lost(use_nothrow);
        CHECK((lost == error::client_stopped || lost == error::released));
        auto [ec, g2] = co_await m->async_acquire({.lease = 1s, .wait = 0s}, use_nothrow);
        CHECK((ec == error::client_stopped || ec == error::not_connected));
        // The lease runs out on the server: nothing is held past the TTL.
        const bool freed = co_await eventually(
            [&] { return server.cmd1({"EXISTS", lock_key("stopped-row")}) == "0"; }, 3000ms);
        CHECK(freed);
        co_await b.end(server);
    });
    // The client goes first; the guard and handle after it. Neither throws,
    // and (under ASan) neither touches freed memory.
    doomed.reset();
    kept = corolock::guard{};
    m.reset();
    ioc.poll();
    good.stop();
}
