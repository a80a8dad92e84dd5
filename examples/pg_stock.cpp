// The seeds' stock decrement with the lock in the database: the decrement
// and the order commit in the lock's own transaction, or not at all, and
// the table needs no fence column (docs/postgresql.md).
//
//   pg_stock postgresql://user@127.0.0.1/db [sku]
#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<int> sell_one(corolock::backend& db, std::string sku) {
    corolock::mutex lock{db, "stock:" + sku};
    auto guard = co_await lock.acquire({.lease = 10s, .wait = 5s});
    // Built before the co_await: g++ 12 cannot compile an initializer_list of
    // temporaries inside one.
    std::vector<corolock::sql_statement> tx{
        {"CREATE TABLE IF NOT EXISTS stock (sku text PRIMARY KEY, units int NOT NULL)", {}},
        {"INSERT INTO stock VALUES ($1, 10) ON CONFLICT DO NOTHING", {sku}},
        {"UPDATE stock SET units = units - 1 WHERE sku = $1 AND units > 0 RETURNING units", {sku}}};
    auto [ec, out] = co_await corolock::async_execute_locked(guard, std::move(tx),
                                                             asio::as_tuple(asio::use_awaitable));
    co_await guard.release();
    if (ec) {
        std::cerr << "pg_stock: " << ec.message() << ": " << out.message << "\n";
        co_return 1;
    }
    const auto& sold = out.results.back();
    if (sold.affected == 0)
        std::cout << sku << ": sold out\n";
    else
        std::cout << sku << ": sold one, " << sold.rows[0][0].value_or("?") << " left (token "
                  << guard.token() << ")\n";
    co_return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: pg_stock postgresql://user@host/db [sku]\n";
        return 2;
    }
    asio::io_context ioc;
    int status = 1;
    try {
        corolock::backend db{ioc.get_executor(), argv[1]};
        asio::co_spawn(ioc, sell_one(db, argc > 2 ? argv[2] : "sku-1"),
                       [&](std::exception_ptr e, int rc) {
                           db.stop();  // ends its sessions: run() returns
                           status = rc;
                           if (!e) return;
                           try {
                               std::rethrow_exception(e);
                           } catch (const std::exception& ex) {
                               std::cerr << "pg_stock: " << ex.what() << "\n";
                               status = 1;
                           }
                       });
        ioc.run_for(30s);
    } catch (const std::exception& ex) {
        std::cerr << "pg_stock: " << ex.what() << "\n";
    }
    return status;
}
