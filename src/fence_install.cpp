// async_fence_install (include/corolock/fence.hpp): the fence of the
// backend's own service. Here, above the backends, as connect.cpp is: a
// PostgreSQL backend installs corolock.fence() (pg/pg_fence.cpp) with its
// URL and request timeout; every other backend is the Redis side's
// (redis/fence/fenced_exec.cpp), which refuses what is not Redis.
#include <corolock/fence.hpp>

#include "core/backend.hpp"
#ifdef COROLOCK_HAVE_POSTGRESQL
#include "pg/pg_backend.hpp"
#include "pg/pg_fence.hpp"
#endif
#include "redis/fence/fence_library.hpp"

#include <boost/asio/co_spawn.hpp>

#include <exception>
#include <memory>
#include <tuple>
#include <utility>

namespace corolock::detail {

namespace {

#ifdef COROLOCK_HAVE_POSTGRESQL
// The install's outcome as the Redis install's reply reads: a status "OK",
// or an error reply with the reason.
reply install_reply(error_code ec, std::string why) {
    reply r;
    r.type = ec ? resp3_type::simple_error : resp3_type::simple_string;
    r.str = ec ? std::move(why) : std::string("OK");
    return r;
}

// On a connection of its own: nothing of the backend is held, so the
// install may outlive it.
void install_pg_fence(const pg::pg_backend& b, fence_handler handler, bool direct) {
    using result = std::tuple<error_code, std::string>;
    auto ex = b.get_executor();
    boost::asio::co_spawn(
        b.strand(), pg::install_fence(ex, b.options().url, b.options().request_timeout),
        [h = std::move(handler), direct, ex](std::exception_ptr e, result r) mutable {
            auto [ec, why] = std::move(r);
            if (e) {
                ec = error::client_stopped;
                why = "fence install: the backend stopped";
            }
            complete_now(std::move(h), direct, ex, ec, install_reply(ec, std::move(why)));
        });
}
#endif

}  // namespace

void fence_install_impl(const std::shared_ptr<lock_backend>& b, fence_handler handler,
                        bool direct) {
#ifdef COROLOCK_HAVE_POSTGRESQL
    if (const auto* pg = dynamic_cast<const pg::pg_backend*>(b.get()))
        return install_pg_fence(*pg, std::move(handler), direct);
#endif
    install_redis_fence(b, std::move(handler), direct);
}

}  // namespace corolock::detail
