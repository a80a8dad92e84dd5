// The etcd gateway transport against real etcd servers that each test starts
// on free loopback ports.
#include "etcd/gateway.hpp"

#include "support/async_test.hpp"
#include "support/etcd_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock;
using namespace corolock::detail::etcd;
using namespace corolock::test;

namespace {

// co_await op<Result>([&](auto h) { gw->range(req, std::move(h)); }) -> (ec, result)
template <class Result, class F>
auto op(F f) {
    auto token = asio::as_tuple(asio::use_awaitable);
    return asio::async_initiate<decltype(token), void(error_code, Result)>(
        [f](auto h) mutable { f(handler<Result>(std::move(h))); }, token);
}

gateway_options options_for(const etcd_cluster& s) {
    gateway_options o;
    o.endpoints = s.endpoints();
    o.request_timeout = 5s;
    o.connect_timeout = 2s;
    return o;
}

range_request prefix(const std::string& p) {
    range_request r;
    r.key = p;
    r.range_end = prefix_end(p);
    r.sort_by_create_revision = true;
    return r;
}

// "Create key with lease L unless it exists; then range the prefix."
txn_request put_if_absent(const std::string& key, std::int64_t lease, const std::string& pfx) {
    txn_request t;
    t.compares.push_back({key, compare::target::create_revision, compare::op::equal, 0});
    t.success.push_back(put_request{key, "", lease});
    t.success.push_back(prefix(pfx));
    t.failure.push_back(prefix(pfx));
    return t;
}

txn_request delete_if_created_at(const std::string& key, std::int64_t rev) {
    txn_request t;
    t.compares.push_back({key, compare::target::create_revision, compare::op::equal, rev});
    t.success.push_back(delete_request{key, ""});
    return t;
}

// Collects a watch's updates; wait() resumes when one arrives (or the stream ends).
struct watch_log {
    explicit watch_log(asio::any_io_executor ex) : signal(ex, asio::steady_timer::time_point::max()) {}
    std::vector<watch_update> updates;
    std::optional<error_code> end;
    int calls_after_end = 0;
    asio::steady_timer signal;

    watch_handler handler() {
        return [this](error_code ec, watch_update u) {
            if (end) ++calls_after_end;
            if (ec) {
                end = ec;
            } else {
                updates.push_back(std::move(u));
            }
            signal.cancel();
        };
    }

    template <class Pred>
    asio::awaitable<bool> wait(Pred pred, std::chrono::milliseconds limit = 5s) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (!pred() && std::chrono::steady_clock::now() < deadline) {
            signal.expires_at(deadline);
            co_await signal.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        co_return pred();
    }
};

}  // namespace

TEST_CASE("etcd gateway: put-if-absent with a lease, a prefix sorted by create revision, a "
          "guarded delete", "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto gw = gateway::create(ioc.get_executor(), options_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [gec, lease] = co_await op<lease_grant_result>([&](auto h) { gw->lease_grant(10, std::move(h)); });
        REQUIRE_FALSE(gec);
        REQUIRE(lease.ttl == 10);

        auto [ec1, first] = co_await op<txn_result>([&](auto h) { gw->txn(put_if_absent("l/b", lease.id, "l/"), std::move(h)); });
        REQUIRE_FALSE(ec1);
        CHECK(first.succeeded);
        REQUIRE(first.responses.size() == 2);
        const auto created = std::get<range_result>(first.responses[1]).kvs.at(0).create_revision;
        CHECK(created == first.header.revision);
        CHECK(std::get<range_result>(first.responses[1]).kvs.at(0).lease == lease.id);

        auto [ec2, again] = co_await op<txn_result>([&](auto h) { gw->txn(put_if_absent("l/b", lease.id, "l/"), std::move(h)); });
        REQUIRE_FALSE(ec2);
        CHECK_FALSE(again.succeeded);  // exists: the failure branch ranged the prefix
        REQUIRE(again.responses.size() == 1);

        // "l/a" sorts first by key but was created later.
        auto [ec3, second] = co_await op<txn_result>([&](auto h) { gw->txn(put_if_absent("l/a", lease.id, "l/"), std::move(h)); });
        REQUIRE_FALSE(ec3);
        const auto& kvs = std::get<range_result>(second.responses.at(1)).kvs;
        REQUIRE(kvs.size() == 2);
        CHECK(kvs[0].key == "l/b");
        CHECK(kvs[1].key == "l/a");
        CHECK(kvs[0].create_revision < kvs[1].create_revision);

        auto [ec4, wrong] = co_await op<txn_result>([&](auto h) { gw->txn(delete_if_created_at("l/b", created + 100), std::move(h)); });
        REQUIRE_FALSE(ec4);
        CHECK_FALSE(wrong.succeeded);
        auto [ec5, right] = co_await op<txn_result>([&](auto h) { gw->txn(delete_if_created_at("l/b", created), std::move(h)); });
        REQUIRE_FALSE(ec5);
        CHECK(right.succeeded);
        CHECK(std::get<delete_result>(right.responses.at(0)).deleted == 1);

        range_request limited = prefix("l/");
        limited.keys_only = true;
        limited.max_create_revision = created;  // only keys created up to l/b
        auto [ec6, left] = co_await op<range_result>([&](auto h) { gw->range(limited, std::move(h)); });
        REQUIRE_FALSE(ec6);
        CHECK(left.kvs.empty());
        auto [ec7, all] = co_await op<range_result>([&](auto h) { gw->range(prefix("l/"), std::move(h)); });
        REQUIRE_FALSE(ec7);
        REQUIRE(all.kvs.size() == 1);
        CHECK(all.kvs[0].key == "l/a");
        gw->stop();
    });
}

TEST_CASE("etcd gateway: lease grant, keep-alive, time-to-live and revoke, keys vanish on revoke",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto gw = gateway::create(ioc.get_executor(), options_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, lease] = co_await op<lease_grant_result>([&](auto h) { gw->lease_grant(5, std::move(h)); });
        REQUIRE_FALSE(ec);
        auto [kec, kept] = co_await op<lease_keepalive_result>([&](auto h) { gw->lease_keepalive(lease.id, std::move(h)); });
        REQUIRE_FALSE(kec);
        CHECK(kept.id == lease.id);
        CHECK(kept.ttl == 5);
        auto [tec, ttl] = co_await op<lease_ttl_result>([&](auto h) { gw->lease_timetolive(lease.id, std::move(h)); });
        REQUIRE_FALSE(tec);
        CHECK(ttl.ttl > 0);
        CHECK(ttl.granted_ttl == 5);

        auto [pec, put] = co_await op<txn_result>([&](auto h) { gw->txn(put_if_absent("v/k", lease.id, "v/"), std::move(h)); });
        REQUIRE_FALSE(pec);
        REQUIRE(put.succeeded);

        auto [rec, revoked] = co_await op<lease_revoke_result>([&](auto h) { gw->lease_revoke(lease.id, std::move(h)); });
        REQUIRE_FALSE(rec);
        CHECK(revoked.header.revision > put.header.revision);  // the key's deletion
        auto [gec, gone] = co_await op<range_result>([&](auto h) { gw->range(prefix("v/"), std::move(h)); });
        REQUIRE_FALSE(gec);
        CHECK(gone.kvs.empty());

        auto [k2, after] = co_await op<lease_keepalive_result>([&](auto h) { gw->lease_keepalive(lease.id, std::move(h)); });
        REQUIRE_FALSE(k2);
        CHECK(after.ttl <= 0);
        auto [t2, ttl2] = co_await op<lease_ttl_result>([&](auto h) { gw->lease_timetolive(lease.id, std::move(h)); });
        REQUIRE_FALSE(t2);
        CHECK(ttl2.ttl == -1);
        auto [r2, twice] = co_await op<lease_revoke_result>([&](auto h) { gw->lease_revoke(lease.id, std::move(h)); });
        CHECK(r2 == error::expired);
        CHECK_THAT(gw->last_error().message, Catch::Contains("requested lease not found"));
        gw->stop();
    });
}

TEST_CASE("etcd gateway: a watch sees a delete of its key, and cancel ends it promptly",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto gw = gateway::create(ioc.get_executor(), options_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [pec, put] = co_await op<txn_result>([&](auto h) { gw->txn(put_if_absent("w/k", 0, "w/"), std::move(h)); });
        REQUIRE_FALSE(pec);
        const auto created = std::get<range_result>(put.responses.at(1)).kvs.at(0).create_revision;

        watch_log log(co_await asio::this_coro::executor);
        auto w = gw->watch({"w/k", "", put.header.revision + 1}, log.handler());
        const bool waited1 = co_await log.wait([&] { return !log.updates.empty() || log.end; });
        REQUIRE(waited1);
        REQUIRE_FALSE(log.end);
        CHECK(log.updates.at(0).created);

        auto [dec, del] = co_await op<txn_result>([&](auto h) { gw->txn(delete_if_created_at("w/k", created), std::move(h)); });
        REQUIRE_FALSE(dec);
        REQUIRE(del.succeeded);
        const bool waited2 = co_await log.wait([&] { return log.updates.size() >= 2 || log.end; });
        REQUIRE(waited2);
        REQUIRE(log.updates.size() >= 2);
        REQUIRE(log.updates[1].events.size() == 1);
        const auto& ev = log.updates[1].events[0];
        CHECK(ev.type == watch_event::kind::del);
        CHECK(ev.kv.key == "w/k");
        CHECK(ev.kv.mod_revision == del.header.revision);

        w->cancel();
        w->cancel();  // idempotent
        const bool waited3 = co_await log.wait([&] { return log.end.has_value(); }, 2s);
        REQUIRE(waited3);
        CHECK(*log.end == asio::error::operation_aborted);
        CHECK(log.calls_after_end == 0);

        // A watch cancelled before it is in place ends too.
        watch_log early(co_await asio::this_coro::executor);
        auto w2 = gw->watch({"w/", prefix_end("w/"), 0}, early.handler());
        w2->cancel();
        const bool waited4 = co_await early.wait([&] { return early.end.has_value(); }, 6s);
        REQUIRE(waited4);
        CHECK(*early.end == asio::error::operation_aborted);
        gw->stop();
    });
}

TEST_CASE("etcd gateway: stop() ends a watch and refuses new requests", "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto gw = gateway::create(ioc.get_executor(), options_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        watch_log log(co_await asio::this_coro::executor);
        auto w = gw->watch({"s/", prefix_end("s/"), 0}, log.handler());
        const bool waited5 = co_await log.wait([&] { return !log.updates.empty() || log.end; });
        REQUIRE(waited5);
        gw->stop();
        gw->stop();
        const bool waited6 = co_await log.wait([&] { return log.end.has_value(); }, 2s);
        REQUIRE(waited6);
        CHECK(*log.end == error::client_stopped);
        auto [ec, r] = co_await op<range_result>([&](auto h) { gw->range(prefix("s/"), std::move(h)); });
        CHECK(ec == error::client_stopped);
    });
}

TEST_CASE("etcd gateway: a request to a stopped server fails with the cause in words",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto gw = gateway::create(ioc.get_executor(), options_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec1, r1] = co_await op<range_result>([&](auto h) { gw->range(prefix("x/"), std::move(h)); });
        REQUIRE_FALSE(ec1);
        server.kill9(0);
        auto [ec2, r2] = co_await op<range_result>([&](auto h) { gw->range(prefix("x/"), std::move(h)); });
        CHECK(ec2 == asio::error::connection_refused);
        CHECK_THAT(gw->last_error().message, Catch::Contains("connection refused"));
        CHECK_THAT(gw->last_error().message, Catch::Contains(server.endpoint()));
        gw->stop();
    });
}

TEST_CASE("etcd gateway: many concurrent requests share a few keep-alive connections",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    auto opts = options_for(server);
    opts.max_connections = 3;
    auto gw = gateway::create(ioc.get_executor(), opts);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        constexpr int n = 300;
        int ok = 0, done = 0;
        asio::steady_timer all_done(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
        for (int i = 0; i < n; ++i) {
            range_request r;
            r.key = "p/" + std::to_string(i);
            gw->range(r, [&](error_code ec, range_result) {
                ok += !ec;
                if (++done == n) all_done.cancel();
            });
        }
        co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
        CHECK(ok == n);
        CHECK(gw->connections_opened() >= 1);
        CHECK(gw->connections_opened() <= 3);
        // And they are kept: another round opens nothing.
        const auto before = gw->connections_opened();
        for (int i = 0; i < 20; ++i) {
            auto [ec, r] = co_await op<range_result>([&](auto h) { gw->range(prefix("p/"), std::move(h)); });
            REQUIRE_FALSE(ec);
        }
        CHECK(gw->connections_opened() == before);
        gw->stop();
    });
}

TEST_CASE("etcd gateway: a wrong password is auth_failed with etcd's message, a revoked token "
          "is renewed once", "[etcd][integration]") {
    etcd_server server;
    server.enable_auth("root-pw");
    asio::io_context ioc;
    auto bad_opts = options_for(server);
    bad_opts.username = "root";
    bad_opts.password = "wrong";
    auto bad = gateway::create(ioc.get_executor(), bad_opts);
    auto good_opts = bad_opts;
    good_opts.password = "root-pw";
    auto good = gateway::create(ioc.get_executor(), good_opts);
    auto anonymous = gateway::create(ioc.get_executor(), options_for(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec1, r1] = co_await op<range_result>([&](auto h) { bad->range(prefix("a/"), std::move(h)); });
        CHECK(ec1 == error::auth_failed);
        CHECK_THAT(bad->last_error().message, Catch::Contains("authentication failed"));
        CHECK(bad->last_error().message.find("wrong") == std::string::npos);  // no secret

        auto [ec0, r0] = co_await op<range_result>([&](auto h) { anonymous->range(prefix("a/"), std::move(h)); });
        CHECK(ec0);  // auth is really on

        auto [ec2, r2] = co_await op<txn_result>([&](auto h) { good->txn(put_if_absent("a/k", 0, "a/"), std::move(h)); });
        REQUIRE_FALSE(ec2);
        CHECK(good->authentications() == 1);

        // Disabling and re-enabling auth invalidates every token.
        const auto admin = server.authenticate(0, "root", "root-pw");
        REQUIRE(server.post(0, "/v3/auth/disable", "{}", admin).status == 200);
        REQUIRE(server.post(0, "/v3/auth/enable", "{}").status == 200);

        auto [ec3, r3] = co_await op<range_result>([&](auto h) { good->range(prefix("a/"), std::move(h)); });
        REQUIRE_FALSE(ec3);
        CHECK(r3.kvs.size() == 1);
        CHECK(good->authentications() == 2);

        watch_log log(co_await asio::this_coro::executor);
        auto w = good->watch({"a/k", "", 0}, log.handler());
        const bool waited7 = co_await log.wait([&] { return !log.updates.empty() || log.end; });
        REQUIRE(waited7);
        CHECK_FALSE(log.end);
        w->cancel();
        const bool waited8 = co_await log.wait([&] { return log.end.has_value(); }, 2s);
        REQUIRE(waited8);
        bad->stop();
        good->stop();
        anonymous->stop();
    });
}

TEST_CASE("etcd gateway: when the member it talks to is killed, the transport fails over",
          "[etcd][integration][cluster]") {
    etcd_server_options so;
    so.members = 3;
    etcd_cluster cluster(so);
    asio::io_context ioc;
    auto gw = gateway::create(ioc.get_executor(), options_for(cluster));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec1, put] = co_await op<txn_result>([&](auto h) { gw->txn(put_if_absent("f/k", 0, "f/"), std::move(h)); });
        REQUIRE_FALSE(ec1);
        REQUIRE(put.succeeded);
        const auto first_member = put.header.member_id;
        const auto opened = gw->connections_opened();

        // The gateway talks to the first endpoint; kill it, even if it leads.
        cluster.kill9(0);
        // A linearizable read during an election may be refused ("leader
        // changed"); a bounded number of tries.
        error_code ec;
        range_result r;
        for (int attempt = 0; attempt < 10; ++attempt) {
            std::tie(ec, r) = co_await op<range_result>([&](auto h) { gw->range(prefix("f/"), std::move(h)); });
            if (!ec) break;
            UNSCOPED_INFO("attempt " << attempt << ": " << gw->last_error().message);
            co_await sleep_for(200ms);
        }
        REQUIRE_FALSE(ec);
        REQUIRE(r.kvs.size() == 1);
        CHECK(r.header.member_id != first_member);
        CHECK(gw->connections_opened() > opened);
        gw->stop();
    }, 60s);
}


TEST_CASE("etcd gateway: etcds checks the server's certificate against the CA and the host name",
          "[etcd][integration][tls]") {
    etcd_server_options so;
    so.tls = true;
    etcd_server server(so);
    asio::io_context ioc;
    auto opts = options_for(server);
    opts.endpoints = {server.tls_endpoint(0)};
    opts.tls = true;
    opts.ca_file = server.ca_file();
    auto good = gateway::create(ioc.get_executor(), opts);
    opts.ca_file = server.wrong_ca_file();
    auto wrong_ca = gateway::create(ioc.get_executor(), opts);
    auto by_name_opts = opts;  // localhost reaches the server, but the certificate names 127.0.0.1
    by_name_opts.ca_file = server.ca_file();
    by_name_opts.endpoints = {"localhost:" + server.tls_endpoint(0).substr(server.tls_endpoint(0).rfind(':') + 1)};
    auto by_name = gateway::create(ioc.get_executor(), by_name_opts);
    auto plain_opts = options_for(server);  // TLS spoken to the plain port
    plain_opts.tls = true;
    plain_opts.ca_file = server.ca_file();
    auto plain = gateway::create(ioc.get_executor(), plain_opts);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec1, r1] = co_await op<txn_result>([&](auto h) { good->txn(put_if_absent("t/k", 0, "t/"), std::move(h)); });
        REQUIRE_FALSE(ec1);
        CHECK(r1.succeeded);
        auto [ec2, r2] = co_await op<range_result>([&](auto h) { wrong_ca->range(prefix("t/"), std::move(h)); });
        CHECK(ec2 == error::tls_handshake_failed);
        CHECK_THAT(wrong_ca->last_error().message, Catch::Contains("TLS handshake"));
        auto [ec3, r3] = co_await op<range_result>([&](auto h) { by_name->range(prefix("t/"), std::move(h)); });
        CHECK(ec3 == error::tls_handshake_failed);
        auto [ec4, r4] = co_await op<range_result>([&](auto h) { plain->range(prefix("t/"), std::move(h)); });
        CHECK(ec4 == error::tls_handshake_failed);
        good->stop();
        wrong_ca->stop();
        by_name->stop();
        plain->stop();
    });
}

namespace {

// A hostile gateway on a free loopback port: it answers every request it
// reads with `head`, then `tail` over and over (nothing, if empty) until
// the client hangs up or `cap` bytes went out. sent() is what it wrote.
class hostile_gateway {
public:
    hostile_gateway(asio::io_context& ioc, std::string head, std::string tail, std::size_t cap)
        : acceptor_(ioc, {asio::ip::make_address("127.0.0.1"), 0}),
          head_(std::move(head)), tail_(std::move(tail)), cap_(cap) {
        asio::co_spawn(ioc, serve(), asio::detached);
    }
    std::string endpoint() const {
        return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
    }
    std::size_t sent() const { return sent_; }
    bool client_hung_up() const { return hung_up_; }
    void stop() {
        error_code ignored;
        acceptor_.close(ignored);
        if (socket_) socket_->close(ignored);
    }

private:
    asio::awaitable<void> serve() {
        auto [ec, s] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;
        socket_.emplace(std::move(s));
        char request[4096];
        auto [rec, n] = co_await socket_->async_read_some(asio::buffer(request),
                                                          asio::as_tuple(asio::use_awaitable));
        if (rec) co_return;
        auto [wec, w] = co_await asio::async_write(*socket_, asio::buffer(head_),
                                                   asio::as_tuple(asio::use_awaitable));
        sent_ += w;
        if (wec || tail_.empty()) co_return;
        while (sent_ < cap_) {
            auto [tec, t] = co_await asio::async_write(*socket_, asio::buffer(tail_),
                                                       asio::as_tuple(asio::use_awaitable));
            sent_ += t;
            if (tec) {
                hung_up_ = true;
                co_return;
            }
        }
    }

    asio::ip::tcp::acceptor acceptor_;
    std::optional<asio::ip::tcp::socket> socket_;
    std::string head_, tail_;
    std::size_t cap_;
    std::size_t sent_ = 0;
    bool hung_up_ = false;
};

}  // namespace

TEST_CASE("etcd gateway: an endless chunk extension is refused with the memory it may take",
          "[etcd][integration][hostile]") {
    // Boost 1.81's HTTP parser bounds no chunk-size line: the connection's
    // buffer grew for as long as the server sent. It is bounded (1 MiB).
    asio::io_context ioc;
    hostile_gateway server(ioc,
                           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n5;ext=",
                           std::string(64 * 1024, 'a'), 64u << 20);
    gateway_options opts;
    opts.endpoints = {server.endpoint()};
    opts.request_timeout = 20s;
    auto gw = gateway::create(ioc.get_executor(), opts);
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await op<range_result>([&](auto h) { gw->range(prefix("x/"), std::move(h)); });
        CHECK(ec == error::reply_too_large);
        CHECK_THAT(gw->last_error().message, Catch::Contains("over 1 MiB"));
        gw->stop();
        // The client hung up: what went out is the 1 MiB buffer plus what the
        // kernel's socket buffers held, far from the 64 MiB the server had.
        for (int i = 0; i < 500 && !server.client_hung_up(); ++i) co_await sleep_for(10ms);
        CHECK(server.client_hung_up());
        CHECK(server.sent() < (32u << 20));
        server.stop();
    }, 30s);
}

TEST_CASE("etcd gateway: a watch that hears nothing ends at its idle timeout",
          "[etcd][integration][hostile]") {
    // The headers, then silence: the watch used to wait for ever.
    asio::io_context ioc;
    hostile_gateway server(ioc,
                           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n",
                           "", 0);
    gateway_options opts;
    opts.endpoints = {server.endpoint()};
    opts.watch_idle_timeout = 300ms;
    auto gw = gateway::create(ioc.get_executor(), opts);
    watch_log log(ioc.get_executor());
    run_async(ioc, [&]() -> asio::awaitable<void> {
        auto w = gw->watch({"w/", prefix_end("w/"), 0}, log.handler());
        REQUIRE(co_await log.wait([&] { return log.end.has_value(); }, 10s));
        CHECK(*log.end == error::timeout);
        CHECK(log.updates.empty());
        CHECK_THAT(gw->last_error().message, Catch::Contains("nothing heard for 300 ms"));
        gw->stop();
        server.stop();
    }, 20s);
}
