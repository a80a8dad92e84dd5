#include "etcd/gateway.hpp"

#include "core/open_cloexec.hpp"
#include "etcd/codec.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <deque>
#include <list>
#include <set>
#include <stdexcept>

namespace corolock::detail::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr std::size_t max_body = 64u << 20;
// What a connection holds of a response not yet parsed: its header, a
// chunk-size line with its extensions, a trailer. Beast 1.81 bounds none of
// the last three, so the buffer does: past it, the response is refused
// (reply_too_large) instead of growing the client without end. Body bytes
// leave the buffer as they are parsed, so the body's own limit is
// max_body.
constexpr std::size_t max_buffered = 1u << 20;

struct endpoint {
    std::string host;
    std::string port;
};

endpoint parse_endpoint(const std::string& s) {
    std::string host = s, port;
    if (!s.empty() && s.front() == '[') {  // [v6]:port
        const auto close = s.find(']');
        if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
            throw std::invalid_argument("etcd endpoint: malformed: " + s);
        host = s.substr(1, close - 1);
        port = s.substr(close + 2);
    } else {
        const auto colon = s.rfind(':');
        if (colon == std::string::npos) throw std::invalid_argument("etcd endpoint: no port: " + s);
        host = s.substr(0, colon);
        port = s.substr(colon + 1);
    }
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (host.empty() || ec != std::errc{} || end != port.data() + port.size() || n == 0 || n > 65535)
        throw std::invalid_argument("etcd endpoint: bad host or port: " + s);
    return {host, port};
}

// One HTTP connection, plain or TLS.
struct connection {
    std::unique_ptr<beast::tcp_stream> plain;
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
    beast::flat_buffer buffer{max_buffered};
    std::size_t endpoint_index = 0;
    bool reused = false;

    beast::tcp_stream& lowest() { return tls ? tls->next_layer() : *plain; }

    void close() noexcept {
        error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
        lowest().socket().close(ignored);
    }

    // An idle keep-alive connection the server closed (or wrote to) is not
    // reusable: peek without blocking.
    bool idle_alive() {
        if (!lowest().socket().is_open()) return false;
        char b;
        const auto n = ::recv(lowest().socket().native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
};

struct outcome {
    error_code code;
    std::string message;  // the cause, or the body on success
    unsigned status = 0;
};

std::string describe(const error_code& ec) {
    if (ec == beast::error::timeout) return "timed out";
    if (ec == asio::error::eof) return "connection closed by the server";
    std::string m = ec.message();
    if (!m.empty()) m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
    return m;
}

}  // namespace

struct gateway::impl {
    gateway_options opts;
    std::vector<endpoint> endpoints;
    std::size_t preferred = 0;  // the endpoint that last answered
    std::unique_ptr<ssl::context> tls_context;

    // All below: strand only.
    bool stopped = false;
    std::vector<std::unique_ptr<connection>> idle;
    std::set<connection*> busy;
    std::set<connection*> connecting;
    std::size_t open = 0;  // idle + busy + connecting
    std::list<asio::steady_timer*> waiters;  // requests queued for a connection
    std::string token;
    struct watch_impl;
    std::set<watch_impl*> watches;

    void wake_one() {
        if (!waiters.empty()) waiters.front()->cancel();
    }

    void give_back(std::unique_ptr<connection> c, bool keep) {
        busy.erase(c.get());
        if (keep && !stopped) {
            c->reused = true;
            idle.push_back(std::move(c));
        } else {
            c->close();
            --open;
        }
        wake_one();
    }

    // While a connection is being made, stop() (and a watch's cancel(),
    // through `slot`) can close it.
    struct connecting_entry {
        impl& d;
        connection* c;
        connection** slot;
        connecting_entry(impl& d_, connection* c_, connection** slot_) : d(d_), c(c_), slot(slot_) {
            d.connecting.insert(c);
            if (slot) *slot = c;
        }
        ~connecting_entry() {
            d.connecting.erase(c);
            if (slot) *slot = nullptr;
        }
        connecting_entry(const connecting_entry&) = delete;
        connecting_entry& operator=(const connecting_entry&) = delete;
    };

    // Connects to the preferred endpoint, then the others in turn. Gives up
    // when *abandoned turns true (a cancelled watch).
    static awaitable<std::unique_ptr<connection>> connect(std::shared_ptr<gateway> self,
                                                          clock_type::time_point deadline,
                                                          outcome& out,
                                                          connection** slot = nullptr,
                                                          const bool* abandoned = nullptr) {
        auto& d = *self->impl_;
        tcp::resolver resolver(self->strand_);
        for (std::size_t i = 0; i < d.endpoints.size(); ++i) {
            const std::size_t index = (d.preferred + i) % d.endpoints.size();
            const auto& ep = d.endpoints[index];
            const std::string where = ep.host + ":" + ep.port;
            const auto until = std::min(deadline, clock_type::now() + d.opts.connect_timeout);
            error_code ec;
            auto results = co_await resolver.async_resolve(ep.host, ep.port,
                                                           asio::redirect_error(use_awaitable, ec));
            if (ec) {
                out = {error::resolve_failed, "resolve " + where + ": " + describe(ec)};
                continue;
            }
            auto c = std::make_unique<connection>();
            if (d.tls_context) {
                c->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(
                    beast::tcp_stream(self->strand_), *d.tls_context);
            } else {
                c->plain = std::make_unique<beast::tcp_stream>(self->strand_);
            }
            c->endpoint_index = index;
            c->lowest().expires_at(until);
            connecting_entry entry(d, c.get(), slot);
            // Each address in turn, on a socket opened close-on-exec
            // (Beast's range connect would open them without).
            ec = asio::error::host_not_found;
            for (const auto& entry : results) {
                error_code ignored;
                c->lowest().socket().close(ignored);
                if (ec = open_cloexec(c->lowest().socket(), entry.endpoint().protocol()); ec)
                    continue;
                co_await c->lowest().async_connect(entry.endpoint(),
                                                   asio::redirect_error(use_awaitable, ec));
                if (!ec || ec == beast::error::timeout || d.stopped || (abandoned && *abandoned))
                    break;
            }
            if (d.stopped || (abandoned && *abandoned)) {
                out = {d.stopped ? error_code(error::client_stopped)
                                 : error_code(asio::error::operation_aborted),
                       "stopped"};
                co_return nullptr;
            }
            if (ec) {
                out = {ec == beast::error::timeout ? error_code(error::connect_timeout) : ec,
                       "connect " + where + ": " + describe(ec)};
                if (clock_type::now() >= deadline) break;
                continue;
            }
            c->lowest().socket().set_option(tcp::no_delay(true), ec);
            if (c->tls) {
                if (!SSL_set_tlsext_host_name(c->tls->native_handle(), ep.host.c_str())) {
                    out = {error::tls_handshake_failed, "TLS: cannot set SNI for " + ep.host};
                    continue;
                }
                c->tls->set_verify_callback(ssl::host_name_verification(ep.host));
                co_await c->tls->async_handshake(ssl::stream_base::client,
                                                 asio::redirect_error(use_awaitable, ec));
                if (d.stopped || (abandoned && *abandoned)) {
                    out = {d.stopped ? error_code(error::client_stopped)
                                     : error_code(asio::error::operation_aborted),
                           "stopped"};
                    co_return nullptr;
                }
                if (ec) {
                    out = {ec == beast::error::timeout ? error_code(error::connect_timeout)
                                                       : error_code(error::tls_handshake_failed),
                           "TLS handshake with " + where + ": " + describe(ec)};
                    continue;
                }
            }
            d.preferred = index;
            ++self->opened_;
            co_return c;
        }
        co_return nullptr;
    }

    // A connection from the pool, a new one, or (at max_connections) the
    // next one given back, all before the deadline.
    static awaitable<std::unique_ptr<connection>> checkout(std::shared_ptr<gateway> self,
                                                           clock_type::time_point deadline,
                                                           outcome& out) {
        auto& d = *self->impl_;
        for (int rounds = 0; rounds < 100000; ++rounds) {
            if (d.stopped) {
                out = {error::client_stopped, "stopped"};
                co_return nullptr;
            }
            while (!d.idle.empty()) {
                auto c = std::move(d.idle.back());
                d.idle.pop_back();
                if (c->idle_alive()) {
                    d.busy.insert(c.get());
                    co_return c;
                }
                c->close();
                --d.open;
            }
            if (d.open < std::max<std::size_t>(d.opts.max_connections, 1)) {
                ++d.open;
                auto c = co_await connect(self, deadline, out);
                if (!c) {
                    --d.open;
                    d.wake_one();
                    co_return nullptr;
                }
                d.busy.insert(c.get());
                co_return c;
            }
            if (clock_type::now() >= deadline) break;
            asio::steady_timer t(self->strand_, deadline);
            d.waiters.push_back(&t);
            const auto me = std::prev(d.waiters.end());
            error_code ec;
            co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
            d.waiters.erase(me);
        }
        out = {error::timeout, "timed out waiting for a free connection"};
        co_return nullptr;
    }

    template <class Stream>
    static awaitable<outcome> exchange_on(Stream& s, connection& c, const std::string& host,
                                          const std::string& target, const std::string& body,
                                          const std::string& token, bool& keep) {
        http::request<http::string_body> req{http::verb::post, target, 11};
        req.set(http::field::host, host);
        req.set(http::field::content_type, "application/json");
        if (!token.empty()) req.set(http::field::authorization, token);
        req.keep_alive(true);
        req.body() = body;
        req.prepare_payload();
        error_code ec;
        co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
        if (ec) co_return outcome{ec, ""};
        http::response_parser<http::string_body> parser;
        parser.body_limit(max_body);
        co_await http::async_read(s, c.buffer, parser, asio::redirect_error(use_awaitable, ec));
        if (ec) co_return outcome{ec, ""};
        auto res = parser.release();
        keep = res.keep_alive();
        co_return outcome{{}, std::move(res.body()), res.result_int()};
    }

    static awaitable<outcome> exchange(std::shared_ptr<gateway> self, connection& c,
                                       const std::string& target, const std::string& body,
                                       const std::string& token, clock_type::time_point deadline,
                                       bool& keep) {
        const auto& ep = self->impl_->endpoints[c.endpoint_index];
        c.lowest().expires_at(deadline);
        outcome o;
        if (c.tls) {
            o = co_await exchange_on(*c.tls, c, ep.host, target, body, token, keep);
        } else {
            o = co_await exchange_on(*c.plain, c, ep.host, target, body, token, keep);
        }
        c.lowest().expires_never();
        if (o.code) {
            keep = false;
            const std::string where = ep.host + ":" + ep.port;
            if (o.code == beast::error::timeout) {
                o = {error::timeout, target + " to " + where + ": timed out"};
            } else if (o.code == http::error::body_limit) {
                o = {error::reply_too_large, target + " to " + where + ": response over 64 MiB"};
            } else if (o.code == http::error::buffer_overflow) {
                o = {error::reply_too_large, target + " to " + where +
                                                 ": a header, chunk line or trailer over 1 MiB"};
            } else if (o.code.category() == make_error_code(http::error::bad_version).category() &&
                       o.code != http::error::end_of_stream &&
                       o.code != http::error::partial_message) {
                o = {error::protocol_error, target + " to " + where + ": bad HTTP: " + describe(o.code)};
            } else {
                o = {error::connection_lost, target + " to " + where + ": " + describe(o.code)};
            }
        }
        co_return o;
    }

    // One request/response on the pool, with the retries the header
    // comment lists. On success out.message holds the body (HTTP 200).
    static awaitable<outcome> unary(std::shared_ptr<gateway> self, std::string target,
                                    std::string body, bool idempotent, bool authenticate = true) {
        auto& d = *self->impl_;
        const auto deadline = clock_type::now() + d.opts.request_timeout;
        bool token_renewed = false;
        for (int attempt = 0; attempt < 4; ++attempt) {
            if (authenticate && !d.opts.username.empty() && d.token.empty()) {
                auto a = co_await unary(self, "/v3/auth/authenticate",
                                        codec::encode_authenticate(d.opts.username, d.opts.password),
                                        true, false);
                if (a.code) co_return a;
                std::string tok;
                if (auto e = codec::decode_authenticate(a.message, tok))
                    co_return outcome{e->code, "authenticate: " + e->message};
                ++self->authentications_;
                d.token = std::move(tok);
            }
            outcome out;
            auto c = co_await checkout(self, deadline, out);
            if (!c) co_return out;
            const bool reused = c->reused;
            bool keep = false;
            const std::string sent_token = authenticate ? d.token : std::string();
            auto o = co_await exchange(self, *c, target, body, sent_token, deadline, keep);
            d.give_back(std::move(c), keep);
            if (d.stopped) co_return outcome{error::client_stopped, "stopped"};
            if (o.code) {
                if (reused && idempotent && clock_type::now() < deadline) continue;
                co_return o;
            }
            if (o.status == 200) co_return o;
            auto e = codec::decode_error_body(o.status, o.message);
            if (authenticate && !d.opts.username.empty() && !token_renewed &&
                codec::is_stale_token(e)) {
                token_renewed = true;
                if (d.token == sent_token) d.token.clear();
                continue;
            }
            co_return outcome{e.code, target + ": " + e.message};
        }
        co_return outcome{error::connection_lost, target + ": failed after retries"};
    }

    // Runs a unary request and completes h with the decoded result.
    template <class Result, class Decode>
    static void run(std::shared_ptr<gateway> self, std::string target, std::string body,
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
};

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
        if (!d.opts.username.empty() && d.token.empty()) {
            auto a = co_await impl::unary(self, "/v3/auth/authenticate",
                                          codec::encode_authenticate(d.opts.username, d.opts.password),
                                          true, false);
            std::string tok;
            if (!a.code) {
                if (auto e = codec::decode_authenticate(a.message, tok)) {
                    a = {e->code, "authenticate: " + e->message};
                } else {
                    ++self->authentications_;
                    d.token = tok;
                }
            }
            o = a;
        }
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

std::shared_ptr<gateway> gateway::create(asio::any_io_executor ex, gateway_options opts) {
    return std::make_shared<gateway>(private_tag{}, std::move(ex), std::move(opts));
}

gateway::gateway(private_tag, asio::any_io_executor ex, gateway_options opts)
    : strand_(asio::make_strand(std::move(ex))), impl_(std::make_shared<impl>()) {
    if (opts.endpoints.empty()) throw std::invalid_argument("etcd: no endpoint");
    for (const auto& e : opts.endpoints) impl_->endpoints.push_back(parse_endpoint(e));
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
        for (auto* w : std::vector(d.watches.begin(), d.watches.end()))
            w->cancel_here(error::client_stopped);
    });
}

}  // namespace corolock::detail::etcd
