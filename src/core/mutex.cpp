#include <corolock/mutex.hpp>

#include "core/backend.hpp"
#include "core/logging.hpp"
#include "core/watchdog_schedule.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>

namespace corolock {

namespace asio = boost::asio;
using detail::escaped;
using detail::lock_state;
using clock = std::chrono::steady_clock;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

}  // namespace

error_code validate_lock_name(std::string_view name, std::string& why) {
    if (name.empty()) {
        why = "lock name is empty";
        return error::invalid_argument;
    }
    if (name.size() > max_lock_name_length) {
        why = "lock name is " + std::to_string(name.size()) + " bytes; the limit is " +
              std::to_string(max_lock_name_length);
        return error::invalid_argument;
    }
    // A plain scan: find_first_of searches the set once per byte of the name.
    if (std::any_of(name.begin(), name.end(), [](char c) { return c == '{' || c == '}'; })) {
        why = "lock name contains '{' or '}' (the name is the keys' cluster hash tag)";
        return error::invalid_argument;
    }
    why.clear();
    return {};
}

namespace detail {
error_code normalize_options(lock_options& o, std::string& why) {
    using std::chrono::milliseconds;
    if (o.lease < min_lease) {
        const auto floor = std::to_string(min_lease.count()) + " ms";
        why = o.lease.count() <= 0 ? "lease must be positive (at least " + floor + ")"
                                   : "lease must be at least " + floor;
        return error::invalid_argument;
    }
    if (o.wait && o.wait->count() < 0) {
        why = "wait must not be negative";
        return error::invalid_argument;
    }
    if (o.renew_interval.count() < 0 || (o.renew_interval.count() > 0 && o.renew_interval >= o.lease)) {
        why = "renew_interval must be positive and below the lease";
        return error::invalid_argument;
    }
    o.renew_interval = o.renew_interval_or_default();
    if (o.replicas < 0) {
        why = "replicas must not be negative";
        return error::invalid_argument;
    }
    if (o.replicas_timeout.count() < 0 || o.replicas_timeout >= o.lease) {
        why = "replicas_timeout must be positive and below the lease";
        return error::invalid_argument;
    }
    o.replicas_timeout = o.replicas_timeout_or_default();
    // A renewal sent at the interval must have time for its round trip (and
    // a retry) before the local deadline: at least a quarter of the lease.
    if (o.watchdog && o.lease - detail::watchdog_schedule::drift(o.lease) - o.renew_interval <
                          o.lease / 4) {
        why = "renew_interval leaves less than a quarter of the lease for the renewal's round "
              "trip before the deadline (at most lease * 3/4 - lease/100 - 2 ms)";
        return error::invalid_argument;
    }
    return {};
}
}  // namespace detail

mutex::mutex(const backend& b, std::string name) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    state_ = b.impl()->make_state(std::move(name));
}

mutex::mutex(client& c, std::string name) : mutex(c.lock_backend(), std::move(name)) {}

mutex::~mutex() = default;

const std::string& mutex::name() const noexcept { return state_->name; }
const std::string& mutex::owner_id() const noexcept { return state_->owner; }
std::size_t mutex::held_levels() const noexcept {
    return state_->held.load(std::memory_order_acquire);
}

asio::any_io_executor mutex::executor() const noexcept { return state_->backend->get_executor(); }

namespace detail {
void start_acquire(const std::shared_ptr<lock_state>& st, lock_options opts,
                   const acquire_request& req, bool try_once,
                   asio::any_completion_handler<void(error_code, guard)> handler, bool direct) {
    std::string why;
    if (auto ec = normalize_options(opts, why); ec) {
        st->backend->log().debug("acquire {}: {}", escaped{st->name}, escaped{why});
        complete_posted(std::move(handler), st->backend->get_executor(), ec, guard{});
        return;
    }
    st->backend->acquire(st, opts, req, try_once, std::move(handler), direct);
}
}  // namespace detail

void mutex::acquire_impl(lock_options opts, bool try_once,
                         asio::any_completion_handler<acquire_signature> handler, bool direct) {
    detail::start_acquire(state_, opts, {}, try_once, std::move(handler), direct);
}

asio::awaitable<guard> mutex::acquire(lock_options opts) {
    auto [ec, g] = co_await async_acquire(opts, use_nothrow);
    if (ec) throw boost::system::system_error(ec, "corolock: acquire '" + state_->name + "'");
    co_return std::move(g);
}

asio::awaitable<std::optional<guard>> mutex::try_acquire(lock_options opts) {
    auto [ec, g] = co_await async_try_acquire(opts, use_nothrow);
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) throw boost::system::system_error(ec, "corolock: try_acquire '" + state_->name + "'");
    co_return std::optional<guard>(std::move(g));
}

}  // namespace corolock
