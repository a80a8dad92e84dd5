// The README's quick start: sell one unit of stock under a distributed lock,
// passing the fencing token to the store.
//
//   quickstart [redis://127.0.0.1:6379]
#include <corolock/corolock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

// The protected store checks the token: a write carrying an older token than
// one it has already seen is refused, so a holder whose lease ran out cannot
// overwrite its successor's work.
//
// KEYS[1] the stock hash   ARGV[1] the fencing token
// Returns the units left, or -1 when the token is stale.
constexpr std::string_view fenced_decrement = R"lua(
    local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
    if tonumber(ARGV[1]) <= last then return -1 end
    redis.call('HSET', KEYS[1], 'fence', ARGV[1])
    return redis.call('HINCRBY', KEYS[1], 'units', -1)
)lua";

asio::awaitable<bool> write_stock(corolock::client& redis, const std::string& sku,
                                  std::uint64_t token) {
    const std::string key = "stock:{" + sku + "}";
    corolock::command cmd{"EVAL", fenced_decrement, "1", key};
    cmd.arg(static_cast<std::int64_t>(token));
    auto r = co_await redis.async_exec(std::move(cmd), asio::use_awaitable);
    co_return r.integer >= 0;
}

asio::awaitable<void> reserve(corolock::client& redis, std::string sku) {
    corolock::mutex lock{redis, "stock:" + sku};              // one handle = one owner
    auto guard = co_await lock.acquire({.wait = 5s});         // waits by pub/sub; the watchdog renews
    const bool written = co_await write_stock(redis, sku, guard.token());
    std::cout << "token " << guard.token() << (written ? ": sold one" : ": refused as stale")
              << "\n";
    co_await guard.release();                                 // or let the guard go
}

int main(int argc, char** argv) {
    const char* env = std::getenv("REDIS_URL");
    const std::string url = argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379";
    asio::io_context ioc;
    corolock::client redis{ioc.get_executor(), url};
    int status = 0;
    asio::co_spawn(ioc, reserve(redis, "sku-1"), [&](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::cerr << "quickstart: " << ex.what() << "\n";
            }
            status = 1;
        }
        redis.stop();
    });
    ioc.run();
    return status;
}
