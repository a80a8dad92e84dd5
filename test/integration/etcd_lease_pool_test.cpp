// The etcd backend's shared leases (src/etcd/lease_pool.hpp) against a real
// etcd, counted by the server itself (its gRPC counters, which the gateway's
// requests go through): an uncontended cycle is one txn and one delete on a
// lease granted once; every lock of one lease duration shares the lease and
// its keep-alives; a lease lost, by a revoke from outside or by keep-alives
// that go unanswered past its deadline, loses every lock under it and no
// other.
#include "etcd/codec.hpp"
#include "etcd/etcd_backend.hpp"

#include "support/async_test.hpp"
#include "support/etcd_server.hpp"
#include "support/lock_testing.hpp"

#include <corolock/backend.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace corolock;
using namespace corolock::test;
namespace etcd = corolock::detail::etcd;

// Named, not anonymous: the unity build joins this file with others.
namespace lease_pool_test {

std::string url_of(const etcd_server& s) { return "etcd://" + s.endpoint(); }

// The server's count of gRPC calls of `method` handled (or started, for a
// stream), over every outcome, from its /metrics page.
std::uint64_t grpc_calls(const etcd_server& s, const std::string& method,
                         const std::string& counter = "grpc_server_handled_total") {
    const auto page = s.get(0, "/metrics");
    REQUIRE(page.status == 200);
    std::istringstream in(page.body);
    std::uint64_t total = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(counter + "{", 0) != 0) continue;
        if (line.find("grpc_method=\"" + method + "\"") == std::string::npos) continue;
        total += std::stoull(line.substr(line.rfind(' ') + 1));
    }
    return total;
}

struct server_calls {
    std::uint64_t txns, grants, revokes, deletes, puts;
};

server_calls calls_of(const etcd_server& s) {
    return {grpc_calls(s, "Txn"), grpc_calls(s, "LeaseGrant"), grpc_calls(s, "LeaseRevoke"),
            grpc_calls(s, "DeleteRange"), grpc_calls(s, "Put")};
}

// The lease of the key of lock `name` held under the default prefix (0: no
// such key), read through the gateway.
std::int64_t lease_of(const etcd_server& s, const std::string& name) {
    const auto prefix = etcd::lock_prefix("corolock/", name);
    const auto answer = s.post(0, "/v3/kv/range",
                               "{\"key\":\"" + etcd::codec::base64_encode(prefix) +
                                   "\",\"range_end\":\"" +
                                   etcd::codec::base64_encode(etcd::prefix_end(prefix)) + "\"}");
    REQUIRE(answer.status == 200);
    const auto doc = boost::json::parse(answer.body).as_object();
    const auto* kvs = doc.if_contains("kvs");
    if (!kvs || kvs->as_array().empty()) return 0;
    const auto& kv = kvs->as_array().front().as_object();
    const auto* lease = kv.if_contains("lease");
    return lease ? std::stoll(std::string(lease->as_string())) : 0;
}

// As `etcdctl lease revoke`: through the gateway, from outside the library.
void revoke(const etcd_server& s, std::int64_t lease) {
    const auto answer = s.post(0, "/v3/lease/revoke", "{\"ID\":\"" + std::to_string(lease) + "\"}");
    INFO(answer.body);
    REQUIRE(answer.status == 200);
}

}  // namespace lease_pool_test

using lease_pool_test::calls_of;
using lease_pool_test::grpc_calls;
using lease_pool_test::lease_of;

TEST_CASE("etcd: an uncontended cycle is one txn and one delete, on a lease granted once",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    backend b(ioc.get_executor(), lease_pool_test::url_of(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        mutex m(b, "cycle");
        const auto before = calls_of(server);
        std::uint64_t last_token = 0;
        {
            auto g = co_await m.acquire({.lease = 30s});
            last_token = g.token();
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
        }
        // The first cycle grants the backend's lease for 30 s: a grant, the
        // acquire's txn, the release's guarded delete (a txn).
        const auto first = calls_of(server);
        CHECK(first.grants - before.grants == 1);
        CHECK(first.txns - before.txns == 2);

        constexpr int cycles = 5;
        for (int i = 0; i < cycles; ++i) {
            auto g = co_await m.acquire({.lease = 30s});
            CHECK(g.token() > last_token);  // the revision of the confirming write
            last_token = g.token();
            const auto ec = co_await g.release();
            CHECK_FALSE(ec);
        }
        const auto after = calls_of(server);
        CHECK(after.txns - first.txns == 2 * cycles);
        CHECK(after.grants == first.grants);
        CHECK(after.revokes == before.revokes);
        CHECK(after.deletes == before.deletes);
        CHECK(after.puts == before.puts);
        b.stop();
    }, 60s);
}

TEST_CASE("etcd: a lease revoked from outside loses every lock under it, and no lock of "
          "another lease",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    backend b(ioc.get_executor(), lease_pool_test::url_of(server));
    backend other(ioc.get_executor(), lease_pool_test::url_of(server));
    run_async(ioc, [&]() -> asio::awaitable<void> {
        mutex m1(b, "r1"), m2(b, "r2"), m3(b, "r3"), m4(b, "r4");
        auto g1 = co_await m1.acquire({.lease = 30s});
        auto g2 = co_await m2.acquire({.lease = 30s});
        auto g3 = co_await m3.acquire({.lease = 30s});
        auto g4 = co_await m4.acquire({.lease = 20s});  // another duration, another lease

        // One lease per duration, shared.
        const auto shared = lease_of(server, "r1");
        REQUIRE(shared != 0);
        CHECK(lease_of(server, "r2") == shared);
        CHECK(lease_of(server, "r3") == shared);
        const auto own = lease_of(server, "r4");
        CHECK(own != 0);
        CHECK(own != shared);

        lease_pool_test::revoke(server, shared);
        const bool all_lost = co_await eventually(
            [&] { return g1.lost() && g2.lost() && g3.lost(); }, 10000ms);
        CHECK(all_lost);
        CHECK(g1.lost());
        CHECK(g2.lost());
        CHECK(g3.lost());
        CHECK_FALSE(g4.lost());
        CHECK(m1.held_levels() == 0);
        CHECK(m2.held_levels() == 0);
        CHECK(m3.held_levels() == 0);

        // The names are free for another owner, with larger tokens.
        {
            mutex o1(other, "r1");
            auto [ec, og] = co_await o1.async_try_acquire({.lease = 30s}, use_nothrow);
            REQUIRE_FALSE(ec);
            CHECK(og.token() > g3.token());
            const auto rec = co_await og.release();
            CHECK_FALSE(rec);
        }
        // The backend's next acquire of that duration gets a fresh lease.
        {
            auto g5 = co_await m2.acquire({.lease = 30s});
            const auto fresh = lease_of(server, "r2");
            CHECK(fresh != 0);
            CHECK(fresh != shared);
            const auto rec = co_await g5.release();
            CHECK_FALSE(rec);
        }
        const auto rec4 = co_await g4.release();
        CHECK_FALSE(rec4);
        b.stop();
        other.stop();
    }, 60s);
}

TEST_CASE("etcd: a lease whose keep-alives go unanswered loses every lock under it at its "
          "deadline",
          "[etcd][integration]") {
    etcd_server server;
    asio::io_context ioc;
    backend b(ioc.get_executor(), lease_pool_test::url_of(server));
    backend single(ioc.get_executor(), lease_pool_test::url_of(server));  // one lock, for comparison
    run_async(ioc, [&]() -> asio::awaitable<void> {
        mutex alone(single, "k0");
        auto g0 = co_await alone.acquire({.lease = 2s});
        mutex m1(b, "k1"), m2(b, "k2"), m3(b, "k3");
        auto g1 = co_await m1.acquire({.lease = 2s});
        auto g2 = co_await m2.acquire({.lease = 2s});
        auto g3 = co_await m3.acquire({.lease = 2s});
        const auto shared = lease_of(server, "k1");
        REQUIRE(shared != 0);
        CHECK(lease_of(server, "k2") == shared);
        CHECK(lease_of(server, "k3") == shared);

        // The lease's keep-alives hold all three past their first deadline,
        // and three locks cost what one does: one keep-alive per lease, on
        // the same timetable as the one-lock backend's (not one a lock).
        const auto held_until = g1.lease_deadline();
        const auto single_before = single.metrics().renewals_sent;
        const auto sent_before = b.metrics().renewals_sent;
        const bool renewed = co_await eventually(
            [&] {
                return single.metrics().renewals_sent >= single_before + 4 &&
                       std::chrono::steady_clock::now() > held_until;
            },
            20000ms);
        REQUIRE(renewed);
        CHECK_FALSE(g1.lost());
        CHECK_FALSE(g2.lost());
        CHECK_FALSE(g3.lost());
        CHECK(g2.lease_deadline() > held_until);
        CHECK(g3.lease_deadline() > held_until);
        const auto sent = b.metrics().renewals_sent - sent_before;
        const auto single_sent = single.metrics().renewals_sent - single_before;
        INFO("three locks: " << sent << " keep-alives; one lock: " << single_sent);
        CHECK(sent <= single_sent + 1);
        CHECK(sent + 1 >= single_sent);
        CHECK(b.metrics().renewals_failed == 0);

        // Unanswered from now: every lock is lost, none before its deadline.
        const auto deadline = std::min({g1.lease_deadline(), g2.lease_deadline(),
                                        g3.lease_deadline()});
        server.pause(0);
        const bool all_lost = co_await eventually(
            [&] { return g1.lost() && g2.lost() && g3.lost(); }, 15000ms);
        const auto seen_lost = std::chrono::steady_clock::now();
        server.resume(0);
        CHECK(all_lost);
        CHECK(g1.lost());
        CHECK(g2.lost());
        CHECK(g3.lost());
        CHECK(seen_lost >= deadline);
        CHECK(b.metrics().leases_lost >= 3);
        b.stop();
        single.stop();
    }, 60s);
}
