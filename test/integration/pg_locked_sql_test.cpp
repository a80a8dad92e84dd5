// async_execute_locked against a real server (support/pg_server.hpp): the
// caller's statements commit with the lock, or not at all.
#include "pg/protocol.hpp"

#include "support/async_test.hpp"
#include "support/lock_testing.hpp"
#include "support/pg_locks.hpp"
#include "support/pg_server.hpp"

#include <corolock/backend.hpp>
#include <corolock/locked_sql.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <catch2/catch.hpp>

#include <future>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using corolock::error;
using corolock::sql_outcome;
using corolock::sql_statement;

namespace {

using corolock::test::use_nothrow;

// Statements built outside co_await expressions: g++ 12 cannot compile an
// initializer_list of temporaries inside one.
template <class... P>
sql_statement sql(std::string text, P&&... params) {
    sql_statement s{std::move(text), {}};
    (s.params.emplace_back(std::forward<P>(params)), ...);
    return s;
}

auto execute(const corolock::guard& g, std::vector<sql_statement> v) {
    return corolock::async_execute_locked(g, std::move(v), use_nothrow);
}

template <class... S>
auto execute(const corolock::guard& g, S&&... s) {
    std::vector<sql_statement> v;
    (v.push_back(std::forward<S>(s)), ...);
    return execute(g, std::move(v));
}

std::string scalar(const pg_server& s, const std::string& sql) {
    return s.query(sql).at(0).at(0).value_or("NULL");
}

sql_statement decrement(const std::string& sku) {
    return sql("UPDATE stock SET count = count - 1 WHERE sku = $1 AND count > 0", sku);
}

// A server with the table stock holding ('apple', 3), and two backends.
struct stock_db {
    explicit stock_db(const std::string& constraint = "") {
        server.query("CREATE TABLE stock (sku text PRIMARY KEY, count int NOT NULL" + constraint + ")");
        server.query("INSERT INTO stock VALUES ('apple', 3)");
    }
    std::string count() const { return scalar(server, "SELECT count FROM stock"); }

    pg_server server;
    asio::io_context ioc;
    corolock::backend a{ioc.get_executor(), server.url()}, b{ioc.get_executor(), server.url()};
};

asio::awaitable<void> release_cleanly(corolock::guard& g) {
    const auto ec = co_await g.release();
    CHECK_FALSE(ec);
}

// g still holds its lock (another owner's try is refused) and its session
// takes the next transaction: one more unit sold, `left` remain.
asio::awaitable<void> holds_and_sells(stock_db& db, corolock::guard& g, const std::string& left) {
    CHECK_FALSE(g.lost());
    {
        corolock::mutex other(db.b, g.name());
        auto no = co_await other.try_acquire();
        CHECK_FALSE(no);
    }
    auto [ec, out] = co_await execute(g, decrement("apple"));
    CHECK_FALSE(ec);
    CHECK(db.count() == left);
}

}  // namespace

TEST_CASE("pg sql: statements commit with the lock, with their rows", "[pg][sql]") {
    stock_db db;
    run_async(db.ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(db.a, "stock:apple");
        auto g = co_await m.acquire({.lease = 10s});
        auto [ec, out] = co_await execute(
            g, decrement("apple"),
            sql("SELECT sku, count, NULL::text AS note FROM stock WHERE sku = $1", "apple"));
        REQUIRE_FALSE(ec);
        REQUIRE(out.results.size() == 2);
        CHECK(out.results[0].command_tag == "UPDATE 1");
        CHECK(out.results[0].affected == 1);
        CHECK(out.results[0].columns.empty());
        CHECK(out.results[1].columns == std::vector<std::string>{"sku", "count", "note"});
        REQUIRE(out.results[1].rows.size() == 1);
        CHECK(out.results[1].rows[0][1] == "2");
        CHECK_FALSE(out.results[1].rows[0][2]);
        CHECK(db.count() == "2");
        CHECK_FALSE(g.lost());
        co_await release_cleanly(g);
    }, 30s);
}

// Issue 43: the acquire's wait went to the session as its lock_timeout and
// stayed there while the lock was held, so the caller's statements that wait
// for a row lock failed with 55P03 after that wait. Held, the session's
// lock_timeout is 0 again (the server's default: wait as long as it takes).
TEST_CASE("pg sql: the acquire's wait is not the locked statements' lock_timeout", "[pg][sql]") {
    stock_db db;
    run_async(db.ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(db.a, "stock:apple");
        auto g = co_await m.acquire({.lease = 10s, .wait = 1500ms});
        auto [ec, out] = co_await execute(g, sql("SHOW lock_timeout"));
        REQUIRE_FALSE(ec);
        REQUIRE(out.results.size() == 1);
        REQUIRE(out.results[0].rows.size() == 1);
        CHECK(out.results[0].rows[0][0] == "0");
        co_await release_cleanly(g);
        // Nor after a try on a pooled session that had waited before.
        auto t = co_await m.try_acquire({.lease = 10s});
        REQUIRE(t);
        auto [ec2, out2] = co_await execute(*t, sql("SHOW lock_timeout"));
        REQUIRE_FALSE(ec2);
        REQUIRE(out2.results.size() == 1);
        REQUIRE(out2.results[0].rows.size() == 1);
        CHECK(out2.results[0].rows[0][0] == "0");
        co_await release_cleanly(*t);
    }, 30s);
}

TEST_CASE("pg sql: a lost lock makes the statements fail and commits nothing", "[pg][sql][lost]") {
    stock_db db;
    run_async(db.ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(db.a, "stock:apple");
        SECTION("the holder's backend terminated") {
            auto g = co_await m.acquire({.lease = 10s});
            db.server.query("SELECT pg_terminate_backend(" + holder_pid(db.server, "stock:apple") + ")");
            auto [ec, out] = co_await execute(g, decrement("apple"));
            CHECK(ec == error::lock_lost);
            CHECK(g.lost());
        }
        SECTION("the fence row moved on (a later grant)") {
            auto g = co_await m.acquire({.lease = 10s});
            db.server.query("UPDATE corolock_locks SET fence = fence + 1 WHERE name = 'stock:apple'");
            // nextval is not undone by a rollback: none of the statements may run.
            db.server.query("CREATE SEQUENCE orders");
            auto [ec, out] = co_await execute(g, decrement("apple"), sql("SELECT nextval('orders')"));
            CHECK(ec == error::lock_lost);
            CHECK_FALSE(out.message.empty());
            CHECK(g.lost());
            CHECK(scalar(db.server, "SELECT is_called FROM orders") == "f");
        }
        SECTION("a statement unlocked the advisory lock") {
            auto g = co_await m.acquire({.lease = 10s});
            auto [ec, out] = co_await execute(
                g, decrement("apple"), sql("SELECT pg_advisory_unlock_all()"));
            CHECK(ec == error::lock_lost);
            CHECK(out.results.empty());
            CHECK(g.lost());
        }
        SECTION("the session expired (no renewals)") {
            auto g = co_await m.acquire({.lease = 1s, .watchdog = false});
            co_await sleep_for(1500ms);
            auto [ec, out] = co_await execute(g, decrement("apple"));
            CHECK(ec == error::lock_lost);
        }
        CHECK(db.count() == "3");
    }, 30s);
}

TEST_CASE("pg sql: a failing statement rolls back and leaves the lock held", "[pg][sql]") {
    stock_db db(" CHECK (count >= 0)");
    run_async(db.ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(db.a, "stock:apple");
        auto g = co_await m.acquire({.lease = 10s});
        {
            auto [ec, out] = co_await execute(
                g, decrement("apple"), sql("UPDATE stock SET count = count - 10 WHERE sku = $1", "apple"));
            CHECK(ec == error::server_error);
            CHECK(out.sqlstate == "23514");  // check_violation
            CHECK(out.failed_statement == 1);
            CHECK(out.message.find("violates check constraint") != std::string::npos);
            CHECK(out.results.empty());
        }
        CHECK(db.count() == "3");
        co_await holds_and_sells(db, g, "2");
        // Refused before anything is sent.
        static constexpr const char* refused[] = {"COMMIT", "  /* x */ rollback", "begin",
                                                  "COPY stock FROM STDIN"};
        for (const char* text : refused) {
            auto [rec, rout] = co_await execute(g, decrement("apple"), sql(text));
            CHECK(rec == error::invalid_argument);
            CHECK(rout.failed_statement == 1);
        }
        CHECK(db.count() == "2");
        co_await release_cleanly(g);
    }, 30s);
}

TEST_CASE("pg sql: parameters travel apart from the text", "[pg][sql]") {
    pg_server server;
    server.query("CREATE TABLE notes (id serial PRIMARY KEY, body text)");
    asio::io_context ioc;
    corolock::backend a(ioc.get_executor(), server.url());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(a, "notes");
        auto g = co_await m.acquire({.lease = 10s});
        const std::string nasty = "O'Brien'); DROP TABLE notes; -- $1 \\ \"";
        auto [ec, out] = co_await execute(
            g, sql("INSERT INTO notes (body) VALUES ($1), ($2) RETURNING body", nasty, std::nullopt));
        REQUIRE_FALSE(ec);
        REQUIRE(out.results.size() == 1);
        CHECK(out.results[0].command_tag == "INSERT 0 2");
        REQUIRE(out.results[0].rows.size() == 2);
        CHECK(out.results[0].rows[0][0] == nasty);
        CHECK_FALSE(out.results[0].rows[1][0]);
        CHECK(scalar(server, "SELECT body FROM notes WHERE body IS NOT NULL") == nasty);
        co_await release_cleanly(g);
    }, 30s);
}

TEST_CASE("pg sql: cancelled, it rolls back; the lock stays held and the session usable",
          "[pg][sql][cancel]") {
    stock_db db;
    run_async(db.ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(db.a, "stock:apple");
        auto g = co_await m.acquire({.lease = 10s});
        asio::cancellation_signal cancel;
        std::optional<corolock::error_code> result;
        std::vector<sql_statement> tx{decrement("apple"), sql("SELECT pg_sleep(0.5)"),
                                      decrement("apple")};
        corolock::async_execute_locked(
            g, std::move(tx),
            asio::bind_cancellation_slot(cancel.slot(),
                                         [&](corolock::error_code ec, sql_outcome) { result = ec; }));
        co_await sleep_for(200ms);
        cancel.emit(asio::cancellation_type::terminal);
        const bool answered = co_await eventually([&] { return result.has_value(); }, 5000ms);
        REQUIRE(answered);
        CHECK(result == asio::error::operation_aborted);
        CHECK(db.count() == "3");
        co_await holds_and_sells(db, g, "2");
        co_await release_cleanly(g);
    }, 30s);
}

TEST_CASE("pg sql: a transaction longer than the lease keeps the lock; renewals wait their turn",
          "[pg][sql]") {
    stock_db db;
    run_async(db.ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex m(db.a, "stock:apple");
        auto g = co_await m.acquire({.lease = 1500ms});
        std::vector<sql_statement> slow;
        for (int i = 0; i < 4; ++i) slow.push_back(sql("SELECT pg_sleep(0.6)"));
        slow.push_back(decrement("apple"));
        auto [ec, out] = co_await execute(g, std::move(slow));
        CHECK_FALSE(ec);
        CHECK_FALSE(g.lost());
        CHECK(db.count() == "2");
        co_await sleep_for(2s);  // renewals go on after it
        co_await holds_and_sells(db, g, "1");
        co_await release_cleanly(g);
    }, 30s);
}

TEST_CASE("pg sql: an empty guard is refused", "[pg][sql]") {
    corolock::guard none;
    auto answer = corolock::async_execute_locked(none, {sql("SELECT 1")}, asio::use_future);
    REQUIRE(answer.wait_for(5s) == std::future_status::ready);
    try {
        answer.get();
        FAIL("an empty guard ran SQL");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == error::released);
    }
}
