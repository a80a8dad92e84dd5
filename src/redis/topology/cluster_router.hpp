// Redis Cluster below the lock layer: a cluster-mode client_impl (the
// "front", which the lock service, the watchdog and the acquire machinery
// use as they use a single server's client) hands every command to this
// router instead of a socket. The router sends it to the primary of its
// key's slot, over one client_impl per primary (opened lazily, sharing the
// front's strand), and handles MOVED, ASK, TRYAGAIN and CLUSTERDOWN within
// the command's deadline (slot_map.hpp decides). So a lock's state is bound
// to no node: each of its commands goes where its slot is served now, and
// the watchdog's renewals go out pipelined per node (one script per lock,
// never a multi-key script across slots).
#pragma once

#include "redis/connection/client_impl.hpp"
#include "redis/topology/slot_map.hpp"

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace corolock::detail::cluster {

// Counters of the cluster's redirections, any thread.
struct router_counters {
    std::atomic<std::uint64_t> moved{0}, ask{0}, tryagain{0}, clusterdown{0}, refreshes{0},
        reroutes{0};
};

// The key a command is routed by: KEYS[1] of EVAL/EVALSHA, the channel of a
// (un)subscribe or publish, the first argument of a keyed command. Empty for
// commands without a key (PING, CONFIG, CLUSTER, SCAN, ...). `payload` is
// the command's RESP bytes (an array of bulk strings).
std::string_view command_key(std::string_view payload) noexcept;

class cluster_router : public std::enable_shared_from_this<cluster_router> {
public:
    using clock = std::chrono::steady_clock;

    explicit cluster_router(client_impl& front);

    // On the strand: reads the slot map from the seeds.
    void start();
    // Stops every node's client; the commands in flight complete with
    // client_stopped. Idempotent.
    void stop() noexcept;
    // The execution context is going away: drop everything unrun.
    void abandon() noexcept;

    // client_impl::exec's two forms, on the strand.
    void exec(std::string payload, client_impl::exec_options opts, exec_handler handler);
    void exec(client_impl::exec_options opts, target_ptr target);

    const router_counters& counters() const noexcept { return counters_; }
    // The cluster has sharded pub/sub (Redis 7: it answered CLUSTER SHARDS);
    // false once a node knew only CLUSTER SLOTS (Redis 6). Any thread.
    bool sharded_pubsub() const noexcept { return sharded_.load(std::memory_order_relaxed); }
    // The map's primaries, for tests, logs and listings. Strand only.
    std::vector<node_address> primaries() const { return map_.primaries(); }
    // A client of one node, with the front's settings and strand; not
    // started. The router's own connections, and corolock list's per-node
    // SCANs, are made by it.
    std::shared_ptr<client_impl> make_node_client(const node_address& a) const;

private:
    class routed;
    class node_listener;
    struct node {
        std::shared_ptr<client_impl> client;
        std::shared_ptr<node_listener> listener;
    };

    void route(const std::shared_ptr<routed>& c);
    void send_to(const std::shared_ptr<routed>& c, const node_address& to, bool asking);
    void on_answer(const std::shared_ptr<routed>& c, error_code ec, reply r);
    void retry_later(const std::shared_ptr<routed>& c, clock::duration delay);
    node& node_for(const node_address& a);
    void retire_absent();

    // Re-reads the map (CLUSTER SHARDS, else CLUSTER SLOTS) from a connected
    // node, else the seeds in turn; again after a delay while a primary of
    // the map is unreachable or the read fails.
    void request_refresh();
    void refresh_from(std::size_t candidate, bool slots_fallback);
    void on_map(slot_map m);
    void refresh_failed();
    std::vector<node_address> refresh_candidates() const;
    // Fails the commands waiting for a first map whose time is up; with
    // `all`, every one of them.
    void expire_pending(bool all = false);

    void on_node_connected(const node_address& a);
    void on_node_disconnected(const node_address& a);
    void on_node_push(const reply& r);

    client_impl& front_;
    slot_map map_;
    bool have_map_ = false;
    std::map<std::string, node> nodes_;  // by "host:port"
    std::vector<std::shared_ptr<routed>> pending_;  // waiting for a first map
    bool refreshing_ = false;
    bool refresh_again_ = false;
    int refresh_failures_ = 0;
    // Why the last node asked for the map could not answer (a wrong
    // certificate, credentials...): what commands waiting for a first map
    // fail with, rather than a bare never_connected.
    error_code refresh_error_;
    std::string refresh_why_;
    // Whether every candidate of this refresh failed with never_connected
    // (config::fail_fast_when_refused: nothing listens at any of them).
    bool refresh_never_connected_ = true;
    std::vector<node_address> candidates_;
    boost::asio::steady_timer refresh_timer_;
    bool stopped_ = false;
    std::atomic<bool> sharded_{true};
    router_counters counters_;
};

}  // namespace corolock::detail::cluster
