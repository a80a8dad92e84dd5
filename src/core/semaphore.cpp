#include <corolock/semaphore.hpp>
#include <corolock/mutex.hpp>  // validate_lock_name

#include "core/backend.hpp"
#include "core/logging.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

namespace corolock {

namespace asio = boost::asio;
using detail::escaped;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

detail::lock_spec spec_for(std::uint32_t capacity) {
    detail::lock_spec spec;
    spec.kind = detail::lock_spec::kind_t::semaphore;
    spec.capacity = capacity;
    return spec;
}

}  // namespace

semaphore::semaphore(const backend& b, std::string name, std::uint32_t capacity)
    : capacity_(capacity) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    if (capacity == 0 || capacity > max_semaphore_capacity) {
        why = "semaphore capacity must be from 1 to ";
        why += std::to_string(max_semaphore_capacity);
        why += ", got ";
        why += std::to_string(capacity);
        throw boost::system::system_error(error::invalid_argument, why);
    }
    state_ = b.impl()->make_state(std::move(name), spec_for(capacity));
}

semaphore::semaphore(client& c, std::string name, std::uint32_t capacity)
    : semaphore(c.lock_backend(), std::move(name), capacity) {}

semaphore::~semaphore() = default;

const std::string& semaphore::name() const noexcept { return state_->name; }
const std::string& semaphore::owner_id() const noexcept { return state_->owner; }
std::uint32_t semaphore::capacity() const noexcept { return capacity_; }
std::size_t semaphore::held_grants() const noexcept {
    return state_->held.load(std::memory_order_acquire);
}

asio::any_io_executor semaphore::executor() const noexcept {
    return state_->backend->get_executor();
}

void semaphore::acquire_impl(std::uint32_t permits, lock_options opts, bool try_once,
                             asio::any_completion_handler<acquire_signature> handler,
                             bool direct) {
    if (permits == 0 || permits > capacity_) {
        state_->backend->log().debug("acquire {}: {} permits of a capacity of {}",
                                     escaped{state_->name}, permits, capacity_);
        detail::complete_posted(std::move(handler), state_->backend->get_executor(),
                                error::invalid_argument, guard{});
        return;
    }
    detail::acquire_request req;
    req.permits = permits;
    detail::start_acquire(state_, opts, req, try_once, std::move(handler), direct);
}

asio::awaitable<guard> semaphore::acquire(std::uint32_t permits, lock_options opts) {
    auto [ec, g] = co_await async_acquire(permits, opts, use_nothrow);
    if (ec) throw boost::system::system_error(ec, "corolock: acquire '" + state_->name + "'");
    co_return std::move(g);
}

asio::awaitable<std::optional<guard>> semaphore::try_acquire(std::uint32_t permits,
                                                             lock_options opts) {
    auto [ec, g] = co_await async_try_acquire(permits, opts, use_nothrow);
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) throw boost::system::system_error(ec, "corolock: try_acquire '" + state_->name + "'");
    co_return std::optional<guard>(std::move(g));
}

}  // namespace corolock
