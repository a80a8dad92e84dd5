#include "redis/lock/redis_backend.hpp"

#include "redis/connection/client_impl.hpp"
#include "redis/lock/lock_service.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/post.hpp>

namespace corolock::detail {

boost::asio::any_io_executor redis_backend::get_executor() const noexcept {
    return client_.get_executor();
}
const lock_backend::strand_type& redis_backend::strand() const noexcept { return client_.strand(); }
bool redis_backend::stopped() const noexcept { return client_.stopped(); }
spdlog::logger& redis_backend::log() const noexcept { return client_.log(); }
observer* redis_backend::event_observer() const noexcept { return client_.event_observer(); }
void redis_backend::stop() noexcept { client_.stop(); }
std::string_view redis_backend::scheme() const noexcept {
    const bool tls = client_.cfg().tls.enabled;
    switch (client_.cfg().mode) {
    case topology::sentinel: return tls ? "rediss+sentinel" : "redis+sentinel";
    case topology::cluster: return tls ? "rediss+cluster" : "redis+cluster";
    case topology::single: break;
    }
    return tls ? "rediss" : "redis";
}
metrics_snapshot redis_backend::metrics() const noexcept { return client_.read_metrics(); }

metrics_recorder& redis_backend::recorder() noexcept { return client_.metrics(); }

std::shared_ptr<lock_backend> redis_backend::shared() const {
    return std::shared_ptr<lock_backend>(client_.shared_from_this(),
                                         const_cast<redis_backend*>(this));
}

std::shared_ptr<lock_state> redis_backend::make_state(std::string name, const lock_spec& spec) {
    return std::make_shared<redis_lock_state>(shared(), std::move(name), spec);
}

void redis_backend::release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                            std::shared_ptr<const tenure> t, release_handler handler,
                            bool direct) {
    lock_service::of(client_)->release_level(std::static_pointer_cast<redis_lock_state>(st),
                                             level, std::move(t), std::move(handler), direct);
}

void redis_backend::release_in_background(const std::shared_ptr<lock_state>& st,
                                          std::uint64_t level) {
    auto svc = lock_service::of(client_);
    if (!svc->stopped())
        svc->release_in_background(std::static_pointer_cast<redis_lock_state>(st), level);
}

void redis_backend::abandon_tenure(const std::shared_ptr<lock_state>& base,
                                   std::shared_ptr<const tenure> t, const char* why) {
    auto st = std::static_pointer_cast<redis_lock_state>(base);
    boost::asio::post(client_.strand(), [c = client_.shared_from_this(), st = std::move(st),
                                         t = std::move(t), why] {
        if (c->stopped() || st->live() != t.get()) return;
        lock_service::of(*c)->lose_tenure(st, why);
    });
}

void redis_backend::drain(clock::duration bound, release_handler handler, bool direct) {
    boost::asio::post(client_.strand(), [c = client_.shared_from_this(), bound,
                                         h = std::move(handler), direct]() mutable {
        if (c->stopped()) {
            complete_now(std::move(h), direct, c->get_executor(),
                         error_code(error::client_stopped));
            return;
        }
        lock_service::of(*c)->work().drain(bound, std::move(h), direct);
    });
}

}  // namespace corolock::detail
