// The URL entry point: the scheme picks the backend.
#include <corolock/backend.hpp>

#include "core/backend.hpp"
#include "redis/redis_backend.hpp"

#include <utility>

namespace corolock {

namespace {

std::shared_ptr<detail::lock_backend> open(boost::asio::any_io_executor ex, std::string_view url) {
    // Every scheme but the other backends' goes to the Redis URL parser,
    // which explains what is wrong with a URL without echoing a secret.
    return detail::connect_redis(std::move(ex), url);
}

}  // namespace

backend::backend(executor_type ex, std::string_view url)
    : impl_(open(std::move(ex), url)), owning_(true) {}

backend::backend(std::shared_ptr<detail::lock_backend> impl, bool owning) noexcept
    : impl_(std::move(impl)), owning_(owning) {}

backend& backend::operator=(backend&& other) noexcept {
    if (this != &other) {
        if (owning_ && impl_) impl_->stop();
        impl_ = std::move(other.impl_);
        owning_ = std::exchange(other.owning_, false);
    }
    return *this;
}

backend::~backend() {
    if (owning_ && impl_) impl_->stop();
}

backend::executor_type backend::get_executor() const noexcept {
    return impl_ ? impl_->get_executor() : executor_type{};
}
std::string_view backend::scheme() const noexcept { return impl_ ? impl_->scheme() : ""; }
metrics_snapshot backend::metrics() const noexcept {
    return impl_ ? impl_->metrics() : metrics_snapshot{};
}
void backend::stop() noexcept {
    if (impl_) impl_->stop();
}

}  // namespace corolock
