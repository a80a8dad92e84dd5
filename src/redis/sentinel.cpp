#include "redis/sentinel.hpp"

#include "redis/client_impl.hpp"
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
#include <charconv>

namespace corolock::detail {

namespace asio = boost::asio;

namespace sentinel {

std::string to_string(const endpoint& ep) {
    const bool v6 = ep.host.find(':') != std::string::npos;
    std::string out = v6 ? "[" + ep.host + "]" : ep.host;
    out += ':';
    out += std::to_string(ep.port);
    return out;
}

namespace {

bool parse_port(std::string_view text, std::uint16_t& port) {
    unsigned value = 0;
    const auto* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || p != end || value == 0 || value > 65535) return false;
    port = static_cast<std::uint16_t>(value);
    return true;
}

// A reply's text cut short for a message (the reply may come from anything
// listening on the port).
std::string shown(const reply& r) {
    std::string text = corolock::to_string(r);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
}

}  // namespace

master_addr parse_master_addr(const reply& r) {
    master_addr out;
    if (r.is_null()) {
        out.result = master_addr::status::unknown_service;
        out.why = "service unknown";
        return out;
    }
    if (r.is_error()) {
        out.result = master_addr::status::refused;
        out.why = r.str;
        return out;
    }
    if (r.type != resp3_type::array || r.elements.size() != 2 || !r.elements[0].is_string() ||
        !r.elements[1].is_string() || r.elements[0].str.empty() ||
        !parse_port(r.elements[1].str, out.ep.port)) {
        out.result = master_addr::status::bad_reply;
        out.why = "unexpected reply " + shown(r);
        return out;
    }
    out.ep.host = r.elements[0].str;
    out.result = master_addr::status::ok;
    return out;
}

bool role_is_master(const reply& r, std::string& role) {
    if (r.type != resp3_type::array || r.elements.empty() || !r.elements[0].is_string()) {
        role = r.is_error() ? "ROLE: " + r.str : "unexpected ROLE reply " + shown(r);
        return false;
    }
    role = r.elements[0].str;
    return role == "master";
}

std::optional<endpoint> parse_switch_master(const reply& push, std::string_view service) {
    // RESP3: >3 message +switch-master payload (a RESP2 array alike).
    if ((push.type != resp3_type::push && push.type != resp3_type::array) ||
        push.elements.size() != 3 || push.elements[0].str != "message" ||
        push.elements[1].str != "+switch-master")
        return std::nullopt;
    std::string_view payload = push.elements[2].str;
    std::array<std::string_view, 5> words;
    std::size_t n = 0;
    while (!payload.empty()) {
        const auto space = payload.find(' ');
        const auto word = payload.substr(0, space);
        if (!word.empty()) {
            if (n == words.size()) return std::nullopt;
            words[n++] = word;
        }
        if (space == std::string_view::npos) break;
        payload.remove_prefix(space + 1);
    }
    if (n != words.size() || words[0] != service) return std::nullopt;
    endpoint ep;
    ep.host = std::string(words[3]);
    if (!parse_port(words[4], ep.port)) return std::nullopt;
    return ep;
}

bool is_readonly_error(std::string_view message) noexcept {
    return message.substr(0, 8) == "READONLY";
}

void discovery_report::sentinel_failed(const endpoint& s, std::string_view why) {
    entries_.push_back("sentinel " + to_string(s) + ": " + std::string(why));
}

void discovery_report::primary_failed(const endpoint& p, std::string_view why) {
    // The handshake's own words already name the server ("... is a replica").
    const std::string name = to_string(p);
    if (why.substr(0, name.size()) == name)
        entries_.emplace_back(why);
    else
        entries_.push_back(name + ": " + std::string(why));
}

bool discovery_report::all_unknown(std::size_t sentinels) const noexcept {
    return sentinels > 0 && unknown_ == sentinels && entries_.size() == sentinels;
}

std::string discovery_report::text() const {
    std::string out;
    for (const auto& e : entries_) {
        if (!out.empty()) out += "; ";
        out += e;
    }
    return out;
}

}  // namespace sentinel

// ---- sentinel_link ----

namespace {

using strand_type = sentinel_link::strand_type;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable_t<strand_type>{});


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
