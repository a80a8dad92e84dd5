// One home for the benchmarks of one backend against raw round trips to its
// own server, measured in the same run: corolock_bench_etcd, _pg and _zk
// each supply only how to talk to their server raw (raw_client); the
// measuring, the statistics, the handoff workers and the JSON live here.
//
//   PROGRAM --url URL [--mode full|quick|smoke] [--out FILE] [program options]
//   PROGRAM --worker --url URL --name N --start-ns S --end-ns T [--kind mutex|election]
//                                                   (a handoff worker)
//   PROGRAM --lead --url URL --name N --lease-ms L  (ELECT's leader to kill)
//
// What it measures (one "key<TAB>value" line each on stdout, and one JSON
// object in FILE):
//  floor: raw round trips of one cheap request (a read) through the
//     library's own transport for that server, no lock logic: rtt_p50_us.
//     Where the program offers it, also the lock protocol's own requests
//     of an uncontended acquire+release done raw: raw_protocol_cycle_p50_us.
//  cycle: uncontended acquire+release on one name, one coroutine, through
//     corolock::backend(URL): cycle_p50_us, cycle_p99_us, and
//     cycle_over_two_rtt (and cycle_over_raw_protocol_cycle). Floor and
//     cycle run in paired rounds and each ratio is the median of the
//     rounds' ratios: this machine's speed moves within seconds.
//  handoff: two worker processes (this program, --worker) cycle on one
//     name; a handoff is one process's release call to the other's acquire
//     returning (CLOCK_MONOTONIC, shared by both): handoff_p50_us,
//     handoff_p99_us, handoff_over_rtt (against floors taken just before
//     and after), and fairness: grants per process, least over most.
//  ELECT, leader election (docs/election.md) by the same measures, each
//     against its floor in the same run (issue 48):
//     resign to new leader: the handoff workers again, as candidates (a
//     campaign is the acquire, a resign the release), right after the
//     mutex's: resign_handoff_p50_us, resign_over_mutex_handoff_p50;
//     observe: a leader proclaims, an observer on a backend of its own
//     reports the value: observe_p50_us, observe_over_rtt; and the
//     proclaim's own time (what a campaign adds to the mutex's acquire):
//     proclaim_p50_us, proclaim_over_rtt;
//     failover after kill -9: a leader in a child process (--lead) is
//     killed while a candidate waits; from the kill to the candidate's
//     term (failover_after_kill_*), and from what ends the dead term on
//     this server (dead_leader_ends, below) to that term, in floor round
//     trips (failover_beyond_floor_rtts_max; the target is 2).
// Benchmarks are not tests: nothing here asserts on speed.
#pragma once

#include "bench.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace bench {

// Raw requests to the server a backend URL names, no lock logic.
class raw_client {
public:
    virtual ~raw_client() = default;
    // Where round_trip() and protocol_cycle() must run (a strand of the
    // transport's, or the caller's executor).
    virtual boost::asio::any_io_executor executor() const = 0;
    // One floor request: a read the server answers from memory. Throws on
    // failure.
    virtual boost::asio::awaitable<void> round_trip() = 0;
    // The requests of one uncontended acquire+release done raw, when the
    // program offers them (has_protocol_cycle()).
    virtual bool has_protocol_cycle() const { return false; }
    virtual boost::asio::awaitable<void> protocol_cycle();
    virtual void stop() noexcept {}
};

// What a program's connect() gives: its raw client, connected.
using raw_connection = boost::asio::awaitable<std::unique_ptr<raw_client>>;

// Program options beyond the common ones ("--held 100" is {"held", "100"}).
using option_map = std::map<std::string, std::string>;

// What ends a killed leader's term on a server: ELECT's failover floor.
enum class dead_leader_ends {
    lease,       // the lease, on the server's clock (etcd)
    session,     // the session timeout, at the server's next expiry sweep (ZooKeeper)
    connection,  // its connection, at once (PostgreSQL's session-level lock)
};

struct backend_bench {
    std::string program;        // for messages: "corolock_bench_zk"
    std::string floor_request;  // what one floor round trip is, for the JSON
    std::function<raw_connection(boost::asio::any_io_executor, std::string url)> connect;
    // ELECT's failover: what ends the killed leader's term, the lease it
    // campaigns with (on ZooKeeper: the session timeout it asks for), and
    // what its URL gets beyond the program's (ZooKeeper: that timeout).
    dead_leader_ends dead_leader = dead_leader_ends::lease;
    std::chrono::milliseconds failover_lease{1000};
    std::string failover_url_query{};
    // Optional: more figures of the same run, after the others.
    std::function<boost::asio::awaitable<void>(boost::asio::any_io_executor, std::string url,
                                               run_mode, const option_map&, metrics&)>
        extra = nullptr;
};

// main() of such a program.
int run_backend_bench(int argc, char** argv, const backend_bench& b);

}  // namespace bench
