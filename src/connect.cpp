// The URL entry point: the scheme picks the backend.
#include <corolock/backend.hpp>
#include <corolock/config.hpp>

#include "core/backend.hpp"
#include "etcd/etcd_backend.hpp"
#ifdef COROLOCK_HAVE_POSTGRESQL
#include "pg/pg_backend.hpp"
#endif
#include "redis/lock/redis_backend.hpp"
#include "redlock/redlock_backend.hpp"
#include "redlock/redlock_url.hpp"
#include "schemes.hpp"
#ifdef COROLOCK_HAVE_ZOOKEEPER
#include "zk/zk_backend.hpp"
#endif

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>
#include <string>

#include <utility>

namespace corolock {

std::string detail::left_out_backend(std::string_view scheme) {
#ifndef COROLOCK_HAVE_POSTGRESQL
    if (scheme == "postgresql" || scheme == "postgres")
        return "this corolock was built without the PostgreSQL backend (libpq was not found)";
#endif
#ifndef COROLOCK_HAVE_ZOOKEEPER
    if (scheme == "zk")
        return "zk:// needs the ZooKeeper backend, which this build of corolock left out "
               "(libzookeeper_st was not found)";
#endif
    (void)scheme;
    return {};
}

namespace {

std::shared_ptr<detail::lock_backend> open(boost::asio::any_io_executor ex, std::string_view url,
                                           const backend_config& cfg) {
    const auto scheme = detail::scheme_of(url);
    switch (detail::family_of(url)) {
        case detail::scheme_family::etcd:
            return detail::etcd::connect(std::move(ex), url, cfg);
        case detail::scheme_family::postgresql:
#ifdef COROLOCK_HAVE_POSTGRESQL
            return detail::pg::connect(std::move(ex), url, cfg);
#else
            throw boost::system::system_error(make_error_code(error::invalid_url),
                                              detail::left_out_backend(scheme));
#endif
        case detail::scheme_family::zk:
#ifdef COROLOCK_HAVE_ZOOKEEPER
            return detail::zk::connect(std::move(ex), url, cfg);
#else
            throw boost::system::system_error(make_error_code(error::invalid_url),
                                              detail::left_out_backend(scheme));
#endif
        case detail::scheme_family::redlock: {
            auto parsed = detail::parse_redlock_url(url);
            return detail::connect_redlock(std::move(ex), parsed.nodes, cfg,
                                           parsed.options);
        }
        case detail::scheme_family::redis:
            // The Redis URL parser explains what is wrong with a URL without
            // a scheme, without echoing a secret.
            return detail::connect_redis(std::move(ex), url, cfg);
        case detail::scheme_family::unknown:
            break;
    }
    throw boost::system::system_error(make_error_code(error::invalid_url),
                                      "unsupported URL scheme '" + scheme + "': expected " +
                                          detail::accepted_schemes());
}

}  // namespace

backend::backend(executor_type ex, std::string_view url) : backend(std::move(ex), url, {}) {}

backend::backend(executor_type ex, std::string_view url, const backend_config& cfg)
    : impl_(open(std::move(ex), url, cfg)), owning_(true) {}

backend::backend(executor_type ex, const config& cfg)
    : impl_(detail::connect_redis(std::move(ex), cfg)), owning_(true) {}

backend backend::redlock(executor_type ex, const std::vector<std::string>& urls,
                         const backend_config& cfg) {
    return detail::backend_access::handle(detail::connect_redlock(std::move(ex), urls, cfg), true);
}

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

void detail::initiate_drain::start(boost::asio::any_completion_handler<void(error_code)> handler,
                                   bool direct, std::chrono::steady_clock::duration bound) const {
    if (!impl) {
        detail::complete_posted(std::move(handler), ex, error_code(error::client_stopped));
        return;
    }
    impl->drain(bound, std::move(handler), direct);
}

}  // namespace corolock
