// The conformance suite's servers, one factory per backend.
#include "support/lock_server.hpp"

#include "support/cluster_fleet.hpp"
#include "support/etcd_server.hpp"
#ifdef COROLOCK_HAVE_POSTGRESQL
#include "support/pg_server.hpp"
#include "pg/protocol.hpp"
#endif
#include "support/redis_server.hpp"
#include "support/sentinel_fleet.hpp"
#include "support/zk_server.hpp"

#include "etcd/codec.hpp"
#include "etcd/etcd_backend.hpp"
#include "redis/topology/slot_map.hpp"
#include "redis/lock/scripts.hpp"
#ifdef COROLOCK_HAVE_ZOOKEEPER
#include "zk/lock_recipe.hpp"
#include "zk/url.hpp"
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <utility>

namespace corolock::test {

namespace {

// One redis-server (redis_server.hpp), without TLS or credentials.
class redis_lock_server final : public lock_server {
public:
    std::string url() const override { return server_.url(); }
    std::string url_via(std::uint16_t port) const override {
        return "redis://127.0.0.1:" + std::to_string(port);
    }
    std::string scheme() const override { return "redis"; }
    std::uint16_t port() const override { return server_.port(); }
    pid_t pid() const override { return server_.pid(); }
    void kill9() override { server_.kill9(); }
    void pause() override { server_.pause(); }
    void resume() override { server_.resume(); }
    void restart() override { server_.restart(); }
    std::vector<std::string> owners(const std::string& name) const override {
        const auto key = detail::keys_for(name);
        auto owner = server_.cmd1({"HGET", std::string(key.lock()), "owner"});
        if (owner.empty()) return {};
        return {std::move(owner)};
    }

private:
    redis_server server_;
};

// One etcd member (etcd_server.hpp).
class etcd_lock_server final : public lock_server {
public:
    std::string url() const override { return "etcd://" + server_.endpoint(); }
    std::string url_via(std::uint16_t port) const override {
        return "etcd://127.0.0.1:" + std::to_string(port);
    }
    std::string scheme() const override { return "etcd"; }
    std::string lock_delay_refused() const override {
        return "an etcd lease cannot outlive its holder's revoke: docs/safety.md, \"Lock-delay\"";
    }
    std::uint16_t port() const override { return server_.client_port(0); }
    pid_t pid() const override { return server_.pid(0); }
    // etcd rounds a lease up to whole seconds, and its lessor looks for
    // expired leases every 500 ms.
    std::chrono::milliseconds expiry_slack() const override {
        return std::chrono::milliseconds(1'600);
    }
    void kill9() override { server_.kill9(0); }
    void pause() override { server_.pause(0); }
    void resume() override { server_.resume(0); }
    void restart() override {
        if (server_.running(0)) server_.stop(0);
        server_.restart(0);
    }
    std::string wire_marker(const std::string& name) const override {
        // The key's base64 (in the txn's JSON) begins with the base64 of its
        // first 3k bytes: the lock's prefix, cut to a multiple of three.
        auto prefix = detail::etcd::lock_prefix(detail::etcd::backend_options{}.prefix, name);
        prefix.resize(prefix.size() / 3 * 3);
        return detail::etcd::codec::base64_encode(prefix);
    }
    std::vector<std::string> owners(const std::string& name) const override {
        // The backend's default key prefix: the URLs above name none.
        const auto prefix = detail::etcd::lock_prefix(detail::etcd::backend_options{}.prefix, name);
        detail::etcd::range_request req;
        req.key = prefix;
        req.range_end = detail::etcd::prefix_end(prefix);
        req.keys_only = true;
        const auto answer = server_.post(0, "/v3/kv/range", detail::etcd::codec::encode_range(req));
        detail::etcd::range_result r;
        if (answer.status != 200 || detail::etcd::codec::decode_range(answer.body, r))
            throw std::runtime_error("etcd range of " + prefix + ": HTTP " +
                                     std::to_string(answer.status) + " " + answer.body);
        std::vector<std::string> out;
        for (const auto& kv : r.kvs) out.push_back(kv.key.substr(prefix.size()));
        return out;
    }

private:
    etcd_server server_;
};

#ifdef COROLOCK_HAVE_POSTGRESQL
// One PostgreSQL server (pg_server.hpp).
class pg_lock_server final : public lock_server {
public:
    std::string url() const override { return server_.url(); }
    std::string url_via(std::uint16_t port) const override { return server_.url_via(port); }
    std::string scheme() const override { return "postgresql"; }
    std::string lock_delay_refused() const override {
        return "a session lock ends with its session: docs/safety.md, \"Lock-delay\"";
    }
    std::uint16_t port() const override { return server_.port(); }
    pid_t pid() const override { return server_.pid(); }
    // The server's idle timer starts when it has answered the last
    // statement, a little after the client sent it.
    std::chrono::milliseconds expiry_slack() const override {
        return std::chrono::milliseconds(300);
    }
    bool frees_on_disconnect() const override { return true; }
    bool runs_locked_statements() const override { return true; }
    void kill9() override { server_.kill9(); }
    void pause() override { server_.pause(); }
    void resume() override { server_.resume(); }
    void restart() override { server_.restart(); }
    std::vector<std::string> owners(const std::string& name) const override {
        // Every session holding or waiting for the lock's advisory key, by
        // the owner id its application_name carries.
        const auto s = detail::pg::sessions_of(name, false);
        std::string sql(s.sql);
        for (std::size_t i = s.params.size(); i-- > 0;) {
            const auto marker = "$" + std::to_string(i + 1);
            for (auto at = sql.find(marker); at != std::string::npos; at = sql.find(marker, at))
                sql.replace(at, marker.size(), "'" + s.params[i].value_or("") + "'");
        }
        std::vector<std::string> out;
        for (const auto& row : server_.query(sql)) {
            if (row.empty() || !row[0]) continue;
            const std::string_view v(*row[0]);
            const auto prefix = detail::pg::application_prefix;
            out.emplace_back(v.substr(0, prefix.size()) == prefix ? v.substr(prefix.size()) : v);
        }
        return out;
    }

private:
    pg_server server_;
};
#endif

#ifdef COROLOCK_HAVE_ZOOKEEPER
// One standalone ZooKeeper server (zk_server.hpp). The lease of a lock is
// the session: the URLs ask for a one-second session, so that a killed or
// cut-off holder's lock is free about when a one-second lease's would be.
class zk_lock_server final : public lock_server {
public:
    std::string url() const override { return server_.url() + query; }
    std::string url_via(std::uint16_t port) const override {
        return "zk://127.0.0.1:" + std::to_string(port) + query;
    }
    std::string scheme() const override { return "zk"; }
    std::string lock_delay_refused() const override {
        return "an ephemeral node ends with its session: docs/safety.md, \"Lock-delay\"";
    }
    std::uint16_t port() const override { return server_.port(); }
    pid_t pid() const override { return server_.pid(0); }
    // The session ends on the server at a tick's granularity (200 ms here)
    // after its timeout, which the case's lease stands for.
    std::chrono::milliseconds expiry_slack() const override {
        return std::chrono::milliseconds(400);
    }
    void kill9() override { server_.kill9(0); }
    void pause() override { server_.pause(0); }
    void resume() override { server_.resume(0); }
    void restart() override { server_.restart(0); }
    std::vector<std::string> owners(const std::string& name) const override {
        const auto dir = detail::zk::lock_dir(detail::zk::zk_options{}.root, name) + "/";
        std::vector<std::string> out;
        for (const auto& path : server_.ephemerals())
            if (path.compare(0, dir.size(), dir) == 0)
                out.push_back(detail::zk::owner_of(path.substr(dir.size())));
        return out;
    }

private:
    static constexpr const char* query = "?session_timeout_ms=1000";
    zk_server server_;
};
#endif

// The fleets below are many processes and take seconds to start: one per
// process (the first case that asks starts it), shared by the cases, stopped
// by PID when the process exits (test/CMakeLists.txt runs those backends'
// cases in one process).
template <class Fleet>
std::shared_ptr<Fleet> shared_fleet() {
    static std::shared_ptr<Fleet> fleet;
    if (!fleet) fleet = std::make_shared<Fleet>();
    return fleet;
}

constexpr auto fleet_change_limit = std::chrono::milliseconds(30'000);

std::string fleet_no_proxy(const char* what) {
    std::string why = "the client learns its data nodes' addresses from ";
    why += what;
    why += ", not from the URL, so a proxy named in the URL does not carry the lock traffic";
    return why;
}

// A Redis Sentinel fleet (sentinel_fleet.hpp: a primary, two replicas,
// three Sentinels). "The server" is the current primary: kill9 kills it
// and waits until the Sentinels have promoted a replica; pause stops it
// (the Sentinels fail it over after down_after); restart starts every
// stopped data server again (an old primary comes back empty, and the
// Sentinels turn it into a replica) and waits until the service answers.
class sentinel_lock_server final : public lock_server {
public:
    std::string url() const override { return fleet_->url(); }
    std::string url_via(std::uint16_t) const override { return {}; }
    std::string proxy_unsupported() const override { return fleet_no_proxy("the Sentinels"); }
    std::string scheme() const override { return "redis+sentinel"; }
    std::string backend() const override { return "sentinel"; }
    std::uint16_t port() const override { return primary().port(); }
    pid_t pid() const override { return primary().pid(); }
    void kill9() override {
        const auto p = primary_index();
        fleet_->server(p).kill9();
        fleet_->wait_for_failover(p, fleet_change_limit);
    }
    void pause() override {
        paused_ = static_cast<int>(primary_index());
        fleet_->server(static_cast<std::size_t>(paused_)).pause();
    }
    void resume() override {
        if (paused_ >= 0) fleet_->server(static_cast<std::size_t>(paused_)).resume();
        paused_ = -1;
    }
    void restart() override {
        for (std::size_t i = 0; i < fleet_->servers(); ++i)
            if (!fleet_->server(i).running()) fleet_->server(i).restart();
        // Named by every Sentinel and saying it is the primary.
        fleet_->wait_for_failover(fleet_->servers(), fleet_change_limit);
    }
    std::vector<std::string> owners(const std::string& name) const override {
        const auto key = detail::keys_for(name);
        auto owner = primary().cmd1({"HGET", std::string(key.lock()), "owner"});
        if (owner.empty()) return {};
        return {std::move(owner)};
    }

private:
    std::size_t primary_index() const {
        for (std::size_t i = 0; i < fleet_->sentinels(); ++i) {
            if (!fleet_->sentinel(i).running()) continue;
            const int p = fleet_->primary_index(i);
            if (p >= 0) return static_cast<std::size_t>(p);
        }
        throw std::runtime_error("sentinel fleet: no Sentinel names a primary");
    }
    redis_server& primary() const { return fleet_->server(primary_index()); }

    std::shared_ptr<sentinel_fleet> fleet_ = shared_fleet<sentinel_fleet>();
    int paused_ = -1;
};

// A Redis Cluster (cluster_fleet.hpp: three primaries with a replica
// each). "The server" is the primary serving slot 0: kill9 kills it and
// waits until its replica serves the slot; pause stops it (its replica
// takes over after node_timeout); restart starts every stopped node again
// (it rejoins as a replica) and waits for cluster_state:ok.
class cluster_lock_server final : public lock_server {
public:
    std::string url() const override { return fleet_->url(); }
    std::string url_via(std::uint16_t) const override { return {}; }
    std::string proxy_unsupported() const override { return fleet_no_proxy("the slot map"); }
    std::string scheme() const override { return "redis+cluster"; }
    std::string backend() const override { return "cluster"; }
    std::uint16_t port() const override { return primary().port(); }
    pid_t pid() const override { return primary().pid(); }
    void kill9() override {
        auto* p = &primary();
        p->kill9();
        // The live nodes agree on slot 0 at once (the dead node is not yet
        // marked failed): wait for another node to serve it first.
        const auto deadline = std::chrono::steady_clock::now() + fleet_change_limit;
        for (;;) {
            auto* now = fleet_->primary_of_slot(0);
            if (now != nullptr && now != p && fleet_->wait_ok(fleet_change_limit, 0)) break;
            if (std::chrono::steady_clock::now() >= deadline)
                throw std::runtime_error("cluster fleet: slot 0 not failed over");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    void pause() override {
        paused_ = &primary();
        paused_->pause();
    }
    void resume() override {
        if (paused_ != nullptr) paused_->resume();
        paused_ = nullptr;
    }
    void restart() override {
        for (std::size_t i = 0; i < fleet_->size(); ++i)
            if (!fleet_->node(i).running()) fleet_->node(i).restart();
        if (!fleet_->wait_ok(fleet_change_limit, 0))
            throw std::runtime_error("cluster fleet: not ok after a restart");
    }
    std::vector<std::string> owners(const std::string& name) const override {
        const auto key = detail::keys_for(name);
        const auto slot = detail::cluster::key_slot(key.lock());
        auto* node = fleet_->primary_of_slot(slot);
        if (node == nullptr)
            throw std::runtime_error("cluster fleet: no primary serves slot " + std::to_string(slot));
        auto owner = node->cmd1({"HGET", std::string(key.lock()), "owner"});
        if (owner.empty()) return {};
        return {std::move(owner)};
    }

private:
    redis_server& primary() const {
        auto* p = fleet_->primary_of_slot(0);
        if (p == nullptr) throw std::runtime_error("cluster fleet: no primary serves slot 0");
        return *p;
    }

    std::shared_ptr<cluster_fleet> fleet_ = shared_fleet<cluster_fleet>();
    redis_server* paused_ = nullptr;
};

// RedLock over three redis-servers (redis_server.hpp), started for each
// case (they start in milliseconds), named by one redlock:// URL. "The
// server" is the first node: kill9, pause and restart act on it alone, a
// minority, which RedLock is built to ride out.
class redlock_lock_server final : public lock_server {
public:
    redlock_lock_server() {
        for (auto& n : nodes_) n = std::make_unique<redis_server>();
    }
    std::string url() const override {
        std::string out = "redlock://";
        for (const auto& n : nodes_)
            out += (&n == &nodes_.front() ? "" : ",") + std::string("127.0.0.1:") +
                   std::to_string(n->port());
        return out;
    }
    std::string url_via(std::uint16_t) const override { return {}; }
    std::string reentry_cannot_add_watchdog() const override {
        return "a RedLock re-entry joins its tenure without a round on the nodes, whose "
               "leases and watchdogs stay the first grant's (docs/redlock.md)";
    }
    std::string proxy_unsupported() const override {
        return "a RedLock holder talks to three independent servers, and a proxy in front of one "
               "cuts off or slows a minority, which RedLock is built to ride out "
               "(docs/redlock.md, \"Conformance\")";
    }
    std::string tokens_unfenced() const override {
        return "a RedLock token is the largest of its majority's node tokens, which need not rise "
               "from one holder to the next, and a re-entry joins the tenure with its token "
               "(docs/redlock.md, \"Tokens\")";
    }
    std::string ends_tenure_at_deadline() const override {
        return "a RedLock tenure whose majority can no longer be confirmed is lost and released "
               "on every node at once, so a later release has no server's view to report "
               "(docs/redlock.md, \"Releasing\")";
    }
    std::string scheme() const override { return "redlock"; }
    std::uint16_t port() const override { return nodes_.front()->port(); }
    pid_t pid() const override { return nodes_.front()->pid(); }
    void kill9() override { nodes_.front()->kill9(); }
    void pause() override { nodes_.front()->pause(); }
    void resume() override { nodes_.front()->resume(); }
    void restart() override { nodes_.front()->restart(); }
    // Every owner with the lock's hash on any running node.
    std::vector<std::string> owners(const std::string& name) const override {
        const auto key = detail::keys_for(name);
        std::vector<std::string> out;
        for (const auto& n : nodes_) {
            if (!n->running()) continue;
            auto owner = n->cmd1({"HGET", std::string(key.lock()), "owner"});
            if (!owner.empty() && std::find(out.begin(), out.end(), owner) == out.end())
                out.push_back(std::move(owner));
        }
        return out;
    }

private:
    std::array<std::unique_ptr<redis_server>, 3> nodes_;
};

// Adding a backend: write test/support/<name>_server.{hpp,cpp} (a real
// server on free loopback ports, stopped by PID), wrap it in a lock_server
// as the classes above do, and add a row to this table. Then list the name
// in the CMake cache variable COROLOCK_CONFORMANCE_BACKENDS (see
// test/CMakeLists.txt), which registers the suite once more under
// "conformance <name>: ".
const std::vector<std::pair<std::string, lock_server_factory>>& factories() {
    static const std::vector<std::pair<std::string, lock_server_factory>> table = {
        {"redis", [] { return std::unique_ptr<lock_server>(new redis_lock_server()); }},
        {"etcd", [] { return std::unique_ptr<lock_server>(new etcd_lock_server()); }},
#ifdef COROLOCK_HAVE_POSTGRESQL
        {"postgresql", [] { return std::unique_ptr<lock_server>(new pg_lock_server()); }},
#endif
#ifdef COROLOCK_HAVE_ZOOKEEPER
        {"zk", [] { return std::unique_ptr<lock_server>(new zk_lock_server()); }},
#endif
        {"sentinel", [] { return std::unique_ptr<lock_server>(new sentinel_lock_server()); }},
        {"cluster", [] { return std::unique_ptr<lock_server>(new cluster_lock_server()); }},
        {"redlock", [] { return std::unique_ptr<lock_server>(new redlock_lock_server()); }},
    };
    return table;
}

}  // namespace

std::string conformance_backend() {
    const char* b = std::getenv("COROLOCK_CONFORMANCE_BACKEND");
    return b && *b ? std::string(b) : std::string("redis");
}

std::vector<std::string> lock_server_backends() {
    std::vector<std::string> out;
    for (const auto& [name, make] : factories()) out.push_back(name);
    return out;
}

std::unique_ptr<lock_server> start_lock_server(std::string_view backend) {
    for (const auto& [name, make] : factories())
        if (name == backend) return make();
    std::string known;
    for (const auto& n : lock_server_backends()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("no lock server for backend '" + std::string(backend) +
                                "' (known: " + known + ")");
}

}  // namespace corolock::test
