// A small HTTP key-value store that refuses a write from a stale lock holder:
// the sequencer check (docs/fencing.md, "Any other store") for a store that
// cannot run the Redis or PostgreSQL fence itself.
//
//   fenced_http_store [--url URL] [--listen 127.0.0.1:PORT]
//
//   PUT /KEY   body: the value; headers Corolock-Lock: NAME, Corolock-Token: N
//              204 written; 409 stale (a newer holder, or the lock is no
//              longer held under N); 400 a missing or bad header
//   GET /KEY   200 the value, 404 none
//
// A writer is anyone holding NAME through corolock on the lock service at
// URL (any backend but RedLock): `corolock run NAME -- sh -c 'curl -X PUT
// -H "Corolock-Lock: NAME" -H "Corolock-Token: $COROLOCK_TOKEN" ...'`.
//
// Two checks, because either alone has a hole:
//  - the store's own fence: the highest token it accepted for NAME; a write
//    below it is refused without asking anyone. This one cannot be raced: a
//    holder frozen past its lease (a GC pause, SIGSTOP) that wakes after its
//    successor wrote is refused here;
//  - corolock::async_check_token asks the lock service whether N is still
//    the current grant of NAME (Chubby's CheckSequencer), so a stale holder
//    is refused before any successor wrote, too. Its answer is true when
//    read; the fence above closes the window after it.
// The store prints "listening on HOST:PORT" once it accepts connections.
#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

struct store {
    std::map<std::string, std::string, std::less<>> values;
    std::map<std::string, std::uint64_t, std::less<>> fence;  // lock name -> highest token accepted
};

std::optional<std::uint64_t> parse_token(std::string_view s) {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || v == 0) return std::nullopt;
    return v;
}

http::response<http::string_body> answer(const http::request<http::string_body>& req,
                                         http::status status, std::string body) {
    http::response<http::string_body> res{status, req.version()};
    res.set(http::field::content_type, "text/plain");
    res.keep_alive(req.keep_alive());
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
}

std::uint64_t highest(const store& s, std::string_view lock) {
    const auto it = s.fence.find(lock);
    return it == s.fence.end() ? 0 : it->second;
}

asio::awaitable<http::response<http::string_body>> put(store& s, const corolock::backend& locks,
                                                       const http::request<http::string_body>& req,
                                                       std::string key) {
    const std::string lock{req[std::string_view("Corolock-Lock")]};
    const auto token = parse_token(req[std::string_view("Corolock-Token")]);
    if (lock.empty() || !token)
        co_return answer(req, http::status::bad_request,
                         "a write needs Corolock-Lock: NAME and Corolock-Token: N (N > 0)\n");
    if (*token < highest(s, lock))
        co_return answer(req, http::status::conflict,
                         "stale: token " + std::to_string(*token) + " is older than " +
                             std::to_string(highest(s, lock)) + "\n");
    auto [ec, current] = co_await corolock::async_check_token(locks, lock, *token,
                                                              asio::as_tuple(asio::use_awaitable));
    if (ec)
        co_return answer(req, http::status::service_unavailable,
                         "the lock service did not answer: " + ec.message() + "\n");
    // Another write may have been accepted while we asked: the fence again.
    if (!current || *token < highest(s, lock))
        co_return answer(req, http::status::conflict,
                         "stale: token " + std::to_string(*token) + " is not the current grant of " +
                             lock + "\n");
    s.fence[lock] = *token;
    s.values[std::move(key)] = req.body();
    co_return answer(req, http::status::no_content, "");
}

asio::awaitable<void> serve(tcp::socket socket, store& s, const corolock::backend& locks) {
    beast::flat_buffer buffer;
    for (;;) {
        http::request<http::string_body> req;
        auto [rec, n] = co_await http::async_read(socket, buffer, req, asio::as_tuple(asio::use_awaitable));
        if (rec) co_return;  // closed, or a malformed request: drop the connection
        std::string key{req.target()};
        http::response<http::string_body> res;
        if (req.method() == http::verb::put) {
            res = co_await put(s, locks, req, std::move(key));
        } else if (req.method() == http::verb::get) {
            const auto it = s.values.find(key);
            res = it == s.values.end() ? answer(req, http::status::not_found, "")
                                       : answer(req, http::status::ok, it->second);
        } else {
            res = answer(req, http::status::method_not_allowed, "GET or PUT\n");
        }
        const bool keep = res.keep_alive();
        auto [wec, m] = co_await http::async_write(socket, res, asio::as_tuple(asio::use_awaitable));
        if (wec || !keep) co_return;
    }
}

asio::awaitable<void> accept(tcp::acceptor& acceptor, store& s, const corolock::backend& locks) {
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted) co_return;
        if (ec) continue;  // a connection reset before accept: take the next one
        asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), s, locks), asio::detached);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string url = "redis://127.0.0.1:6379";
    std::string listen = "127.0.0.1:8080";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view opt = argv[i];
        if (opt == "--url") url = argv[i + 1];
        else if (opt == "--listen") listen = argv[i + 1];
        else {
            std::cerr << "usage: fenced_http_store [--url URL] [--listen HOST:PORT]\n";
            return 64;
        }
    }
    if (argc % 2 == 0) {
        std::cerr << "usage: fenced_http_store [--url URL] [--listen HOST:PORT]\n";
        return 64;
    }
    try {
        asio::io_context ioc;
        corolock::backend locks{ioc.get_executor(), url};
        const auto colon = listen.rfind(':');
        if (colon == std::string::npos) throw std::invalid_argument("--listen takes HOST:PORT");
        const auto port = parse_token(std::string_view(listen).substr(colon + 1));
        tcp::endpoint where{asio::ip::make_address(listen.substr(0, colon)),
                            static_cast<unsigned short>(port ? *port : 0)};
        tcp::acceptor acceptor{ioc, where};
        std::cout << "listening on " << acceptor.local_endpoint() << std::endl;

        store s;
        asio::signal_set stop{ioc, SIGINT, SIGTERM};
        stop.async_wait([&](auto, int) {
            acceptor.close();
            locks.stop();
            ioc.stop();
        });
        asio::co_spawn(ioc, accept(acceptor, s, locks), asio::detached);
        ioc.run();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "fenced_http_store: " << e.what() << "\n";
        return 1;
    }
}
