// The etcd gateway's insides, shared by its three files: gateway.cpp (the
// requests and stop), gateway_pool.cpp (connections: connect, check out,
// one exchange, a unary request with its retries) and gateway_watch.cpp
// (a watch on a connection of its own). Private to src/etcd.
#pragma once

#include "etcd/gateway.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace corolock::detail::etcd {

namespace wire {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

// A response body's limit.
inline constexpr std::size_t max_body = 64u << 20;
// What a connection holds of a response not yet parsed: its header, a
// chunk-size line with its extensions, a trailer. Beast 1.81 bounds none of
// the last three, so the buffer does: past it, the response is refused
// (reply_too_large) instead of growing the client without end. Body bytes
// leave the buffer as they are parsed, so the body's own limit is
// max_body.
inline constexpr std::size_t max_buffered = 1u << 20;

struct endpoint {
    std::string host;
    std::string port;
};

// "host:port" or "[v6]:port". Throws std::invalid_argument.
endpoint parse_endpoint(const std::string& s);

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

// An I/O error as the end of a sentence ("timed out", ...).
std::string describe(const error_code& ec);

}  // namespace wire

struct gateway::impl {
    using clock_type = std::chrono::steady_clock;
    using connection = wire::connection;
    using endpoint = wire::endpoint;
    using outcome = wire::outcome;
    template <class T>
    using awaitable = boost::asio::awaitable<T>;

    gateway_options opts;
    std::vector<endpoint> endpoints;
    std::size_t preferred = 0;  // the endpoint that last answered
    std::unique_ptr<boost::asio::ssl::context> tls_context;

    // All below: strand only.
    bool stopped = false;
    std::vector<std::unique_ptr<connection>> idle;
    std::set<connection*> busy;
    std::set<connection*> connecting;
    std::size_t open = 0;  // idle + busy + connecting
    std::list<boost::asio::steady_timer*> waiters;  // requests queued for a connection
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

    // gateway_pool.cpp:
    // Connects to the preferred endpoint, then the others in turn. Gives up
    // when *abandoned turns true (a cancelled watch).
    static awaitable<std::unique_ptr<connection>> connect(std::shared_ptr<gateway> self,
                                                          clock_type::time_point deadline,
                                                          outcome& out,
                                                          connection** slot = nullptr,
                                                          const bool* abandoned = nullptr);
    // A connection from the pool, a new one, or (at max_connections) the
    // next one given back, all before the deadline.
    static awaitable<std::unique_ptr<connection>> checkout(std::shared_ptr<gateway> self,
                                                           clock_type::time_point deadline,
                                                           outcome& out);
    // One request and its response on `c`, its failure named.
    static awaitable<outcome> exchange(std::shared_ptr<gateway> self, connection& c,
                                       const std::string& target, const std::string& body,
                                       const std::string& token, clock_type::time_point deadline,
                                       bool& keep);
    // Authenticates (when a user is set and no token is held): the token is
    // kept for the requests and watches that follow. Empty code: done.
    static awaitable<outcome> authenticate(std::shared_ptr<gateway> self);
    // One request/response on the pool, with the retries the header
    // comment lists. On success out.message holds the body (HTTP 200).
    static awaitable<outcome> unary(std::shared_ptr<gateway> self, std::string target,
                                    std::string body, bool idempotent, bool with_token = true);

    // gateway_watch.cpp: ends every watch (client_stopped).
    static void stop_watches(impl& d);

    // gateway.cpp: runs a unary request and completes h with the decoded
    // result.
    template <class Result, class Decode>
    static void run(std::shared_ptr<gateway> self, std::string target, std::string body,
                    bool idempotent, handler<Result> h, Decode decode);
};

}  // namespace corolock::detail::etcd
