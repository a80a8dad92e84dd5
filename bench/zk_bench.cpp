// corolock_bench_zk: the ZooKeeper backend against raw round trips to the
// same server, in one run (scripts/bench.sh starts a throwaway ZooKeeper
// and runs it). What is measured, and how, is bench/backend_bench.hpp's;
// this program supplies the raw requests, on a session of the backend's own
// session layer (src/zk/session.hpp) driven by the same io_context:
//
//   corolock_bench_zk --url zk://127.0.0.1:PORT [--mode full|quick|smoke] [--out FILE]
//
//  floor: getData of the root node "/" (a read the server answers from
//     memory; the session layer has no exists, which costs the same).
//  raw protocol cycle: the requests of an uncontended acquire and release
//     in the lock recipe (src/zk/zk_backend.cpp): create an ephemeral
//     sequential node in a lock directory, in one multi with an empty
//     setData of the directory (session::create_child), then delete the
//     node.
//  ELECT's failover: the killed leader's session (4 s) is what ends its
//     term.
#include "backend_bench.hpp"

#include "core/logging.hpp"
#include "zk/session.hpp"
#include "zk/url.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <zookeeper/zookeeper.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace zk = corolock::detail::zk;
using namespace std::chrono_literals;

namespace {

const std::string raw_dir = "/corolock-bench-raw";

void check(int rc, const char* what) {
    if (rc != ZOK) throw std::runtime_error(std::string(what) + ": " + zerror(rc));
}

class zk_raw final : public bench::raw_client {
public:
    zk_raw(zk::session::strand_type strand, std::shared_ptr<spdlog::logger> log, zk::zk_options opts)
        : strand_(std::move(strand)),
          log_(std::move(log)),
          s_(std::make_shared<zk::session>(strand_, std::move(opts), *log_, [](zk::session::event) {})) {}

    // On the strand: starts the session and waits (10 s at most) until it
    // is connected, then makes the raw cycle's directory.
    asio::awaitable<void> start() {
        s_->start();
        asio::steady_timer t(strand_);
        for (int i = 0; i < 1000 && !s_->timing().connected(); ++i) {
            t.expires_after(10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        if (!s_->timing().connected()) throw std::runtime_error("no ZooKeeper session within 10 s");
        auto [rc, path, st] = co_await zk::ask<int, std::string, zk::node_stat>(
            strand_, [&](auto h) { s_->create(raw_dir, {}, 0, std::move(h)); });
        if (rc != ZNODEEXISTS) check(rc, "create the raw directory");
    }

    asio::any_io_executor executor() const override { return strand_; }

    asio::awaitable<void> round_trip() override {
        auto [rc, data, st] = co_await zk::ask<int, std::string, zk::node_stat>(
            strand_, [&](auto h) { s_->get_data("/", std::move(h)); });
        check(rc, "getData /");
    }

    bool has_protocol_cycle() const override { return true; }

    asio::awaitable<void> protocol_cycle() override {
        auto [rc, path, st] = co_await zk::ask<int, std::string, zk::node_stat>(
            strand_, [&](auto h) {
                s_->create_child(raw_dir, "lock-", "4242 bench-host corolock_bench_zk",
                                 std::move(h));
            });
        check(rc, "create");
        auto [drc] = co_await zk::ask<int>(strand_, [&](auto h) { s_->remove(path, std::move(h)); });
        check(drc, "delete");
    }

    void stop() noexcept override {
        asio::post(strand_, [s = s_] { s->stop(); });
    }

private:
    zk::session::strand_type strand_;
    std::shared_ptr<spdlog::logger> log_;
    std::shared_ptr<zk::session> s_;
};

// A raw client on the server `url` names.
bench::raw_connection connect_raw(asio::any_io_executor ex, std::string url) {
    zk::zk_options opts;
    std::string why;
    if (zk::parse_url(url, opts, why)) throw std::runtime_error("bad URL: " + why);
    auto raw = std::make_unique<zk_raw>(asio::make_strand(corolock::detail::inner_executor(ex)),
                                        corolock::detail::default_logger(), opts);
    co_await asio::co_spawn(raw->executor(), raw->start(), asio::use_awaitable);
    co_return std::move(raw);
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_backend_bench(
        argc, argv,
        {.program = "corolock_bench_zk",
         .floor_request = "getData /",
         .connect = connect_raw,
         // A killed leader's node goes when its session expires: the
         // throwaway server (scripts/lib/throwaway_zk.sh) has tickTime 2 s,
         // so 4 s (two ticks) is the shortest session it grants, and it
         // expires sessions once a tick.
         .dead_leader = bench::dead_leader_ends::session,
         .failover_lease = std::chrono::milliseconds(4000),
         .failover_url_query = "session_timeout_ms=4000"});
}
