#include "etcd/gateway_impl.hpp"

#include "etcd/codec.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

namespace corolock::detail::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using clock_type = std::chrono::steady_clock;
using asio::awaitable;
using asio::use_awaitable;
using wire::connection;
using wire::describe;
using wire::outcome;

// A watch on its own connection.
struct gateway::impl::watch_impl : watch_stream, std::enable_shared_from_this<watch_impl> {
    std::weak_ptr<gateway> owner;
    asio::strand<asio::any_io_executor> strand;
    watch_handler handler;
    std::unique_ptr<connection> conn;
    bool cancelled = false;
    bool finished = false;
    connection* connecting = nullptr;  // while connect() runs
    std::chrono::milliseconds idle_timeout{60'000};  // gateway_options::watch_idle_timeout

    explicit watch_impl(asio::strand<asio::any_io_executor> s) : strand(std::move(s)) {}

    void cancel() override {
        asio::dispatch(strand, [self = shared_from_this()] { self->cancel_here(error_code()); });
    }

    void cancel_here(error_code why) {
        if (!cancelled) {
            cancelled = true;
            stop_cause = why;
        }
        if (conn) conn->close();
        if (connecting) connecting->close();
    }

    void finish(error_code ec) {
        if (finished) return;
        finished = true;
        if (auto g = owner.lock()) g->impl_->watches.erase(this);
        auto h = std::move(handler);
        if (h) h(ec, watch_update{});
    }

    error_code stop_cause;

    template <class Stream>
    static awaitable<outcome> stream_on(std::shared_ptr<watch_impl> w, Stream& s,
                                        const std::string& host, std::string body,
                                        std::string token, clock_type::time_point deadline) {
        http::request<http::string_body> req{http::verb::post, "/v3/watch", 11};
        req.set(http::field::host, host);
        req.set(http::field::content_type, "application/json");
        if (!token.empty()) req.set(http::field::authorization, token);
        req.body() = std::move(body);
        req.prepare_payload();
        error_code ec;
        auto& c = *w->conn;
        c.lowest().expires_at(deadline);
        co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
        if (ec) co_return outcome{ec, "/v3/watch: " + describe(ec)};
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
        co_await http::async_read_header(s, c.buffer, parser, asio::redirect_error(use_awaitable, ec));
        if (ec) co_return outcome{ec, "/v3/watch: " + describe(ec)};
        c.lowest().expires_never();
        const unsigned status = parser.get().result_int();
        codec::watch_decoder decoder;
        std::string error_body;
        char chunk[16384];
        const auto idle = w->idle_timeout;
        for (long reads = 0; !parser.is_done() && reads < (1L << 40); ++reads) {
            parser.get().body().data = chunk;
            parser.get().body().size = sizeof chunk;
            // A watch that hears nothing for that long ends (its watchers
            // look again and it starts over): a silent or half-open
            // connection is not kept for ever.
            c.lowest().expires_after(idle);
            co_await http::async_read_some(s, c.buffer, parser, asio::redirect_error(use_awaitable, ec));
            if (ec == http::error::need_buffer) ec = {};
            if (ec == beast::error::timeout)
                co_return outcome{error::timeout, "/v3/watch: nothing heard for " +
                                                      std::to_string(idle.count()) + " ms"};
            if (ec == http::error::buffer_overflow)
                co_return outcome{error::reply_too_large,
                                  "/v3/watch: a chunk line or trailer over 1 MiB"};
            if (ec) co_return outcome{ec, "/v3/watch: " + describe(ec)};
            const std::string_view got(chunk, sizeof chunk - parser.get().body().size);
            if (status != 200) {
                if (error_body.size() < 4096) error_body.append(got.substr(0, 4096));
                continue;
            }
            std::vector<watch_update> updates;
            auto e = decoder.feed(got, updates);
            for (auto& u : updates) {
                if (w->cancelled || w->finished) break;
                w->handler(error_code(), std::move(u));
            }
            if (e) co_return outcome{e->code, "/v3/watch: " + e->message};
            if (w->cancelled) co_return outcome{asio::error::operation_aborted, "cancelled"};
        }
        if (status != 200) {
            auto e = codec::decode_error_body(status, error_body);
            co_return outcome{e.code, "/v3/watch: " + e.message, status};
        }
        co_return outcome{error::connection_lost, "/v3/watch: the server ended the stream"};
    }

    static awaitable<void> run(std::shared_ptr<gateway> self, std::shared_ptr<watch_impl> w,
                               watch_request req) {
        auto& d = *self->impl_;
        const auto deadline = clock_type::now() + d.opts.request_timeout;
        outcome o;
        o = co_await impl::authenticate(self);
        if (!o.code && !w->cancelled) {
            w->conn = co_await impl::connect(self, deadline, o, &w->connecting, &w->cancelled);
            if (w->conn && !w->cancelled) {
                const auto& ep = d.endpoints[w->conn->endpoint_index];
                auto body = codec::encode_watch_create(req);
                if (w->conn->tls) {
                    o = co_await stream_on(w, *w->conn->tls, ep.host, body, d.token, deadline);
                } else {
                    o = co_await stream_on(w, *w->conn->plain, ep.host, body, d.token, deadline);
                }
            }
        }
        if (w->conn) w->conn->close();
        error_code final = o.code ? o.code : error_code(error::connection_lost);
        if (w->cancelled) {
            final = w->stop_cause ? w->stop_cause : error_code(asio::error::operation_aborted);
        } else if (final == beast::error::timeout) {
            final = error::timeout;
        } else if (final.category() != error_category()) {
            final = error::connection_lost;
        }
        if (!w->cancelled) self->record(final, o.message);
        w->finish(final);
    }
};

std::shared_ptr<watch_stream> gateway::watch(watch_request req, watch_handler h) {
    auto w = std::make_shared<impl::watch_impl>(strand_);
    w->owner = weak_from_this();
    w->handler = std::move(h);
    w->idle_timeout = impl_->opts.watch_idle_timeout;
    asio::dispatch(strand_, [self = shared_from_this(), w, req = std::move(req)]() mutable {
        if (self->impl_->stopped) {
            w->finish(error::client_stopped);
            return;
        }
        self->impl_->watches.insert(w.get());
        asio::co_spawn(self->strand_, impl::watch_impl::run(self, w, std::move(req)), asio::detached);
    });
    return w;
}

void gateway::impl::stop_watches(impl& d) {
    for (auto* w : std::vector(d.watches.begin(), d.watches.end()))
        w->cancel_here(error::client_stopped);
}

}  // namespace corolock::detail::etcd
