#include <corolock/detail/lock_handle.hpp>

#include <corolock/backend.hpp>
#include <corolock/mutex.hpp>  // validate_lock_name

#include "core/backend.hpp"
#include "core/logging.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

namespace corolock::detail {

namespace asio = boost::asio;

lock_handle::lock_handle(const backend& b, std::string name, const lock_spec& spec)
    : capacity_(spec.capacity) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    state_ = backend_access::impl(b)->make_state(std::move(name), spec);
    delay_offered_ = state_->backend->offers_lock_delay(spec);
}

lock_handle::~lock_handle() = default;

const std::string& lock_handle::name() const noexcept { return state_->name; }
const std::string& lock_handle::owner_id() const noexcept { return state_->owner; }
std::size_t lock_handle::levels() const noexcept { return state_->held.load(std::memory_order_acquire); }

asio::any_io_executor lock_handle::executor() const noexcept { return state_->backend->get_executor(); }

void lock_handle::start(acquire_mode m, lock_options opts,
                        asio::any_completion_handler<acquire_signature> handler, bool direct) {
    std::string why;
    auto ec = normalize_options(opts, why);
    if (!ec && capacity_ != 0 && (m.permits == 0 || m.permits > capacity_)) {
        why = std::to_string(m.permits) + " permits of a capacity of " + std::to_string(capacity_);
        ec = error::invalid_argument;
    }
    if (!ec && opts.lock_delay.count() > 0 && !delay_offered_) {
        why = "lock_delay is not supported by this backend for this kind of lock";
        ec = error::not_supported;
    }
    if (ec) {
        state_->backend->log().debug("acquire {}: {}", escaped{state_->name}, escaped{why});
        complete_posted(std::move(handler), state_->backend->get_executor(), ec, guard{});
        return;
    }
    acquire_request req;
    req.permits = m.permits;
    req.shared = m.shared;
    state_->backend->acquire(state_, opts, req, m.try_once, std::move(handler), direct);
}

void lock_handle::fail(error_code ec, const char* what) const {
    throw boost::system::system_error(ec, std::string("corolock: ") + what + " '" + state_->name + "'");
}

asio::awaitable<guard> lock_handle::acquire_or_throw(acquire_mode m, lock_options opts,
                                                     const char* what) {
    auto [ec, g] = co_await initiate(m, opts, asio::as_tuple(asio::use_awaitable));
    if (ec) fail(ec, what);
    co_return std::move(g);
}

asio::awaitable<std::optional<guard>> lock_handle::try_or_throw(acquire_mode m, lock_options opts,
                                                               const char* what) {
    m.try_once = true;
    auto [ec, g] = co_await initiate(m, opts, asio::as_tuple(asio::use_awaitable));
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) fail(ec, what);
    co_return std::optional<guard>(std::move(g));
}

}  // namespace corolock::detail
