// The fault proxy itself (test/support/fault_proxy.hpp): before the network
// fault tests trust it, each fault is checked byte for byte on a plain
// socket (RESP2, no library involved), and the library is run through it.
#include <corolock/corolock.hpp>

#include "support/async_test.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_testing.hpp"
#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using corolock::test::fault_proxy;
using corolock::test::redis_server;
using direction = fault_proxy::direction;

namespace {

// A blocking loopback connection with bounded reads, for byte-exact checks.
class raw_socket {
public:
    explicit raw_socket(std::uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    }
    ~raw_socket() { ::close(fd_); }
    raw_socket(const raw_socket&) = delete;
    raw_socket& operator=(const raw_socket&) = delete;

    void send(const std::string& bytes) {
        REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    }

    // Reads until `want` bytes came, the peer closed or failed, or `limit`
    // passed. closed/failed tell which end it was.
    std::string read(std::size_t want, std::chrono::milliseconds limit) {
        std::string got;
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (got.size() < want) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, std::min(sizeof buf, want - got.size()), 0);
            if (n == 0) {
                closed = true;
                break;
            }
            if (n < 0) {
                failed_errno = errno;
                break;
            }
            got.append(buf, static_cast<std::size_t>(n));
        }
        return got;
    }

    bool closed = false;
    int failed_errno = 0;

private:
    int fd_ = -1;
};

std::string resp(std::initializer_list<std::string> args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return out;
}

std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

}  // namespace

TEST_CASE("fault proxy: forwards both ways and counts frames", "[proxy][integration]") {
    redis_server server;
    fault_proxy proxy(server.port());
    raw_socket s(proxy.port());
    s.send(resp({"SET", "k", "v"}) + resp({"GET", "k"}) + resp({"ECHO", "x"}));
    CHECK(s.read(19, 2s) == "+OK\r\n" + bulk("v") + bulk("x"));
    // The proxy counts a write when it completes, which may be a moment
    // after the bytes arrived here.
    for (int i = 0; i < 500 && proxy.stats().bytes_to_client < 19; ++i) std::this_thread::sleep_for(1ms);
    const auto st = proxy.stats();
    CHECK(st.accepted == 1);
    CHECK(st.open == 1);
    CHECK(st.commands == 3);
    CHECK(st.replies == 3);
    CHECK(st.bytes_to_client == 19);
    CHECK(st.bytes_to_server == (resp({"SET", "k", "v"}) + resp({"GET", "k"}) + resp({"ECHO", "x"})).size());
    REQUIRE(st.connections.size() == 1);
    CHECK(st.connections[0].first_reply_at.has_value());
    CHECK(server.cmd1({"GET", "k"}) == "v");
}

TEST_CASE("fault proxy: drop-next-reply swallows exactly one reply", "[proxy][integration]") {
    redis_server server;
    fault_proxy proxy(server.port());
    raw_socket s(proxy.port());

    // Any command: the first reply after arming goes, the next ones pass.
    proxy.drop_next_reply();
    CHECK(proxy.drop_armed());
    s.send(resp({"ECHO", "a"}) + resp({"ECHO", "b"}) + resp({"ECHO", "c"}));
    CHECK(s.read(14, 2s) == bulk("b") + bulk("c"));
    CHECK_FALSE(proxy.drop_armed());
    CHECK(s.read(1, 200ms).empty());  // nothing else was held back

    // Only the reply to a chosen command; the others before it pass.
    proxy.drop_next_reply(fault_proxy::after_drop::forward,
                          [](const fault_proxy::command_args& a) { return a.size() == 2 && a[1] == "y"; });
    s.send(resp({"ECHO", "x"}) + resp({"ECHO", "y"}) + resp({"ECHO", "z"}) + resp({"ECHO", "y"}));
    CHECK(s.read(21, 2s) == bulk("x") + bulk("z") + bulk("y"));
    CHECK(proxy.stats().replies_dropped == 2);
    CHECK(proxy.unanswered().empty());

    // after_drop::reset: the command ran, its reply died with the connection.
    std::atomic<int> dropped{0};
    proxy.drop_next_reply(fault_proxy::after_drop::reset, {}, [&] { ++dropped; });
    s.send(resp({"INCR", "ran"}));
    const auto rest = s.read(1, 2s);
    CHECK(rest.empty());
    CHECK((s.closed || s.failed_errno == ECONNRESET));
    CHECK(server.cmd1({"GET", "ran"}) == "1");
    CHECK(dropped == 1);
    const auto st = proxy.stats();
    CHECK(st.resets == 1);
    CHECK(st.open == 0);
    REQUIRE(st.connections.size() == 1);
    CHECK(st.connections[0].reset);
}

TEST_CASE("fault proxy: pub/sub messages are not replies", "[proxy][integration]") {
    redis_server server;
    fault_proxy proxy(server.port());
    raw_socket s(proxy.port());
    s.send(resp({"HELLO", "3"}));
    const auto hello = s.read(4096, 500ms);
    REQUIRE(hello.rfind("%", 0) == 0);
    s.send(resp({"SUBSCRIBE", "ch"}));
    const std::string confirm = ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
    CHECK(s.read(confirm.size(), 2s) == confirm);
    // A message arrives, then the reply to PING is the one dropped.
    proxy.drop_next_reply();
    server.cmd({"PUBLISH", "ch", "hi"});
    const std::string message = ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
    CHECK(s.read(message.size(), 2s) == message);
    CHECK(proxy.drop_armed());
    s.send(resp({"PING"}) + resp({"PING", "after"}));
    CHECK(s.read(11, 2s) == bulk("after"));
    CHECK_FALSE(proxy.drop_armed());
}

TEST_CASE("fault proxy: delay, pause and blackhole", "[proxy][integration]") {
    redis_server server;
    fault_proxy proxy(server.port());

    SECTION("delay applies per direction and keeps order") {
        raw_socket s(proxy.port());
        proxy.set_delay(direction::to_client, 150ms);
        proxy.set_delay(direction::to_server, 100ms);
        const auto start = std::chrono::steady_clock::now();
        s.send(resp({"ECHO", "1"}) + resp({"ECHO", "2"}));
        CHECK(s.read(14, 3s) == bulk("1") + bulk("2"));
        CHECK(std::chrono::steady_clock::now() - start >= 250ms);
    }
    SECTION("pause holds frames, resume releases them in order") {
        raw_socket s(proxy.port());
        proxy.pause(direction::to_client);
        s.send(resp({"ECHO", "1"}) + resp({"INCR", "n"}));
        CHECK(s.read(1, 300ms).empty());
        CHECK(server.cmd1({"GET", "n"}) == "1");  // the server did get them
        proxy.resume();
        CHECK(s.read(11, 2s) == bulk("1") + ":1\r\n");
    }
    SECTION("blackhole throws bytes away, and lifting it resets that connection") {
        raw_socket s(proxy.port());
        s.send(resp({"ECHO", "before"}));
        CHECK(s.read(12, 2s) == bulk("before"));
        proxy.blackhole();
        s.send(resp({"INCR", "lost"}));
        CHECK(s.read(1, 300ms).empty());
        CHECK(server.cmd1({"GET", "lost"}).empty());  // it never reached the server
        // A connection made during the blackhole is dark too.
        raw_socket during(proxy.port());
        during.send(resp({"ECHO", "x"}));
        CHECK(during.read(1, 200ms).empty());
        CHECK(proxy.stats().bytes_dropped > 0);
        proxy.heal();
        s.read(1, 2s);
        CHECK((s.closed || s.failed_errno == ECONNRESET));
        during.read(1, 2s);
        CHECK((during.closed || during.failed_errno == ECONNRESET));
        raw_socket after(proxy.port());
        after.send(resp({"ECHO", "fresh"}));
        CHECK(after.read(11, 2s) == bulk("fresh"));
    }
    SECTION("reset_all sends RST to both sides") {
        raw_socket s(proxy.port());
        s.send(resp({"ECHO", "1"}));
        CHECK(s.read(7, 2s) == bulk("1"));
        CHECK(proxy.reset_all() == 1);
        s.read(1, 2s);
        CHECK(s.failed_errno == ECONNRESET);
        CHECK(proxy.stats().resets == 1);
    }
    SECTION("inject_to_client goes between frames") {
        raw_socket s(proxy.port());
        proxy.pause(direction::to_client);
        s.send(resp({"ECHO", "1"}));
        // Wait until the reply is held by the proxy, then inject behind it.
        for (int i = 0; i < 200 && proxy.stats().replies < 1; ++i) std::this_thread::sleep_for(5ms);
        REQUIRE(proxy.stats().replies == 1);
        CHECK(proxy.inject_to_client("+injected\r\n") == 1);
        proxy.resume();
        CHECK(s.read(18, 2s) == bulk("1") + "+injected\r\n");
    }
}

TEST_CASE("fault proxy: 1-byte slicing still yields correct replies through the library",
          "[proxy][integration]") {
    redis_server server;
    fault_proxy proxy(server.port());
    proxy.slice();
    asio::io_context ioc;
    auto cfg = corolock::test::plain_config_for(server);
    cfg.port = proxy.port();
    // Byte-at-a-time is slow (more so under sanitizers): this checks the
    // replies, not the speed.
    cfg.command_timeout = 20s;
    corolock::client c(ioc.get_executor(), cfg);
    constexpr int n = 40;
    std::string big(2'000, 'b');
    for (std::size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>(i % 256);
    int good = 0;
    corolock::test::run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [e0, r0] = co_await c.async_exec(corolock::command{"SET", "big", big}, asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(e0);
        // Many commands in flight at once, with replies of every shape.
        int done = 0;
        for (int i = 0; i < n; ++i) {
            asio::co_spawn(ioc, [&, i]() -> asio::awaitable<void> {
                const std::string v = "v" + std::to_string(i) + std::string("\r\n\0x", 4);
                auto [e1, r1] = co_await c.async_exec(corolock::command{"SET", "k" + std::to_string(i), v},
                                                      asio::as_tuple(asio::use_awaitable));
                auto [e2, r2] = co_await c.async_exec(corolock::command{"GET", "k" + std::to_string(i)},
                                                      asio::as_tuple(asio::use_awaitable));
                auto [e3, r3] = co_await c.async_exec(corolock::command{"HSET", "h", std::to_string(i), "x"},
                                                      asio::as_tuple(asio::use_awaitable));
                auto [e4, r4] = co_await c.async_exec(corolock::command{"GET", "big"},
                                                      asio::as_tuple(asio::use_awaitable));
                if (!e1 && !e2 && !e3 && !e4 && r2.str == v && r3.type == corolock::resp3_type::integer &&
                    r4.str == big)
                    ++good;
                ++done;
            }, asio::detached);
        }
        const bool finished = co_await corolock::test::eventually([&] { return done == n; }, 40s);
        REQUIRE(finished);
        auto [e5, r5] = co_await c.async_exec(corolock::command{"HGETALL", "h"}, asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(e5);
        CHECK(r5.type == corolock::resp3_type::map);
        CHECK(r5.elements.size() == 2 * n);
        c.stop();
    }, 90s);
    CHECK(good == n);
    const auto st = proxy.stats();
    // Every byte both ways went in a write of its own.
    CHECK(st.writes_to_client == st.bytes_to_client);
    CHECK(st.writes_to_server == st.bytes_to_server);
    CHECK(st.bytes_to_client > static_cast<std::uint64_t>(n) * big.size());
    CHECK(st.unparsed == 0);
    CHECK(c.stats().disconnects == 0);
}

namespace {

// A loopback TCP echo server on its own thread: an upstream that speaks no
// RESP, for the proxy's raw mode. Polls in 20 ms steps, so it stops in time.
class echo_server {
public:
    echo_server() {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(listen_fd_ >= 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(listen_fd_, 8) == 0);
        socklen_t len = sizeof addr;
        REQUIRE(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
        port_ = ntohs(addr.sin_port);
        thread_ = std::thread([this] { run(); });
    }
    ~echo_server() {
        stop_ = true;
        thread_.join();
        for (int fd : conns_) ::close(fd);
        ::close(listen_fd_);
    }
    echo_server(const echo_server&) = delete;
    echo_server& operator=(const echo_server&) = delete;
    std::uint16_t port() const { return port_; }

private:
    void run() {
        while (!stop_) {
            std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
            for (int fd : conns_) fds.push_back({fd, POLLIN, 0});
            if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
            if (fds[0].revents & POLLIN) {
                const int c = ::accept(listen_fd_, nullptr, nullptr);
                if (c >= 0) conns_.push_back(c);
            }
            for (std::size_t i = 1; i < fds.size(); ++i) {
                if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                char buf[4096];
                const ssize_t n = ::recv(fds[i].fd, buf, sizeof buf, 0);
                if (n > 0) {
                    (void)::send(fds[i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
                } else {
                    ::close(fds[i].fd);
                    conns_.erase(std::find(conns_.begin(), conns_.end(), fds[i].fd));
                }
            }
        }
    }

    int listen_fd_ = -1;
    std::uint16_t port_ = 0;
    std::vector<int> conns_;  // the server thread's only
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

const std::string http_request =
    "POST /v3/lease/grant HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 9\r\n\r\n{\"TTL\":5}";

}  // namespace

TEST_CASE("fault proxy: bytes of another protocol go through, in RESP and in raw mode",
          "[proxy][integration]") {
    echo_server upstream;
    SECTION("RESP mode: the parser gives up and forwards raw") {
        fault_proxy proxy(upstream.port());
        raw_socket s(proxy.port());
        s.send(http_request);
        CHECK(s.read(http_request.size(), 2s) == http_request);
        CHECK(proxy.stats().commands == 0);
        CHECK(proxy.stats().unparsed >= 1);
    }
    SECTION("raw mode: never parsed; blackhole and heal apply to the bytes") {
        fault_proxy proxy(upstream.port(), "127.0.0.1", fault_proxy::framing::raw);
        {
            raw_socket s(proxy.port());
            s.send(http_request);
            CHECK(s.read(http_request.size(), 2s) == http_request);
            proxy.blackhole(true);
            s.send("ping");
            CHECK(s.read(4, 300ms).empty());
            CHECK(proxy.stats().bytes_dropped >= 4);
            proxy.heal();  // resets the connection that lost bytes
            s.read(1, 2s);
            CHECK((s.closed || s.failed_errno != 0));
        }
        raw_socket fresh(proxy.port());
        fresh.send("after");
        CHECK(fresh.read(5, 2s) == "after");
        const auto st = proxy.stats();
        CHECK(st.commands == 0);
        CHECK(st.unparsed == 0);
    }
}
