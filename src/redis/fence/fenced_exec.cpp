// async_fenced_exec and the Redis side of async_fence_install
// (include/corolock/fence.hpp; src/fence_install.cpp picks the side): one
// FCALL of the library's corolock_fenced_exec, and the library loaded once
// when the server does not have it.
#include <corolock/fence.hpp>

#include "redis/connection/client_impl.hpp"
#include "redis/topology/slot_map.hpp"
#include "redis/fence/fence_library.hpp"
#include "redis/lock/redis_backend.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>

#include <memory>
#include <utility>

namespace corolock {
namespace detail {

namespace asio = boost::asio;

namespace {

reply error_reply(std::string text) {
    reply r;
    r.type = resp3_type::simple_error;
    r.str = std::move(text);
    return r;
}

// Why the call cannot be made, or "" when it can.
std::string refusal(const client_impl& c, std::string_view fence_key,
                    const std::vector<std::string_view>& args) {
    if (fence_key.empty()) return "async_fenced_exec: the fence key is empty";
    if (args.size() < 2)
        return "async_fenced_exec: the command needs a key, as its first argument "
               "(NAME KEY [ARG ...])";
    if (c.cfg().mode == topology::cluster &&
        cluster::key_slot(fence_key) != cluster::key_slot(args[1]))
        return "async_fenced_exec: on a Redis Cluster the fence key and the data key must "
               "hash to one slot; give both the same hash tag, e.g. {stock:7}:fence and "
               "{stock:7}:count (fence key \"" + std::string(fence_key) + "\", data key \"" +
               std::string(args[1]) + "\")";
    return {};
}

// FCALL corolock_fenced_exec 2 FENCEKEY KEY TOKEN NAME ARG...
std::string fcall_payload(std::string_view fence_key, std::uint64_t token,
                          const std::vector<std::string_view>& args) {
    command fcall{"FCALL", fenced_exec_function, "2", fence_key, args[1], std::to_string(token),
                  args[0]};
    for (std::size_t i = 2; i < args.size(); ++i) fcall.arg(args[i]);
    return fcall.payload();
}

struct fenced_call : std::enable_shared_from_this<fenced_call> {
    std::shared_ptr<client_impl> impl;
    asio::any_io_executor ex;
    fence_handler handler;
    bool direct = false;
    std::string payload;
    client_impl::exec_options opts;
    bool loaded = false;  // the library was loaded once for this call
    error_code load_error;  // and how that load failed (a Cluster's primaries)
    reply load_reply;

    // The caller's cancellation slot goes with each FCALL, so it is honoured
    // as client::async_exec honours it; the library's load is not cancellable.
    void send() {
        auto on_reply = [self = shared_from_this()](error_code ec, reply r) {
            self->on_reply(ec, std::move(r));
        };
        impl->exec(payload, opts,
                   asio::bind_cancellation_slot(asio::get_associated_cancellation_slot(handler),
                                                asio::bind_executor(impl->strand(),
                                                                    std::move(on_reply))));
    }

    void on_reply(error_code ec, reply r) {
        if (ec && is_function_missing(r)) {
            if (!loaded) return load_and_resend();
            // Still missing here after a Cluster's partial load: its report.
            if (load_error) return finish(load_error, std::move(load_reply));
        }
        ec = functions_error(ec, r);
        finish(ec, std::move(r));
    }

    // On a Cluster the primaries that refused the load need not include
    // this call's: it is sent again, and fails with the load's report (the
    // primaries lacking the library) only if its own primary is one of them.
    void load_and_resend() {
        loaded = true;
        load_fence_library(impl, [self = shared_from_this()](error_code lec, reply lr) {
            if (lec && self->impl->router() == nullptr) return self->finish(lec, std::move(lr));
            self->load_error = lec;
            self->load_reply = std::move(lr);
            self->send();
        });
    }

    void finish(error_code ec, reply r) {
        if (!handler) return;
        complete_now(std::move(handler), direct, ex, ec, std::move(r));
    }
};

// The Redis client behind a backend; null for another kind of backend.
std::shared_ptr<client_impl> redis_client(const std::shared_ptr<lock_backend>& b) {
    auto* r = dynamic_cast<redis_backend*>(b.get());
    if (r == nullptr) return nullptr;
    return r->client().shared_from_this();
}

constexpr std::string_view not_redis =
    "the Redis fence needs a Redis backend or client (redis://, rediss://, "
    "redis+sentinel://, redis+cluster://); for PostgreSQL use corolock.fence() "
    "(docs/fencing.md)";

}  // namespace

void fenced_exec_impl(const std::shared_ptr<lock_backend>& b, std::string fence_key,
                      std::uint64_t token, command cmd, fence_handler handler, bool direct) {
    const auto ex = b ? b->get_executor() : asio::any_io_executor();
    auto impl = redis_client(b);
    const auto args = cmd.arguments();
    std::string why = impl ? refusal(*impl, fence_key, args) : std::string(not_redis);
    if (!why.empty()) {
        complete_posted(std::move(handler), ex, error_code(error::invalid_argument),
                        error_reply(std::move(why)));
        return;
    }
    auto call = std::make_shared<fenced_call>();
    call->impl = std::move(impl);
    call->ex = ex;
    // swap: Asio 1.81's any_completion_handler move assignment wraps the
    // source in itself without end (cluster_router.cpp says the same).
    call->handler.swap(handler);
    call->direct = direct;
    call->payload = fcall_payload(fence_key, token, args);
    call->opts.idempotent = cmd.is_idempotent();
    call->send();
}

void install_redis_fence(const std::shared_ptr<lock_backend>& b, fence_handler handler,
                         bool direct) {
    const auto ex = b ? b->get_executor() : asio::any_io_executor();
    auto impl = redis_client(b);
    if (!impl) {
        complete_posted(std::move(handler), ex, error_code(error::invalid_argument),
                        error_reply(std::string(not_redis)));
        return;
    }
    auto h = std::make_shared<fence_handler>(std::move(handler));
    load_fence_library(impl, [h, direct, ex](error_code ec, reply r) {
        complete_now(std::move(*h), direct, ex, ec, std::move(r));
    });
}

}  // namespace detail
}  // namespace corolock
