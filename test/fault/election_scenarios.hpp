// The election fault scenarios, one function each, run on every backend
// whose election the fault tier tests: Redis (election_faults_test.cpp),
// etcd (etcd_election_faults_test.cpp), ZooKeeper
// (zk_election_faults_test.cpp) and PostgreSQL
// (pg_election_faults_test.cpp); and one across a failover of a
// multi-server deployment (a three-member etcd cluster, a three-server
// ZooKeeper ensemble: etcd_election_failover_test.cpp,
// zk_election_failover_test.cpp). lock_worker processes in elect-cycle mode
// (test/fault/fault_fleet.hpp), each cycle a term: campaign, the section as
// leader with the term's epoch as its token (a proclaim in its middle),
// resign. The history checker reads the terms as it reads a lock's holders:
// at most one leader in the safe window (I1: no two terms overlap),
// epochs fencing off a late leader's write, every lost signal before the
// server could end the term; and the terms' epochs rise in the order they
// were won. Each scenario also asserts who led around the fault: the
// victim's term, the next leader's higher epoch, and their order. Each scenario prints the
// time from the fault to the next leader (a figure, not an assertion:
// only loose sanity bounds on time).
#pragma once

#include <corolock/backend.hpp>
#include <corolock/election.hpp>

#include "fault/failover_checks.hpp"
#include "fault/fault_fleet.hpp"
#include "support/async_test.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_server.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_peers.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace corolock::test::fault::election_scenarios {

// Where the candidates campaign. Redis: `lock` is null and the fleet's
// redis-server is the election's server as well as the resource (the
// counter and the fenced oracle). Another backend: `lock` is its server
// (support/lock_server.hpp), reached by URL; or, for a deployment of
// several servers, `urls` (worker i campaigns through urls[i % size], each
// listing every member) and `lock` null. Either way the resource stays on
// a redis-server of its own (fleet_options::separate_resource).
struct target {
    std::string backend;  // for the output: "redis", "etcd", "zk", "postgresql"
    redis_server& resource;
    lock_server* lock = nullptr;
    std::vector<std::string> urls = {};
    // The terms' lease (ZooKeeper: the session timeout the URLs ask for).
    std::chrono::milliseconds lease{1000};
    // How long each worker cycles: long enough for the fault, the next
    // term and some after it (a server's restart takes seconds on etcd and
    // ZooKeeper).
    std::chrono::milliseconds duration{4000};
};

inline std::chrono::milliseconds expiry_slack(const target& t) {
    return t.lock ? t.lock->expiry_slack() : std::chrono::milliseconds(0);
}

inline fleet_options election_fleet(const target& t, const std::string& name) {
    // A rest after each resign, so that a waiting candidate is the one the
    // resign hands over to (the queue is first come, first served).
    fleet_options o{.workers = 4, .lease = t.lease, .hold = 200ms, .duration = t.duration,
                    .name = name, .elect = true, .rest = 100ms};
    if (t.lock) o.urls = {t.lock->url()};
    if (!t.urls.empty()) o.urls = t.urls;
    o.separate_resource = !o.urls.empty();
    return o;
}

// Epochs of the terms in the order they were won: strictly increasing.
inline bool epochs_rise(const history::check_result& r) {
    std::vector<const history::holder_info*> terms;
    for (const auto& h : r.holder_list) terms.push_back(&h);
    std::sort(terms.begin(), terms.end(),
              [](const auto* a, const auto* b) { return a->acquire_ok < b->acquire_ok; });
    for (std::size_t i = 1; i < terms.size(); ++i)
        if (terms[i]->token <= terms[i - 1]->token) return false;
    return true;
}

// The proclaim a worker made in term `epoch` (lock_worker logs
// proclaim_ok or proclaim_failed, with the error): the event's line, or ""
// when it made none.
inline std::string proclaim_of(const fleet& f, std::size_t worker, std::uint64_t epoch) {
    std::ifstream in(f.log_file(worker));
    const std::string token = ",\"token\":" + std::to_string(epoch) + ",";
    for (std::string line; std::getline(in, line);)
        if (line.find("\"ev\":\"proclaim_") != std::string::npos &&
            line.find(token) != std::string::npos)
            return line;
    return {};
}

// A leader stopped (SIGSTOP) inside its term, left so past its lease (and
// the server's expiry slack), resumed once the next leader has written: its
// term was lost before the next began, it hears so on resuming, its
// proclaim is refused and its late write is fenced off by the epoch.
inline void leader_paused(const target& t) {
    const auto seed = fault_seed((t.backend + " election leader paused").c_str());
    fleet f(t.resource, election_fleet(t, "elect-paused"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 200ms, 600ms));  // pacing: let some terms run
    const auto [index, pid, paused_at, resumed_at] = pause_past_lease(f, expiry_slack(t) + 1000ms);
    f.finish();

    const auto r = f.check(f.counted());
    INFO(r.report());
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto* held = holder_at(r, pid, paused_at);
    REQUIRE(held);
    CHECK(held->window_end < resumed_at);
    CHECK(held->lost >= resumed_at);
    const auto* successor = first_acquire_after(r, paused_at, pid);
    REQUIRE(successor);
    CHECK(successor->token > held->token);
    // Its term ended (the safe window) before the next one began.
    CHECK(held->window_end <= successor->acquire_ok);
    // On resuming it did not act as leader: its proclaim was refused...
    const auto proclaim = proclaim_of(f, index, held->token);
    INFO("the paused leader's proclaim: " << proclaim);
    CHECK(proclaim.find("\"ev\":\"proclaim_failed\"") != std::string::npos);
    // ...and its late write was fenced off by the next leader's epoch.
    INFO("the late write: " << held->write_outcome << " " << held->write_error);
    CHECK(held->write_outcome == "rejected");
    std::cout << t.backend << " election pause: next leader "
              << ms_of(successor->acquire_ok - paused_at) << " ms after the pause (lease "
              << f.options().lease.count() << " ms)" << std::endl;
}

// A leader killed with kill -9: the next candidate leads once the dead
// term could have ended on the server (its lease's end; on PostgreSQL the
// kill itself, which ends the session), not before, and (loosely) about
// then: woken by the term's end, not by the end of its own wait (5 s).
inline void leader_killed(const target& t) {
    const auto seed = fault_seed((t.backend + " election leader killed").c_str());
    fleet f(t.resource, election_fleet(t, "elect-killed"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 200ms, 600ms));
    const auto victim = f.worker_in_section(5s);
    REQUIRE(victim);
    const long long pid = f.worker(*victim).pid();
    const long long killed_at = mono_ns();
    f.kill9(*victim);
    f.finish();

    // PostgreSQL's term ends with its leader's connection, at the kill.
    auto opts = f.counted();
    opts.kill_ends_window = t.lock && t.lock->frees_on_disconnect();
    const auto r = f.check(opts);
    INFO(r.report());
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto* dead = holder_at(r, pid, killed_at);
    REQUIRE(dead);
    const auto* successor = first_acquire_after(r, killed_at, pid);
    REQUIRE(successor);
    CHECK(successor->token > dead->token);
    // Not before the dead leader's term could have ended on the server...
    CHECK(successor->acquire_ok >= dead->window_end);
    // ...and, loosely, about then: the lease, the server's slack, and a
    // lease more for a loaded machine (under the candidates' 5 s wait).
    const double after_ms = ms_of(successor->acquire_ok - killed_at);
    const auto lease = f.options().lease;
    std::cout << t.backend << " election kill -9: next leader " << after_ms
              << " ms after the kill (lease " << lease.count() << " ms)" << std::endl;
    CHECK(after_ms <= static_cast<double>((2 * lease + expiry_slack(t)).count()));
}

// The server restarted while a leader leads and the others campaign
// (Redis with its append-only file; etcd's member keeps its data dir;
// ZooKeeper's server its snapshot and log): no candidate hangs, epochs go
// on rising, and leaders follow after it.
inline void server_restarted(const target& t) {
    const auto seed = fault_seed((t.backend + " election restart").c_str());
    fleet f(t.resource, election_fleet(t, "elect-restart"), seed);
    f.start();
    std::this_thread::sleep_for(draw(f.rng(), 500ms, 1000ms));
    const auto held = f.worker_in_section(5s);
    REQUIRE(held);
    const long long up_at = t.lock ? restart_server(f, *t.lock) : restart_server(f, t.resource);
    f.finish();

    const auto r = f.check(f.counted());
    INFO(r.report());
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto after = acquired_after(r, up_at);
    const auto* first = first_acquire_after(r, up_at);
    std::cout << t.backend << " election restart: " << r.holders << " terms, " << after.size()
              << " workers led after the restart"
              << (first ? ", the first " + std::to_string(ms_of(first->acquire_ok - up_at)) +
                              " ms after it answered again"
                        : std::string())
              << std::endl;
    CHECK(after.size() >= 2);
}

// A leader cut off from the election's server by a blackholing fault proxy
// (raw bytes: any protocol, support/fault_proxy.hpp) for longer than its
// lease and the server's slack: it is told lost during the partition,
// before the next leader's term, which begins during the partition with a
// higher epoch. Its terms outlast the lease (renewed through the proxy), so
// that the cut finds it leading when its lease runs out. For a backend
// behind a lock_server; Redis's partitioned leader is in
// network_faults_test.cpp (its proxy reads RESP, and checks the reconnect).
inline void leader_partitioned(const target& t) {
    REQUIRE(t.lock);
    REQUIRE(t.lock->proxy_unsupported().empty());
    const auto seed = fault_seed((t.backend + " election leader partitioned").c_str());
    fault_proxy proxy(t.lock->port(), "127.0.0.1", fault_proxy::framing::raw);
    auto o = election_fleet(t, "elect-partition");
    o.workers = 3;
    o.hold = 2400ms;
    // Long enough for worker 0's turn to come (every third term), the cut,
    // and the next term during it.
    o.duration = t.duration + 6000ms;
    // Worker 0 campaigns through the proxy, the others directly.
    o.urls = {t.lock->url_via(proxy.port()), t.lock->url(), t.lock->url()};
    fleet f(t.resource, o, seed);
    f.start();
    const auto victim = f.worker_in_section(15s, {1, 2});
    REQUIRE(victim == std::size_t{0});
    const long long pid = f.worker(0).pid();
    const long long cut_at = mono_ns();
    proxy.blackhole(true);
    std::this_thread::sleep_for(o.lease + expiry_slack(t) + 1500ms);
    const long long healed_at = mono_ns();
    proxy.heal();
    f.finish();

    const auto r = f.check(f.counted());
    INFO(r.report());
    INFO("the partitioned leader's history:\n" << f.history_of(0));
    CHECK(r.ok());
    CHECK(epochs_rise(r));
    const auto* held = holder_at(r, pid, cut_at);
    REQUIRE(held);
    REQUIRE(held->lost >= 0);  // until_lost() fired
    CHECK(held->lost > cut_at);
    CHECK(held->lost < healed_at);
    const auto* next = first_acquire_after(r, cut_at, pid);
    REQUIRE(next);
    CHECK(next->token > held->token);
    CHECK(next->acquire_ok < healed_at);  // the next term began during the partition
    CHECK(held->window_end <= next->acquire_ok);
    // The worker logs the lost signal when its coroutine resumes: a busy
    // machine delays the log, not the signal (the checker's slack).
    CHECK(held->lost <= next->acquire_ok + history::check_options{}.observe_slack_ns);
    std::cout << t.backend << " election partition: lost " << ms_of(held->lost - cut_at)
              << " ms after the cut; next leader " << ms_of(next->acquire_ok - cut_at)
              << " ms after it (lease " << o.lease.count() << " ms)" << std::endl;
}

// An observer of the election in this process, no candidate: a backend of
// its own on a thread of its own, calling async_observe again and again and
// keeping each report in order (a leader's epoch, 0 for none). A failed call
// (its server killed under it) is counted, and the next made 50 ms later.
// It only records: the test's thread asserts (Catch is not thread-safe).
class election_observer {
public:
    election_observer(std::string url, std::string name, std::chrono::milliseconds limit = 180s)
        : thread_([this, url = std::move(url), name = std::move(name), limit] {
              run(url, name, limit);
          }) {}
    ~election_observer() { stop(); }
    election_observer(const election_observer&) = delete;
    election_observer& operator=(const election_observer&) = delete;

    // Ends the observe in flight (terminal cancellation) and the thread.
    void stop() {
        if (!thread_.joinable()) return;
        stopping_ = true;
        boost::asio::post(ioc_, [this] { cancel_.emit(boost::asio::cancellation_type::terminal); });
        thread_.join();
    }
    std::vector<std::uint64_t> epochs() const {
        std::lock_guard lock(mutex_);
        return epochs_;
    }
    std::uint64_t highest() const {
        std::lock_guard lock(mutex_);
        return epochs_.empty() ? 0 : *std::max_element(epochs_.begin(), epochs_.end());
    }
    // The failed calls, and the last one's error.
    std::pair<int, std::string> failures() const {
        std::lock_guard lock(mutex_);
        return {failures_, last_failure_};
    }

private:
    void run(const std::string& url, const std::string& name, std::chrono::milliseconds limit) {
        try {
            corolock::backend b(ioc_.get_executor(), url);
            corolock::election e(b, name);
            bool done = false;
            boost::asio::co_spawn(
                ioc_, follow(e),
                boost::asio::bind_cancellation_slot(cancel_.slot(),
                                                    [&done](std::exception_ptr) { done = true; }));
            const auto deadline = std::chrono::steady_clock::now() + limit;
            while (!done && std::chrono::steady_clock::now() < deadline)
                if (ioc_.run_one_until(deadline) == 0 && ioc_.stopped()) break;
            b.stop();
        } catch (const std::exception& x) {
            failed(x.what());
        }
    }
    boost::asio::awaitable<void> follow(corolock::election& e) {
        for (int i = 0; i < 100'000 && !stopping_; ++i) {
            auto [ec, state] = co_await e.async_observe(use_nothrow);
            if (stopping_) break;
            if (ec) {
                failed(ec.message());
                co_await sleep_for(50ms);
                continue;
            }
            std::lock_guard lock(mutex_);
            epochs_.push_back(state ? state->epoch : 0);
        }
    }
    void failed(const std::string& why) {
        std::lock_guard lock(mutex_);
        ++failures_;
        last_failure_ = why;
    }

    boost::asio::io_context ioc_;
    boost::asio::cancellation_signal cancel_;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;
    std::vector<std::uint64_t> epochs_;
    int failures_ = 0;
    std::string last_failure_;
    std::thread thread_;  // last: it starts once the members above exist
};

// Which server the failover scenario kills.
enum class failover_victim {
    server_leader,   // the deployment's own leader (etcd's Raft leader, ZooKeeper's leader)
    leaders_member,  // a follower the leading worker is connected to
};

// The highest epoch won at or before t (mono ns), from the workers' logs.
inline std::uint64_t epoch_won_by(const fleet& f, long long t) {
    std::uint64_t highest = 0;
    for (const auto& e : f.events())
        if (e.ev == "acquire_ok" && e.t <= t) highest = std::max(highest, e.token);
    return highest;
}

// The moment to kill at: a worker leading (inside its term's section) while
// another campaigns (worker_in_section_with_waiter), the server to kill
// then, and the servers the leading worker is connected to (as /proc sees
// its sockets). For failover_victim::server_leader, a leading worker
// connected to the deployment's leader is preferred for 3 s (its own
// connections then die with the leader), any leading worker after that (a
// ZooKeeper client picks its server at random). For
// failover_victim::leaders_member, a leading worker connected to a server
// other than the deployment's leader, and that server; looked for again
// while the leader talks to the deployment's leader only, bounded.
struct failover_moment {
    std::size_t leading = 0;  // the worker
    std::size_t killed = 0;   // the server
    std::vector<std::size_t> talks_to;
};
template <class Servers>
std::optional<failover_moment> kill_moment(fleet& f, const Servers& servers,
                                           std::size_t server_leader, failover_victim which) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    const auto prefer_until = std::chrono::steady_clock::now() + 3s;
    for (int attempt = 0; attempt < 1000; ++attempt) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left <= 0ms) break;
        const auto w = worker_in_section_with_waiter(f, left);
        if (!w) break;
        const auto ports = loopback_peer_ports(static_cast<pid_t>(f.worker(*w).pid()));
        failover_moment m{.leading = *w, .killed = server_leader, .talks_to = {}};
        for (std::size_t s = 0; s < servers.size(); ++s)
            if (ports.count(servers.client_port(s))) m.talks_to.push_back(s);
        if (which == failover_victim::server_leader) {
            const bool on_leader = std::find(m.talks_to.begin(), m.talks_to.end(),
                                             server_leader) != m.talks_to.end();
            if (on_leader || std::chrono::steady_clock::now() >= prefer_until) return m;
        }
        for (const auto s : m.talks_to)
            if (which == failover_victim::leaders_member && s != server_leader) {
                m.killed = s;
                return m;
            }
        std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
}

// A server of a three-member deployment (Servers: etcd_cluster, zk_ensemble)
// killed with SIGKILL while a worker leads and others campaign, an observer
// following: the deployment's leader, or the member the leading worker is
// connected to (failover_victim). Across the failover: at most one leader
// in the safe window, epochs rising in the order terms were won (none
// reused), the observer never going back and following past it, a leader
// again after it, every worker exiting cleanly. The leading worker may lose
// its term (its lease ran out while its requests failed over): the checker
// holds it to the lost signal's rules.
template <class Servers>
void server_killed(const target& t, Servers& servers, failover_victim which) {
    REQUIRE_FALSE(t.urls.empty());
    const std::string what = which == failover_victim::server_leader
                                 ? "server leader killed"
                                 : "the leading worker's server killed";
    const auto seed = fault_seed((t.backend + " election " + what).c_str());
    std::vector<std::unique_ptr<fleet>> fleets;
    fleets.push_back(
        std::make_unique<fleet>(t.resource, election_fleet(t, "elect-failover"), seed));
    fleet& f = *fleets.front();
    election_observer observer(t.urls.back(), f.options().name);
    f.start();
    // Terms pass from worker to worker: three won before the fault.
    const bool cycling = wait_for_grants(fleets, 3, 0, 30s);
    REQUIRE(cycling);
    // The deployment's leader, known before the moment comes (the query
    // takes a while; a term's section lasts 100 to 200 ms).
    const std::size_t server_leader = servers.leader();
    const auto moment = kill_moment(f, servers, server_leader, which);
    REQUIRE(moment);
    const auto [leading, killed, talks_to] = *moment;
    const long long leading_pid = f.worker(leading).pid();
    const long long killed_at = mono_ns();
    servers.kill9(killed);
    const std::size_t new_leader = servers.leader();  // bounded by the deployment's start timeout
    CHECK(new_leader != killed);

    // A leader again after the failover (bounded; it gives up once every
    // worker has ended), and the observer past it: a term won after the
    // kill reported.
    const bool led_again = wait_for_grants(fleets, 1, killed_at, 60s);
    CHECK(led_again);
    const std::uint64_t epoch_at_kill = epoch_won_by(f, killed_at);
    const bool followed = wait_until([&] { return observer.highest() > epoch_at_kill; }, 30s, 20ms);
    const long cycles = f.finish();  // every worker exits 0
    observer.stop();

    const auto events = f.events();
    const auto r = f.check(f.counted());
    INFO(r.report());
    CHECK(r.ok());
    CHECK(most_at_once(r) <= 1);
    CHECK(epochs_rise(r));
    // The kill came with a term held and a candidate campaigning.
    const auto around = look_around(events, r, killed_at);
    CHECK(around.holding >= 1);
    CHECK(around.waiting >= 1);
    const auto* held = holder_at(r, leading_pid, killed_at);
    REQUIRE(held);
    const auto* next = first_acquire_after(r, killed_at, leading_pid);
    REQUIRE(next);
    CHECK(next->token > held->token);
    CHECK(next->acquire_ok >= held->window_end);

    const auto seen = observer.epochs();
    const auto [failed, why] = observer.failures();
    INFO("the observer: " << seen.size() << " reports, " << failed << " failed calls (last: "
                          << why << "), highest epoch " << observer.highest()
                          << ", the epoch at the kill " << epoch_at_kill);
    CHECK(followed);
    std::uint64_t before = 0;
    for (const auto epoch : seen) {
        if (epoch == 0) continue;  // "no leader" between terms
        CHECK(epoch >= before);
        before = epoch;
    }
    std::string talked;
    for (const auto s : talks_to) talked += (talked.empty() ? "" : ",") + std::to_string(s);
    std::cout << t.backend << " election, " << what << ": server " << killed << " killed (leader "
              << server_leader << "; the leading worker talked to " << (talked.empty() ? "-" : talked)
              << "), server " << new_leader << " leads; next term "
              << ms_of(next->acquire_ok - killed_at) << " ms after the kill; " << r.holders
              << " terms (" << around.grants_after << " after the kill), " << cycles
              << " cycles; the leading worker's term "
              << (held->lost >= 0 ? "lost " + std::to_string(ms_of(held->lost - killed_at)) +
                                        " ms after the kill"
                                  : std::string("kept"))
              << "; the observer: " << seen.size() << " reports, " << failed
              << " failed calls (lease " << t.lease.count() << " ms)" << std::endl;
}

}  // namespace corolock::test::fault::election_scenarios
