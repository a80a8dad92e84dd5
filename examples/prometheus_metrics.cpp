// Exporting a client's lock metrics: a few coroutines take turns on one
// lock, an observer reports losses as they happen, and the client's metrics
// are printed in the Prometheus text format at the end.
//
//   prometheus_metrics [redis://127.0.0.1:6379]
//
// A long-running service would instead return
// corolock::to_prometheus(redis.metrics()) from its /metrics endpoint
// (Content-Type: text/plain; version=0.0.4): metrics() may be called from
// any thread, at any time, and takes no lock.
#include <corolock/corolock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Callbacks run on the client's strand: they must return quickly.
struct log_losses : corolock::observer {
    void on_lost(std::string_view lock, std::string_view why) override {
        std::cerr << "lost lock " << lock << ": " << why << "\n";
    }
    void on_reconnected() override { std::cerr << "reconnected to Redis\n"; }
};

asio::awaitable<void> worker(corolock::client& redis, int rounds) {
    corolock::mutex lock{redis, "example:report"};
    asio::steady_timer work(co_await asio::this_coro::executor);
    for (int i = 0; i < rounds; ++i) {
        auto guard = co_await lock.acquire({.lease = 10s, .wait = 10s});
        work.expires_after(2ms);  // the critical section
        co_await work.async_wait(asio::use_awaitable);
        co_await guard.release();
    }
}

int main(int argc, char** argv) {
    const char* env = std::getenv("REDIS_URL");
    auto cfg = corolock::config::from_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379");
    cfg.observer = std::make_shared<log_losses>();
    asio::io_context ioc;
    corolock::client redis{ioc.get_executor(), cfg};

    constexpr int workers = 4;
    int running = workers;
    int status = 0;
    for (int w = 0; w < workers; ++w) {
        asio::co_spawn(ioc, worker(redis, 5), [&](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    std::cerr << "prometheus_metrics: " << ex.what() << "\n";
                }
                status = 1;
            }
            if (--running == 0) redis.stop();
        });
    }
    ioc.run();
    std::cout << corolock::to_prometheus(redis.metrics(), {{"client", "example"}});
    return status;
}
