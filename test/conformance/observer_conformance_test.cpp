// Conformance of backend_config's logger and observer (corolock/backend.hpp)
// on every backend opened by URL: each hears the backend's own lock events,
// and what the observer hears agrees with the backend's metrics.
//
// What the case asserts:
//  - a grant and a clean release: one on_acquired for the lock's name,
//    no loss, nothing found gone;
//  - a lease that runs out without the watchdog: on_lost for the name, once,
//    heard by the time the guard's lost signal has fired; the injected
//    logger (not corolock's default) has the warning that names the lock;
//  - the lost guard's release fails, and whatever the backend counts as a
//    release that found its lock gone, the observer heard as often;
//  - the observer's counts equal metrics(): acquisitions, leases lost,
//    releases found gone (one home for "count and tell").
#include "conformance/conformance.hpp"

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;
using namespace corolock::test::conformance;

namespace {

struct counting_observer final : corolock::observer {
    std::vector<std::string> acquired, lost, found_gone;
    void on_acquired(std::string_view lock, duration, bool) override {
        acquired.emplace_back(lock);
    }
    void on_lost(std::string_view lock, std::string_view) override { lost.emplace_back(lock); }
    void on_release_found_gone(std::string_view lock, corolock::error_code) override {
        found_gone.emplace_back(lock);
    }
};

}  // namespace

TEST_CASE("the logger and the observer of backend_config hear the backend's lock events",
          "[conformance][observer]") {
    auto server = start_server();
    auto events = std::make_shared<counting_observer>();
    auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
    auto logger = std::make_shared<spdlog::logger>("conformance-observer", sink);
    logger->set_level(spdlog::level::warn);
    corolock::backend_config cfg;
    cfg.logger = logger;
    cfg.observer = events;

    asio::io_context ioc;
    corolock::backend b(ioc.get_executor(), server->url(), cfg);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        corolock::mutex a(b, "observed");
        {
            auto g = co_await a.acquire({.lease = 5s, .wait = 5s});
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
        }
        CHECK(events->acquired == std::vector<std::string>{"observed"});
        CHECK(events->lost.empty());
        CHECK(events->found_gone.empty());

        auto g = co_await a.acquire({.lease = 300ms, .wait = 5s, .watchdog = false});
        co_await g.until_lost();
        CHECK(events->acquired.size() == 2);
        CHECK(events->lost == std::vector<std::string>{"observed"});
        const auto ec = co_await g.release();
        CHECK(ec);
        for (const auto& name : events->found_gone) CHECK(name == "observed");

        const auto m = b.metrics();
        CHECK(m.acquisitions == events->acquired.size());
        CHECK(m.leases_lost == events->lost.size());
        CHECK(m.releases_found_gone == events->found_gone.size());

        bool logged = false;
        for (const auto& line : sink->last_formatted())
            if (line.find("observed") != std::string::npos) logged = true;
        CHECK(logged);
        b.stop();
    }, 30s);
}
