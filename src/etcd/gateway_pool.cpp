#include "etcd/gateway_impl.hpp"

#include "core/open_cloexec.hpp"
#include "etcd/codec.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
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
using wire::connection;
using wire::describe;
using wire::outcome;

wire::endpoint wire::parse_endpoint(const std::string& s) {
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

std::string wire::describe(const error_code& ec) {
    if (ec == beast::error::timeout) return "timed out";
    if (ec == asio::error::eof) return "connection closed by the server";
    std::string m = ec.message();
    if (!m.empty()) m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
    return m;
}

awaitable<std::unique_ptr<connection>> gateway::impl::connect(std::shared_ptr<gateway> self,
                                                               clock_type::time_point deadline,
                                                               outcome& out, connection** slot,
                                                               const bool* abandoned) {
    auto& d = *self->impl_;
    // The gateway stopped, or the watch that asked gave up: no connection.
    const auto ended = [&] { return d.stopped || (abandoned && *abandoned); };
    const auto ended_outcome = [&] {
        return outcome{d.stopped ? error_code(error::client_stopped)
                                 : error_code(asio::error::operation_aborted),
                       "stopped"};
    };
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
            if (!ec || ec == beast::error::timeout || ended()) break;
        }
        if (ended()) {
            out = ended_outcome();
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
            if (ended()) {
                out = ended_outcome();
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

awaitable<std::unique_ptr<connection>> gateway::impl::checkout(std::shared_ptr<gateway> self,
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

namespace {

template <class Stream>
awaitable<outcome> exchange_on(Stream& s, connection& c, const std::string& host,
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
    parser.body_limit(wire::max_body);
    co_await http::async_read(s, c.buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return outcome{ec, ""};
    auto res = parser.release();
    keep = res.keep_alive();
    co_return outcome{{}, std::move(res.body()), res.result_int()};
}

}  // namespace

awaitable<outcome> gateway::impl::exchange(std::shared_ptr<gateway> self, connection& c,
                                          const std::string& target, const std::string& body,
                                          const std::string& token,
                                          clock_type::time_point deadline, bool& keep) {
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

awaitable<outcome> gateway::impl::authenticate(std::shared_ptr<gateway> self) {
    auto& d = *self->impl_;
    if (d.opts.username.empty() || !d.token.empty()) co_return outcome{};
    auto a = co_await unary(self, "/v3/auth/authenticate",
                            codec::encode_authenticate(d.opts.username, d.opts.password), true,
                            false);
    if (a.code) co_return a;
    std::string tok;
    if (auto e = codec::decode_authenticate(a.message, tok))
        co_return outcome{e->code, "authenticate: " + e->message};
    ++self->authentications_;
    d.token = std::move(tok);
    co_return outcome{};
}

awaitable<outcome> gateway::impl::unary(std::shared_ptr<gateway> self, std::string target,
                                       std::string body, bool idempotent, bool with_token) {
    auto& d = *self->impl_;
    const auto deadline = clock_type::now() + d.opts.request_timeout;
    bool token_renewed = false;
    for (int attempt = 0; attempt < 4; ++attempt) {
        if (with_token) {
            if (auto a = co_await authenticate(self); a.code) co_return a;
        }
        outcome out;
        auto c = co_await checkout(self, deadline, out);
        if (!c) co_return out;
        const bool reused = c->reused;
        bool keep = false;
        const std::string sent_token = with_token ? d.token : std::string();
        auto o = co_await exchange(self, *c, target, body, sent_token, deadline, keep);
        d.give_back(std::move(c), keep);
        if (d.stopped) co_return outcome{error::client_stopped, "stopped"};
        if (o.code) {
            if (reused && idempotent && clock_type::now() < deadline) continue;
            co_return o;
        }
        if (o.status == 200) co_return o;
        auto e = codec::decode_error_body(o.status, o.message);
        if (with_token && !d.opts.username.empty() && !token_renewed &&
            codec::is_stale_token(e)) {
            token_renewed = true;
            if (d.token == sent_token) d.token.clear();
            continue;
        }
        co_return outcome{e.code, target + ": " + e.message};
    }
    co_return outcome{error::connection_lost, target + ": failed after retries"};
}

}  // namespace corolock::detail::etcd
