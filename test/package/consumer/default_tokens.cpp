// Every public async_* called without a completion token (admin.hpp's
// aside): each must default to one that co_await accepts (deferred), as
// Boost.Asio's own operations do from 1.86. Compiled only, never run.
#include <corolock/corolock.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <utility>

namespace {

using namespace std::chrono_literals;

[[maybe_unused]] boost::asio::awaitable<void> every_operation_without_a_token(
    corolock::client& c, corolock::backend& b) {
    co_await c.async_exec(corolock::command{"PING"});
    co_await c.async_drain(1s);
    co_await b.async_drain(1s);

    corolock::mutex m{c, "m"};
    auto g = co_await m.async_acquire({});
    co_await g.async_until_lost();
    co_await corolock::async_execute_locked(g, {});
    co_await g.async_release();
    std::optional<corolock::guard> tried;
    tried.emplace(co_await m.async_try_acquire({}));

    corolock::fair_mutex f{c, "f"};
    co_await f.async_acquire({});
    co_await f.async_try_acquire({});

    corolock::semaphore s{c, "s", 2};
    co_await s.async_acquire(1, {});
    co_await s.async_try_acquire(1, {});

    corolock::shared_mutex sm{c, "sm"};
    co_await sm.async_acquire({});
    co_await sm.async_acquire_shared({});
    co_await sm.async_try_acquire({});
    co_await sm.async_try_acquire_shared({});

    corolock::multi_lock ml{c, {"a", "b"}};
    auto mg = co_await ml.async_acquire({});
    co_await ml.async_try_acquire({});
    co_await mg.async_until_lost();
    co_await mg.async_release();
}

}  // namespace
