#include "etcd/gateway_impl.hpp"

#include "etcd/codec.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>

#include <stdexcept>

namespace corolock::detail::etcd {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using asio::awaitable;

template <class Result, class Decode>
void gateway::impl::run(std::shared_ptr<gateway> self, std::string target, std::string body,
                        bool idempotent, handler<Result> h, Decode decode) {
    auto strand = self->strand_;
    asio::co_spawn(
        strand,
        [self = std::move(self), target = std::move(target), body = std::move(body), idempotent,
         h = std::move(h), decode]() mutable -> awaitable<void> {
            auto o = co_await unary(self, target, std::move(body), idempotent);
            Result r{};
            if (!o.code) {
                if (auto e = decode(o.message, r)) {
                    o.code = e->code;
                    o.message = target + ": " + e->message;
                    r = Result{};
                }
            }
            if (o.code) self->record(o.code, o.message);
            asio::dispatch(asio::append(std::move(h), o.code, std::move(r)));
        },
        asio::detached);
}

std::shared_ptr<gateway> gateway::create(asio::any_io_executor ex, gateway_options opts) {
    return std::make_shared<gateway>(private_tag{}, std::move(ex), std::move(opts));
}

gateway::gateway(private_tag, asio::any_io_executor ex, gateway_options opts)
    : strand_(asio::make_strand(std::move(ex))), impl_(std::make_shared<impl>()) {
    if (opts.endpoints.empty()) throw std::invalid_argument("etcd: no endpoint");
    for (const auto& e : opts.endpoints) impl_->endpoints.push_back(wire::parse_endpoint(e));
    if (opts.tls) {
        auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
        // TLS 1.2 at least, as for Redis, whatever the system's OpenSSL
        // configuration allows.
        SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
        ctx->set_verify_mode(ssl::verify_peer);
        if (opts.ca_file.empty()) {
            ctx->set_default_verify_paths();
        } else {
            ctx->load_verify_file(opts.ca_file);
        }
        impl_->tls_context = std::move(ctx);
    }
    impl_->opts = std::move(opts);
}

gateway::~gateway() = default;  // every coroutine holds a shared_ptr: none runs now

void gateway::record(error_code ec, std::string message) {
    std::lock_guard lock(error_mu_);
    last_error_ = {ec, std::move(message)};
}

failure gateway::last_error() const {
    std::lock_guard lock(error_mu_);
    return last_error_;
}

void gateway::range(range_request req, handler<range_result> h) {
    impl::run<range_result>(shared_from_this(), "/v3/kv/range", codec::encode_range(req), true,
                            std::move(h), codec::decode_range);
}

void gateway::txn(txn_request req, handler<txn_result> h) {
    // Idempotent only when it writes nothing.
    bool read_only = true;
    for (const auto* ops : {&req.success, &req.failure})
        for (const auto& op : *ops) read_only = read_only && std::holds_alternative<range_request>(op);
    impl::run<txn_result>(shared_from_this(), "/v3/kv/txn", codec::encode_txn(req), read_only,
                          std::move(h), codec::decode_txn);
}

void gateway::lease_grant(std::int64_t ttl_seconds, handler<lease_grant_result> h) {
    impl::run<lease_grant_result>(shared_from_this(), "/v3/lease/grant",
                                  codec::encode_lease_grant(ttl_seconds), false, std::move(h),
                                  codec::decode_lease_grant);
}

void gateway::lease_keepalive(std::int64_t id, handler<lease_keepalive_result> h) {
    impl::run<lease_keepalive_result>(shared_from_this(), "/v3/lease/keepalive",
                                      codec::encode_lease_id(id), true, std::move(h),
                                      codec::decode_lease_keepalive);
}

void gateway::lease_revoke(std::int64_t id, handler<lease_revoke_result> h) {
    impl::run<lease_revoke_result>(shared_from_this(), "/v3/lease/revoke",
                                   codec::encode_lease_id(id), true, std::move(h),
                                   codec::decode_lease_revoke);
}

void gateway::lease_timetolive(std::int64_t id, handler<lease_ttl_result> h) {
    impl::run<lease_ttl_result>(shared_from_this(), "/v3/lease/timetolive",
                                codec::encode_lease_timetolive(id), true, std::move(h),
                                codec::decode_lease_timetolive);
}

void gateway::stop() {
    asio::dispatch(strand_, [self = shared_from_this()] {
        auto& d = *self->impl_;
        if (d.stopped) return;
        d.stopped = true;
        for (auto& c : d.idle) c->close();
        d.open -= d.idle.size();
        d.idle.clear();
        for (auto* c : d.busy) c->close();
        for (auto* c : d.connecting) c->close();
        for (auto* t : d.waiters) t->cancel();
        impl::stop_watches(d);
    });
}

}  // namespace corolock::detail::etcd
