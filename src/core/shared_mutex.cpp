#include <corolock/shared_mutex.hpp>

#include "core/backend.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace corolock {

namespace asio = boost::asio;

namespace {
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

detail::lock_spec shared_spec(shared_mutex_options o) {
    detail::lock_spec spec;
    spec.kind = detail::lock_spec::kind_t::shared_mutex;
    spec.writer_preference = o.writer_preference;
    return spec;
}
}  // namespace

shared_mutex::shared_mutex(const backend& b, std::string name, shared_mutex_options o)
    : lock_handle(b, std::move(name), shared_spec(o)) {}

asio::awaitable<guard> shared_mutex::downgrade(guard& exclusive, lock_options opts) {
    if (!exclusive.owns_lock() || exclusive.lost()) fail(error::lock_lost, "downgrade");
    // Granted at once: this owner writes, and a writer's own shared level
    // waits for nobody.
    auto [ec, shared] = co_await async_try_acquire_shared(opts, use_nothrow);
    if (ec) fail(ec, "downgrade");
    if (auto rec = co_await exclusive.release(); rec) {
        co_await shared.release();
        fail(rec, "downgrade");
    }
    co_return std::move(shared);
}

}  // namespace corolock
