#include "support/lock_testing.hpp"

#include "redis/lock/lock_service.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <time.h>

#include <sstream>
#include <thread>

namespace corolock::test {

using namespace std::chrono_literals;

corolock::config plain_config_for(const redis_server& server) {
    auto cfg = corolock::config::from_url(server.url());
    cfg.command_timeout = 2s;
    cfg.connect_timeout = 2s;
    cfg.reconnect_min = 20ms;
    cfg.reconnect_max = 200ms;
    return cfg;
}

corolock::config config_for(const redis_server& server) {
    auto cfg = plain_config_for(server);
    if (restricted_user::enabled()) {
        cfg.username = restricted_user::name;
        cfg.password = restricted_user::password;
    }
    return cfg;
}

std::string client_url(const redis_server& server) {
    std::string url = server.url();
    if (restricted_user::enabled())
        url.insert(url.find("://") + 3,
                   std::string(restricted_user::name) + ":" + restricted_user::password + "@");
    return url;
}

long long mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::string lock_key(const std::string& name) { return "corolock:{" + name + "}"; }

boost::asio::awaitable<void> wait_connected(corolock::client& c, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
    while (!c.is_connected() && std::chrono::steady_clock::now() < deadline) {
        t.expires_after(5ms);
        co_await t.async_wait(boost::asio::use_awaitable);
    }
    REQUIRE(c.is_connected());
}

std::string wait_for_line(child_process& p, const std::string& prefix,
                          std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        std::istringstream in(p.output());
        for (std::string line; std::getline(in, line);)
            if (line.rfind(prefix, 0) == 0) return line;
        std::this_thread::sleep_for(5ms);
    }
    return {};
}

std::size_t local_waiters(corolock::client& c) {
    return corolock::detail::lock_service::of(*c.impl())->waiters().total_waiters();
}

std::int64_t script_int(const corolock::reply& r, std::size_t i) {
    if (r.is_error()) FAIL("error reply: " << r.str);
    REQUIRE(r.type == corolock::resp3_type::array);
    REQUIRE(r.elements.size() > i);
    return r.elements[i].integer;
}

}  // namespace corolock::test
