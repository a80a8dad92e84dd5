// The PostgreSQL fence (src/pg/pg_fence.cpp) against a real server: the
// install is one transaction and idempotent, corolock.fence refuses an older
// token with SQLSTATE CLF01 in the caller's transaction, and the trigger
// example of docs/fencing.md fences every write to a table; the public
// async_fence_install runs that install on a postgresql:// backend.
#include "pg/pg_fence.hpp"

#include <corolock/backend.hpp>
#include <corolock/fence.hpp>

#include "support/async_test.hpp"
#include "support/pg_server.hpp"

#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using corolock::error;
using corolock::error_code;

namespace {

std::tuple<error_code, std::string> install(const std::string& url) {
    asio::io_context ioc;
    std::tuple<error_code, std::string> out;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        out = co_await corolock::detail::pg::install_fence(ioc.get_executor(), url, 10s);
    });
    return out;
}

// Runs `body` in a DO block that succeeds only when it raises `condition`
// (a PL/pgSQL condition name or SQLSTATE '...'); the block's own writes are
// rolled back with it.
void expect_raise(const pg_server& pg, const std::string& body, const std::string& condition) {
    pg.query("DO $$ BEGIN " + body + "; RAISE EXCEPTION 'corolock-test: not refused'; "
             "EXCEPTION WHEN " + condition + " THEN NULL; END $$");
}

std::string one(const pg_server& pg, const std::string& sql) {
    const auto rows = pg.query(sql);
    if (rows.size() != 1 || rows[0].size() != 1 || !rows[0][0])
        throw std::runtime_error("expected one value from " + sql);
    return *rows[0][0];
}

// The ```sql block that follows `marker` in docs/fencing.md.
std::string documented_sql(const std::string& marker) {
    std::ifstream in(std::string(COROLOCK_SOURCE_DIR) + "/docs/fencing.md");
    std::stringstream text;
    text << in.rdbuf();
    const std::string doc = text.str();
    const auto at = doc.find(marker);
    if (at == std::string::npos) throw std::runtime_error("docs/fencing.md has no " + marker);
    const auto start = doc.find("```sql\n", at);
    const auto end = doc.find("\n```", start + 7);
    if (start == std::string::npos || end == std::string::npos)
        throw std::runtime_error("docs/fencing.md: no sql block after " + marker);
    return doc.substr(start + 7, end - start - 7);
}

}  // namespace

TEST_CASE("pg: fence install is idempotent and corolock.fence refuses an older token",
          "[integration][pg][fence]") {
    pg_server pg;
    auto [ec, why] = install(pg.url());
    REQUIRE_FALSE(ec);
    auto [again, why2] = install(pg.url());
    CHECK_FALSE(again);
    CHECK(one(pg, "SELECT corolock.fence('stock', 5)") == "5");
    CHECK(one(pg, "SELECT corolock.fence('stock', 7)") == "7");
    // The stale caller: SQLSTATE CLF01, with the server's words.
    expect_raise(pg, "PERFORM corolock.fence('stock', 5)", "SQLSTATE 'CLF01'");
    try {
        pg.query("SELECT corolock.fence('stock', 6)");
        FAIL("a stale token was accepted");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()).find("STALE token 6 is older than 7") != std::string::npos);
    }
    // An equal token passes; other resources are apart.
    CHECK(one(pg, "SELECT corolock.fence('stock', 7)") == "7");
    CHECK(one(pg, "SELECT corolock.fence('other', 1)") == "1");
    CHECK(one(pg, "SELECT token FROM corolock.fences WHERE resource = 'stock'") == "7");
    // Bad input: invalid_parameter_value (22023), nothing recorded.
    expect_raise(pg, "PERFORM corolock.fence('bad', -1)", "invalid_parameter_value");
    expect_raise(pg, "PERFORM corolock.fence(NULL, 1)", "invalid_parameter_value");
    expect_raise(pg, "PERFORM corolock.fence('bad', NULL)", "invalid_parameter_value");
    CHECK(one(pg, "SELECT count(*) FROM corolock.fences WHERE resource = 'bad'") == "0");
    // In the caller's transaction: a refusal rolls back the caller's own write.
    pg.query("CREATE TABLE ledger (entry text)");
    expect_raise(pg, "INSERT INTO ledger VALUES ('late'); PERFORM corolock.fence('stock', 3)",
                 "SQLSTATE 'CLF01'");
    CHECK(one(pg, "SELECT count(*) FROM ledger") == "0");
}

TEST_CASE("pg: the documented trigger fences every write to a table",
          "[integration][pg][fence]") {
    pg_server pg;
    auto [ec, why] = install(pg.url());
    REQUIRE_FALSE(ec);
    pg.query("CREATE TABLE stock (sku text PRIMARY KEY, count integer NOT NULL)");
    pg.query(documented_sql("<!-- fence trigger example -->"));
    // The writers of docs/fencing.md: the token for the transaction, then the write.
    auto write = [&](const std::string& token, const std::string& stmt) {
        pg.query("DO $$ BEGIN PERFORM set_config('corolock.token', '" + token + "', true); " +
                 stmt + "; END $$");
    };
    write("7", "INSERT INTO stock VALUES ('sku-1', 10)");
    write("8", "UPDATE stock SET count = 9 WHERE sku = 'sku-1'");
    // A holder with token 7 after the holder with 8 wrote: refused, each kind of write.
    for (const std::string stmt : {"UPDATE stock SET count = 1 WHERE sku = 'sku-1'",
                                   "INSERT INTO stock VALUES ('sku-2', 1)",
                                   "DELETE FROM stock WHERE sku = 'sku-1'"}) {
        INFO(stmt);
        expect_raise(pg, "PERFORM set_config('corolock.token', '7', true); " + stmt,
                     "SQLSTATE 'CLF01'");
    }
    // No token at all: refused too.
    expect_raise(pg, "UPDATE stock SET count = 1 WHERE sku = 'sku-1'", "invalid_parameter_value");
    CHECK(one(pg, "SELECT count FROM stock WHERE sku = 'sku-1'") == "9");
    CHECK(one(pg, "SELECT count(*) FROM stock") == "1");
    write("8", "DELETE FROM stock WHERE sku = 'sku-1'");
    CHECK(one(pg, "SELECT count(*) FROM stock") == "0");
}

TEST_CASE("pg: fence install by a role that cannot create a schema leaves nothing behind",
          "[integration][pg][fence]") {
    pg_server pg;
    pg.query("CREATE ROLE weak LOGIN");
    auto url = pg.url();
    const auto at = url.find("corolock@");
    REQUIRE(at != std::string::npos);
    url.replace(at, std::string("corolock@").size(), "weak@");
    auto [ec, why] = install(url);
    CHECK(ec == error::no_permission);
    CHECK(why.find("may not create schema corolock") != std::string::npos);
    CHECK(one(pg, "SELECT count(*) FROM pg_namespace WHERE nspname = 'corolock'") == "0");
    auto [bad, bad_why] = install("postgres-sql://corolock@127.0.0.1:1/postgres");
    CHECK(bad == error::invalid_url);
}

TEST_CASE("pg: async_fence_install on a postgresql backend installs corolock.fence",
          "[integration][pg][fence]") {
    pg_server pg;
    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), pg.url());
    std::tuple<error_code, corolock::reply> first, again;
    run_async(ioc, [&]() -> asio::awaitable<void> {
        first = co_await corolock::async_fence_install(b, asio::as_tuple(asio::use_awaitable));
        again = co_await corolock::async_fence_install(b, asio::as_tuple(asio::use_awaitable));
        b.stop();
    });
    REQUIRE_FALSE(std::get<0>(first));
    CHECK(std::get<1>(first).str == "OK");
    CHECK_FALSE(std::get<0>(again));
    CHECK(one(pg, "SELECT corolock.fence('stock', 5)") == "5");
    expect_raise(pg, "PERFORM corolock.fence('stock', 4)", "SQLSTATE 'CLF01'");

    // A role that may not create the schema: the install's own reason.
    pg.query("CREATE ROLE weak LOGIN");
    auto url = pg.url();
    url.replace(url.find("corolock@"), std::string("corolock@").size(), "weak@");
    asio::io_context ioc2;
    corolock::backend weak(ioc2.get_executor(), url);
    std::tuple<error_code, corolock::reply> refused;
    run_async(ioc2, [&]() -> asio::awaitable<void> {
        refused = co_await corolock::async_fence_install(weak, asio::as_tuple(asio::use_awaitable));
        weak.stop();
    });
    CHECK(std::get<0>(refused) == error::no_permission);
    CHECK(std::get<1>(refused).is_error());
    CHECK(std::get<1>(refused).str.find("may not create schema corolock") != std::string::npos);
}
