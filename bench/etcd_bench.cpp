// corolock_bench_etcd: the etcd backend measured against the etcd it talks
// to, in one run (scripts/bench.sh starts a throwaway etcd and runs it).
// What is measured, and how, is bench/backend_bench.hpp's; this program
// supplies the raw requests:
//
//   corolock_bench_etcd --url etcd://127.0.0.1:PORT [--mode full|quick|smoke] [--out FILE]
//
//  floor: POST /v3/kv/range of one key through the library's etcd transport
//     (src/etcd/gateway.hpp) on a kept-alive connection.
//  raw protocol cycle: the lock's own requests of an uncontended acquire
//     and release: the creating txn on a lease granted once (the backend
//     shares one per lease duration, src/etcd/lease_pool.hpp), and the
//     delete guarded by the key's create revision.
#include "backend_bench.hpp"

#include "etcd/etcd_backend.hpp"
#include "etcd/gateway.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <stdexcept>
#include <string>

namespace asio = boost::asio;
namespace etcd = corolock::detail::etcd;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// One transport call as an awaitable (error_code, result).
template <class Result, class Call>
auto ask(Call call) {
    return asio::async_initiate<decltype(use_nothrow), void(corolock::error_code, Result)>(
        [call](auto handler) mutable { call(std::move(handler)); }, use_nothrow);
}

class etcd_raw final : public bench::raw_client {
public:
    etcd_raw(asio::any_io_executor ex, std::shared_ptr<etcd::gateway> gw)
        : ex_(std::move(ex)), gw_(std::move(gw)) {}

    asio::any_io_executor executor() const override { return ex_; }

    asio::awaitable<void> round_trip() override {
        etcd::range_request req;
        req.key = "corolock-bench/floor";
        auto [ec, r] = co_await ask<etcd::range_result>([&](auto h) { gw_->range(req, std::move(h)); });
        if (ec) throw std::runtime_error("range: " + gw_->last_error().message);
    }

    bool has_protocol_cycle() const override { return true; }

    asio::awaitable<void> protocol_cycle() override {
        const std::string key = "corolock-bench/raw/owner";
        if (lease_ == 0) {
            // Once, as the backend's first acquire of a lease duration does;
            // 60 s outlives a run's rounds without a keep-alive.
            auto [e1, lease] = co_await ask<etcd::lease_grant_result>(
                [&](auto h) { gw_->lease_grant(60, std::move(h)); });
            if (e1) throw std::runtime_error("lease grant: " + gw_->last_error().message);
            lease_ = lease.id;
        }
        etcd::txn_request txn;
        txn.compares.push_back({key, etcd::compare::target::create_revision,
                                etcd::compare::op::equal, 0});
        txn.success.emplace_back(etcd::put_request{key, "", lease_});
        etcd::range_request all;
        all.key = "corolock-bench/raw/";
        all.range_end = etcd::prefix_end(all.key);
        all.sort_by_create_revision = true;
        all.limit = 1;
        txn.success.emplace_back(all);
        txn.failure.emplace_back(all);
        auto [e2, t] = co_await ask<etcd::txn_result>([&](auto h) { gw_->txn(txn, std::move(h)); });
        if (e2) throw std::runtime_error("txn: " + gw_->last_error().message);
        etcd::txn_request del;
        del.compares.push_back({key, etcd::compare::target::create_revision,
                                etcd::compare::op::equal, t.header.revision});
        del.success.emplace_back(etcd::delete_request{key, {}});
        auto [e3, d] = co_await ask<etcd::txn_result>([&](auto h) { gw_->txn(del, std::move(h)); });
        if (e3) throw std::runtime_error("delete: " + gw_->last_error().message);
    }

    void stop() noexcept override { gw_->stop(); }

private:
    asio::any_io_executor ex_;
    std::shared_ptr<etcd::gateway> gw_;
    std::int64_t lease_ = 0;
};

// A raw client on the server `url` names.
bench::raw_connection connect_raw(asio::any_io_executor ex, std::string url) {
    etcd::backend_options opts;
    std::string why;
    if (etcd::parse_url(url, opts, why)) throw std::runtime_error("bad URL: " + why);
    co_return std::make_unique<etcd_raw>(ex, etcd::gateway::create(ex, opts.gateway));
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_backend_bench(
        argc, argv,
        {.program = "corolock_bench_etcd",
         .floor_request = "POST /v3/kv/range of one key",
         .connect = connect_raw,
         // etcd raises a lease's TTL to its minimum, one and a half election
         // timeouts rounded up to whole seconds: 2 s for the throwaway etcd's
         // default flags (scripts/lib/throwaway_etcd.sh), so a 1 s lease
         // would end 2 s after its grant, not 1 s.
         .dead_leader = bench::dead_leader_ends::lease,
         .failover_lease = std::chrono::milliseconds(2000)});
}
