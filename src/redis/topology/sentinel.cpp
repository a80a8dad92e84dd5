#include "redis/topology/sentinel.hpp"

#include "redis/connection/client_impl.hpp"
#include "core/open_cloexec.hpp"

#include <corolock/command.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <openssl/ssl.h>

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace corolock::detail {

namespace asio = boost::asio;

// ---- sentinel_link (the decisions are in sentinel_replies.cpp) ----

namespace {

using strand_type = sentinel_link::strand_type;
static_assert(std::is_same_v<strand_type, client_impl::strand_type>);  // client_impl.hpp's use_nothrow


}  // namespace

struct sentinel_link::stream {
    explicit stream(const asio::any_io_executor& ex) : socket(ex) {}
    asio::ip::tcp::socket socket;
    std::optional<asio::ssl::stream<asio::ip::tcp::socket&>> tls;  // after socket: dies first
};

sentinel_link::sentinel_link(asio::any_io_executor ex, asio::ssl::context* ssl, const config& cfg)
    : executor_(ex),
      ssl_(ssl),
      cfg_(cfg),
      resolver_(executor_),
      parser_(parser_limits{cfg.max_bulk_length, cfg.max_nesting_depth, cfg.max_aggregate_size,
                            cfg.max_reply_size}) {}

sentinel_link::~sentinel_link() { close(); }

bool sentinel_link::is_open() const noexcept { return stream_ != nullptr; }

void sentinel_link::close() noexcept {
    resolver_.cancel();
    if (stream_) {
        error_code ignored;
        stream_->socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        stream_->socket.close(ignored);
        stream_.reset();
    }
}

sentinel_link::awaitable<error_code> sentinel_link::open(const endpoint& ep, std::string& why) {
    close();
    parser_.reset();
    auto [rec, endpoints] =
        co_await resolver_.async_resolve(ep.host, std::to_string(ep.port), use_nothrow);
    if (rec) {
        why = describe_cause(rec);
        co_return error::resolve_failed;
    }
    auto s = std::make_shared<stream>(executor_);
    stream_ = s;
    error_code cec = asio::error::host_not_found;
    for (const auto& entry : endpoints) {
        error_code ignored;
        s->socket.close(ignored);
        if (cec = open_cloexec(s->socket, entry.endpoint().protocol()); cec) continue;
        std::tie(cec) = co_await s->socket.async_connect(entry.endpoint(), use_nothrow);
        if (!cec || stream_ != s) break;
    }
    if (stream_ != s) co_return asio::error::operation_aborted;
    if (cec) {
        why = describe_cause(cec);
        co_return cec;
    }
    error_code oec;
    s->socket.set_option(asio::ip::tcp::no_delay(true), oec);
    if (ssl_) {
        s->tls.emplace(s->socket, *ssl_);
        // A Sentinel of the configured list: never a name a peer announced.
        const std::string name = cfg_.tls.expected_name(tls_config::peer::sentinel, ep.host);
        error_code ip_ec;
        asio::ip::make_address(name, ip_ec);
        if (ip_ec) SSL_set_tlsext_host_name(s->tls->native_handle(), name.c_str());
        if (cfg_.tls.verify_peer)
            s->tls->set_verify_callback(asio::ssl::host_name_verification(name));
        auto [hec] = co_await s->tls->async_handshake(asio::ssl::stream_base::client, use_nothrow);
        if (hec) {
            why = "TLS handshake: " + describe_cause(hec);
            co_return error::tls_handshake_failed;
        }
    }
    command hello{"HELLO", "3"};
    if (!cfg_.sentinel_password.empty())
        hello.arg("AUTH")
            .arg(cfg_.sentinel_username.empty() ? std::string_view("default")
                                                : std::string_view(cfg_.sentinel_username))
            .arg(cfg_.sentinel_password);
    auto [ec, r] = co_await call(hello);
    if (ec) {
        why = "HELLO: " + describe_cause(ec);
        co_return ec;
    }
    if (r.is_error()) {
        // The credentials are never echoed: only the server's words.
        why = "HELLO: " + r.str;
        co_return classify_server_error(r.str) == error::auth_failed
                      ? error_code(error::auth_failed)
                      : error_code(error::handshake_failed);
    }
    co_return error_code{};
}

sentinel_link::awaitable<error_code> sentinel_link::send(const command& cmd) {
    const auto s = stream_;
    if (!s) co_return error::connection_lost;
    const std::string bytes = cmd.payload();
    error_code ec;
    if (s->tls)
        std::tie(ec, std::ignore) = co_await asio::async_write(*s->tls, asio::buffer(bytes), use_nothrow);
    else
        std::tie(ec, std::ignore) = co_await asio::async_write(s->socket, asio::buffer(bytes), use_nothrow);
    co_return ec;
}

sentinel_link::awaitable<std::pair<error_code, reply>> sentinel_link::call(const command& cmd) {
    if (auto ec = co_await send(cmd); ec) co_return std::pair{ec, reply{}};
    for (int skipped = 0; skipped < 1024; ++skipped) {
        auto [ec, r] = co_await read();
        if (ec || r.type != resp3_type::push) co_return std::pair{ec, std::move(r)};
    }
    co_return std::pair{error_code(error::protocol_error), reply{}};
}

sentinel_link::awaitable<std::pair<error_code, reply>> sentinel_link::read() {
    std::array<char, 4096> buf;
    for (;;) {
        if (parser_.has_reply()) co_return std::pair{error_code{}, parser_.pop()};
        const auto s = stream_;
        if (!s) co_return std::pair{error_code(error::connection_lost), reply{}};
        error_code ec;
        std::size_t n = 0;
        if (s->tls)
            std::tie(ec, n) = co_await s->tls->async_read_some(asio::buffer(buf), use_nothrow);
        else
            std::tie(ec, n) = co_await s->socket.async_read_some(asio::buffer(buf), use_nothrow);
        if (ec) co_return std::pair{ec, reply{}};
        error_code pec;
        parser_.consume(std::string_view(buf.data(), n), pec);
        if (pec && !parser_.has_reply()) co_return std::pair{pec, reply{}};
    }
}

}  // namespace corolock::detail
