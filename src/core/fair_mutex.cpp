#include <corolock/fair_mutex.hpp>
#include <corolock/mutex.hpp>

#include "core/backend.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace corolock {

namespace asio = boost::asio;

fair_mutex::fair_mutex(const backend& b, std::string name) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    detail::lock_spec spec;
    spec.kind = detail::lock_spec::kind_t::fair_mutex;
    state_ = b.impl()->make_state(std::move(name), spec);
}

fair_mutex::fair_mutex(client& c, std::string name) : fair_mutex(c.lock_backend(), std::move(name)) {}

fair_mutex::~fair_mutex() = default;

const std::string& fair_mutex::name() const noexcept { return state_->name; }
const std::string& fair_mutex::owner_id() const noexcept { return state_->owner; }
std::size_t fair_mutex::held_levels() const noexcept {
    return state_->held.load(std::memory_order_acquire);
}

asio::any_io_executor fair_mutex::executor() const noexcept {
    return state_->backend->get_executor();
}

void fair_mutex::acquire_impl(lock_options opts, bool try_once,
                              asio::any_completion_handler<acquire_signature> handler,
                              bool direct) {
    detail::start_acquire(state_, opts, {}, try_once, std::move(handler), direct);
}

asio::awaitable<guard> fair_mutex::acquire(lock_options opts) {
    auto [ec, g] = co_await async_acquire(opts, asio::as_tuple(asio::use_awaitable));
    if (ec) throw boost::system::system_error(ec, "corolock: acquire '" + state_->name + "'");
    co_return std::move(g);
}

asio::awaitable<std::optional<guard>> fair_mutex::try_acquire(lock_options opts) {
    auto [ec, g] = co_await async_try_acquire(opts, asio::as_tuple(asio::use_awaitable));
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) throw boost::system::system_error(ec, "corolock: try_acquire '" + state_->name + "'");
    co_return std::optional<guard>(std::move(g));
}

}  // namespace corolock
