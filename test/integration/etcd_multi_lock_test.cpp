// corolock::multi_lock on etcd: the same all-or-nothing set as on Redis,
// each member an etcd mutex.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/etcd_server.hpp"
#include "support/multi_lock_checks.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock::test;

TEST_CASE("etcd: a multi-lock is all or nothing across its names", "[etcd][integration][multi]") {
    etcd_server server;
    asio::io_context ioc;
    const std::string url = "etcd://" + server.endpoint();
    corolock::backend a(ioc.get_executor(), url);
    corolock::backend b(ioc.get_executor(), url);
    const std::vector<std::string> names{"em:1", "em:2", "em:3"};
    run_async(ioc, [&]() -> asio::awaitable<void> {
        co_await check_multi_lock_between(a, b, names);
    }, 60s);
}
