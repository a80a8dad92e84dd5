#include <corolock/mutex.hpp>  // validate_lock_name
#include <corolock/shared_mutex.hpp>

#include "core/backend.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace corolock {

namespace asio = boost::asio;

namespace {
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
}  // namespace

shared_mutex::shared_mutex(const backend& b, std::string name, shared_mutex_options o) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    detail::lock_spec spec;
    spec.kind = detail::lock_spec::kind_t::shared_mutex;
    spec.writer_preference = o.writer_preference;
    state_ = b.impl()->make_state(std::move(name), spec);
}

shared_mutex::shared_mutex(client& c, std::string name, shared_mutex_options o)
    : shared_mutex(c.lock_backend(), std::move(name), o) {}

shared_mutex::~shared_mutex() = default;

const std::string& shared_mutex::name() const noexcept { return state_->name; }
const std::string& shared_mutex::owner_id() const noexcept { return state_->owner; }
std::size_t shared_mutex::held_levels() const noexcept {
    return state_->held.load(std::memory_order_acquire);
}

asio::any_io_executor shared_mutex::executor() const noexcept {
    return state_->backend->get_executor();
}

void shared_mutex::acquire_impl(lock_options opts, bool try_once, bool shared,
                                asio::any_completion_handler<acquire_signature> handler,
                                bool direct) {
    detail::acquire_request req;
    req.shared = shared;
    detail::start_acquire(state_, opts, req, try_once, std::move(handler), direct);
}

namespace {
[[noreturn]] void fail(error_code ec, const char* what, const std::string& name) {
    throw boost::system::system_error(ec, std::string("corolock: ") + what + " '" + name + "'");
}
}  // namespace

asio::awaitable<guard> shared_mutex::acquire(lock_options opts) {
    auto [ec, g] = co_await async_acquire(opts, use_nothrow);
    if (ec) fail(ec, "acquire", state_->name);
    co_return std::move(g);
}

asio::awaitable<guard> shared_mutex::acquire_shared(lock_options opts) {
    auto [ec, g] = co_await async_acquire_shared(opts, use_nothrow);
    if (ec) fail(ec, "acquire_shared", state_->name);
    co_return std::move(g);
}

asio::awaitable<std::optional<guard>> shared_mutex::try_acquire(lock_options opts) {
    auto [ec, g] = co_await async_try_acquire(opts, use_nothrow);
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) fail(ec, "try_acquire", state_->name);
    co_return std::optional<guard>(std::move(g));
}

asio::awaitable<std::optional<guard>> shared_mutex::try_acquire_shared(lock_options opts) {
    auto [ec, g] = co_await async_try_acquire_shared(opts, use_nothrow);
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) fail(ec, "try_acquire_shared", state_->name);
    co_return std::optional<guard>(std::move(g));
}

asio::awaitable<guard> shared_mutex::downgrade(guard& exclusive, lock_options opts) {
    if (!exclusive.owns_lock() || exclusive.lost()) fail(error::lock_lost, "downgrade", state_->name);
    // Granted at once: this owner writes, and a writer's own shared level
    // waits for nobody.
    auto [ec, shared] = co_await async_try_acquire_shared(opts, use_nothrow);
    if (ec) fail(ec, "downgrade", state_->name);
    if (auto rec = co_await exclusive.release(); rec) {
        co_await shared.release();
        fail(rec, "downgrade", state_->name);
    }
    co_return std::move(shared);
}

}  // namespace corolock
