// corolock_bench_pg: the PostgreSQL backend against raw round trips to the
// same server, in one run (scripts/bench.sh starts a throwaway server and
// runs it; docs/postgresql.md, "Measurements"). What is measured, and how,
// is bench/backend_bench.hpp's; this program supplies the raw requests:
//
//   corolock_bench_pg --url postgresql://... [--mode full|quick|smoke] [--out FILE] [--held N]
//
//  floor: `SELECT 1` on one session through the backend's own libpq shell
//     (src/pg/connection.hpp).
//  raw protocol cycle: the statements of an uncontended acquire (with a
//     wait) and release, on that session: wait_setup, wait_acquire (the
//     advisory lock and the fence's commit), release.
//  held (after the rest): N locks held at once by one backend (one session
//     each; 100 unless --held says otherwise, 0: skipped), and the server's
//     memory for them: the PSS of their server processes, read from /proc,
//     so run it on the server's machine, as root or as the user running
//     postgres.
#include "backend_bench.hpp"

#include "pg/connection.hpp"

#include <corolock/backend.hpp>
#include <corolock/mutex.hpp>

#include <boost/asio/strand.hpp>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
namespace pg = corolock::detail::pg;

namespace {

long pss_kb(const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/smaps_rollup");
    std::string key;
    long v = 0;
    while (in >> key) {
        if (key == "Pss:") {
            in >> v;
            return v;
        }
        in.ignore(1 << 20, '\n');
    }
    return -1;
}

asio::awaitable<pg::answer> must(std::shared_ptr<pg::connection> c, pg::statement s) {
    auto a = co_await c->exec(std::move(s));
    if (!a.ok()) throw std::runtime_error("statement failed: " + a.sqlstate + " " + a.message);
    co_return a;
}

asio::awaitable<std::shared_ptr<pg::connection>> open(asio::any_io_executor ex, std::string url) {
    auto parts = std::make_shared<pg::url_parts>();
    std::string why;
    if (pg::split_url(url, *parts, why)) throw std::runtime_error("bad URL: " + why);
    auto c = std::make_shared<pg::connection>(
        asio::make_strand(corolock::detail::inner_executor(ex)), std::move(parts));
    if (co_await c->connect(5s, why)) throw std::runtime_error("connect: " + why);
    co_return c;
}

class pg_raw final : public bench::raw_client {
public:
    pg_raw(asio::any_io_executor ex, std::shared_ptr<pg::connection> c)
        : ex_(std::move(ex)), c_(std::move(c)) {}

    asio::any_io_executor executor() const override { return ex_; }

    asio::awaitable<void> round_trip() override { co_await must(c_, pg::renew()); }

    bool has_protocol_cycle() const override { return true; }

    asio::awaitable<void> protocol_cycle() override {
        const std::string name = "bench/raw";
        co_await must(c_, pg::wait_setup(10s, "corolock-bench-raw"));
        co_await must(c_, pg::wait_acquire(name, 10s, "4242 bench-host corolock_bench_pg"));
        co_await must(c_, pg::release(name));
    }

    void stop() noexcept override { c_->close(); }

private:
    asio::any_io_executor ex_;
    std::shared_ptr<pg::connection> c_;
};

// `held` locks held at once by one backend, and their sessions' memory.
asio::awaitable<void> held_locks(asio::any_io_executor ex, std::string url, bench::run_mode mode,
                                 const bench::option_map& opt, bench::metrics& m) {
    const auto it = opt.find("held");
    const int held = it != opt.end() ? std::stoi(it->second)
                                     : (mode == bench::run_mode::smoke ? 5 : 100);
    if (held <= 0) co_return;
    corolock::backend b(ex, url);
    std::vector<std::unique_ptr<corolock::mutex>> handles;
    std::vector<corolock::guard> guards;
    for (int i = 0; i < held; ++i) {
        handles.push_back(std::make_unique<corolock::mutex>(b, "bench:held:" + std::to_string(i)));
        guards.push_back(co_await handles.back()->acquire({.lease = 30s}));
    }
    auto raw = co_await open(ex, url);
    const auto pids = co_await must(
        raw, {"SELECT pid::text FROM pg_stat_activity WHERE application_name LIKE 'corolock:%' "
              "AND state = 'idle'",
              {}});
    long total = 0, counted = 0;
    for (const auto& r : pids.rows)
        if (const long kb = r.at(0) ? pss_kb(*r[0]) : -1; kb > 0) {
            total += kb;
            ++counted;
        }
    for (auto& g : guards) co_await g.release();
    m.count("held_locks", static_cast<std::uint64_t>(held));
    m.count("held_sessions_seen", pids.rows.size());
    m.number("held_session_pss_kb", counted ? static_cast<double>(total) / counted : NAN);
    raw->close();
    b.stop();
}

// A raw client on the server `url` names.
bench::raw_connection connect_raw(asio::any_io_executor ex, std::string url) {
    auto c = co_await open(ex, url);
    // What the backend does once per session and once per backend.
    co_await must(c, pg::session_setup());
    if (const auto a = co_await c->exec(pg::create_table()); !a.ok() && !pg::ddl_ok(a.sqlstate))
        throw std::runtime_error("create table: " + a.message);
    co_return std::make_unique<pg_raw>(ex, c);
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_backend_bench(
        argc, argv,
        {.program = "corolock_bench_pg",
         .floor_request = "SELECT 1",
         .connect = connect_raw,
         // A killed leader's advisory lock ends with its connection, at
         // once, not at its lease (docs/election.md, "Under faults").
         .dead_leader = bench::dead_leader_ends::connection,
         .extra = held_locks});
}
