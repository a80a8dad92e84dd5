// The lock as an ACL user restricted to what corolock needs (docs/security.md,
// "The minimal ACL"): nothing it does may need more.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::error;
using namespace corolock::test;

namespace {
using corolock::test::use_nothrow;

// The documented list (read from docs/security.md), as ACL SETUSER arguments.
std::vector<std::string> minimal_acl(const std::string& user, bool with_time) {
    std::vector<std::string> args{"ACL", "SETUSER", user};
    for (auto& rule : restricted_user::documented_rules("locks-pw"))
        if (with_time || rule != "+time") args.push_back(std::move(rule));
    return args;
}

corolock::config as_user(const redis_server& server, const std::string& user) {
    auto cfg = config_for(server);
    cfg.username = user;
    cfg.password = "locks-pw";
    return cfg;
}
}  // namespace

TEST_CASE("acl: the lock works for a user restricted to the documented commands",
          "[acl][integration]") {
    redis_server server;
    server.cmd(minimal_acl("locks", true));
    asio::io_context ioc;
    corolock::client a(ioc.get_executor(), as_user(server, "locks"));
    corolock::client b(ioc.get_executor(), as_user(server, "locks"));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(a, "acl"), other(b, "acl");
        auto g = co_await m.acquire({.lease = 600ms});  // renewed every 200 ms
        auto inner = co_await m.acquire({.lease = 300ms});
        std::optional<corolock::guard> waited;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            waited.emplace(co_await other.acquire({.lease = 5s, .wait = 10s}));
        }, asio::detached);
        co_await sleep_for(900ms);  // past the lease: the watchdog renewed it
        CHECK_FALSE(g.lost());
        CHECK_FALSE(waited.has_value());
        auto [sec, st] = co_await corolock::async_lock_status(a, "acl", use_nothrow);
        CHECK_FALSE(sec);
        CHECK(st.levels == 2);
        co_await inner.release();
        const auto r = co_await g.release();
        CHECK_FALSE(r);
        // The waiter is woken by the unlock message, long before any TTL.
        const bool woke = co_await eventually([&] { return waited.has_value(); }, 2000ms);
        CHECK(woke);
        if (waited) co_await waited->release();
    }, 30s);
    a.stop();
    b.stop();
}

TEST_CASE("acl: the fixture's restricted user has the rules docs/security.md shows",
          "[acl][integration]") {
    const auto rules = restricted_user::documented_rules("pw");
    const auto has = [&](const char* r) {
        return std::find(rules.begin(), rules.end(), r) != rules.end();
    };
    CHECK(has(">pw"));
    CHECK(has("~corolock:*"));
    CHECK(has("&corolock:*"));
    CHECK(has("-@all"));
    CHECK(has("+evalsha"));
    CHECK(has("+time"));
    CHECK_FALSE(has("+@all"));
}

TEST_CASE("acl: in the restricted run, lock clients log in as the restricted user",
          "[acl][integration]") {
    if (!restricted_user::enabled()) {
        SUCCEED("not the restricted run (ctest -L acl)");
        return;
    }
    redis_server server;
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), config_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> { co_await wait_connected(c); });
    const std::string user = std::string("user=") + restricted_user::name + " ";
    CHECK_THAT(server.cmd1({"CLIENT", "LIST"}), Catch::Contains(user));
    c.stop();
}

TEST_CASE("acl: a user without a command the scripts call gets no_permission, not a lock",
          "[acl][integration]") {
    redis_server server;
    server.cmd(minimal_acl("notime", false));
    asio::io_context ioc;
    corolock::client c(ioc.get_executor(), as_user(server, "notime"));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(c, "acl-notime");
        auto [ec, g] = co_await m.async_try_acquire({}, use_nothrow);
        CHECK(ec == error::no_permission);
        CHECK(server.cmd1({"EXISTS", lock_key("acl-notime")}) == "0");
    }, 30s);
    c.stop();
}
