// The README's quick start: sell one unit of stock under a distributed lock,
// passing the fencing token to the store.
//
//   quickstart [redis://127.0.0.1:6379]
#include <corolock/corolock.hpp>

#include <boost/asio/as_tuple.hpp>
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
// overwrite its successor's work. The Redis fence (docs/fencing.md) does it
// on the server, in one function call: HINCRBY runs only if `token` is at
// least the highest token recorded in the fence key, which shares the data
// key's hash tag. The library loads itself into Redis (7.0 or later) on
// first use.
asio::awaitable<bool> write_stock(corolock::client& redis, const std::string& sku,
                                  std::uint64_t token) {
    const std::string tag = "{stock:" + sku + "}";
    auto [ec, r] = co_await corolock::async_fenced_exec(
        redis, tag + ":fence", token, corolock::command{"HINCRBY", tag, "units", "-1"},
        asio::as_tuple(asio::use_awaitable));
    if (ec && ec != corolock::error::stale_token) throw boost::system::system_error(ec);
    co_return !ec;
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
