#include "support/cluster_fleet.hpp"

#include "support/child_process.hpp"

#include "redis/connection/client_impl.hpp"

#include <corolock/config.hpp>

#include <charconv>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace corolock::test {

namespace {

using namespace std::chrono_literals;

struct node_line {
    std::string id;
    std::uint16_t port = 0;
    bool primary = false;
    bool failed = false;
    std::string primary_id;  // of a replica
    std::vector<std::pair<int, int>> slots;
};

// CLUSTER NODES: "<id> <ip:port@cport[,host]> <flags> <primary> <ping> <pong>
// <epoch> <link> <slot or range>..."
std::vector<node_line> parse_nodes(const std::string& text) {
    std::vector<node_line> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        node_line n;
        std::string addr, flags, primary, ping, pong, epoch, link, slot;
        if (!(f >> n.id >> addr >> flags >> primary >> ping >> pong >> epoch >> link)) continue;
        const auto colon = addr.rfind(':');
        const auto at = addr.find('@');
        if (colon == std::string::npos || at == std::string::npos || at < colon) continue;
        const std::string_view port(addr.data() + colon + 1, at - colon - 1);
        std::from_chars(port.data(), port.data() + port.size(), n.port);
        n.primary = flags.find("master") != std::string::npos;
        n.failed = flags.find("fail") != std::string::npos && flags.find("fail?") == std::string::npos;
        n.primary_id = primary;
        while (f >> slot) {
            if (slot.front() == '[') continue;  // a migration in progress
            const auto dash = slot.find('-');
            int a = 0, b = 0;
            if (dash == std::string::npos) {
                a = b = std::stoi(slot);
            } else {
                a = std::stoi(slot.substr(0, dash));
                b = std::stoi(slot.substr(dash + 1));
            }
            n.slots.emplace_back(a, b);
        }
        out.push_back(std::move(n));
    }
    return out;
}

}  // namespace

cluster_fleet::cluster_fleet(cluster_fleet_options opts) : opts_(opts) {
    const int count = opts_.primaries * (1 + opts_.replicas_per_primary);
    for (int i = 0; i < count; ++i) {
        redis_server_options o;
        o.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", std::to_string(opts_.node_timeout.count()),
                        // A replica may be promoted however long it was cut off.
                        "--cluster-replica-validity-factor", "0"};
        if (opts_.tls) {
            o.tls = true;
            if (!nodes_.empty()) o.tls_files_from = nodes_[0]->dir();
            o.extra_args.insert(o.extra_args.end(),
                                {"--tls-cluster", "yes", "--tls-replication", "yes"});
        }
        nodes_.push_back(std::make_unique<redis_server>(o));
    }
    std::vector<std::string> argv{find_executable("redis-cli")};
    if (argv[0].empty()) throw std::runtime_error("redis-cli not found on PATH");
    // With tls-cluster the bus port follows the TLS port: the nodes must
    // meet by it.
    if (opts_.tls) argv.insert(argv.end(), {"--tls", "--cacert", ca_file()});
    argv.insert(argv.end(), {"--cluster", "create"});
    for (auto& n : nodes_)
        argv.push_back("127.0.0.1:" + std::to_string(opts_.tls ? n->tls_port() : n->port()));
    argv.insert(argv.end(), {"--cluster-replicas", std::to_string(opts_.replicas_per_primary),
                             "--cluster-yes"});
    child_process create(argv);
    const auto st = create.wait_for(opts_.ready_timeout);
    if (!st || child_process::exit_code(*st) != 0)
        throw std::runtime_error("redis-cli --cluster create failed:\n" + create.output() +
                                 nodes_.front()->log_tail(1500));
    if (!wait_ok(opts_.ready_timeout))
        throw std::runtime_error("the cluster did not reach cluster_state:ok in time:\n" +
                                 nodes_.front()->log_tail());
}

cluster_fleet::~cluster_fleet() {
    for (auto& n : nodes_) {
        try {
            n->stop();
        } catch (...) {
        }
    }
}

corolock::backend cluster_fleet::open_backend(boost::asio::any_io_executor ex) const {
    auto cfg = corolock::config::from_url(url());
    if (opts_.tls) cfg.tls.ca_file = ca_file();
    cfg.command_timeout = 2s;
    cfg.connect_timeout = 2s;
    cfg.reconnect_min = 20ms;
    cfg.reconnect_max = 200ms;
    auto impl = std::make_shared<detail::client_impl>(ex, std::move(cfg));
    impl->start();
    return corolock::detail::backend_access::handle(impl->lock_backend().shared(),
                                                     /*owning=*/true);
}

std::string cluster_fleet::url() const {
    std::string out = opts_.tls ? "rediss+cluster://" : "redis+cluster://";
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& n = *nodes_.at(i);
        out += i == 0 ? "127.0.0.1:" : ",127.0.0.1:";
        out += std::to_string(opts_.tls ? n.tls_port() : n.port());
    }
    return out;
}

redis_server* cluster_fleet::by_port(std::uint16_t port) {
    for (auto& n : nodes_)
        if (n->port() == port || (n->tls_port() != 0 && n->tls_port() == port)) return n.get();
    return nullptr;
}

redis_server* cluster_fleet::primary_of_slot(std::uint16_t slot) {
    for (auto& n : nodes_) {
        if (!n->running()) continue;
        try {
            for (const auto& l : parse_nodes(n->cmd1({"CLUSTER", "NODES"}))) {
                if (!l.primary || l.failed) continue;
                for (auto [a, b] : l.slots)
                    if (slot >= a && slot <= b) return by_port(l.port);
            }
            return nullptr;
        } catch (const std::exception&) {
            // Try the next node.
        }
    }
    return nullptr;
}

std::string cluster_fleet::node_id(redis_server& n) { return n.cmd1({"CLUSTER", "MYID"}); }

redis_server* cluster_fleet::replica_of(std::uint16_t primary_port) {
    auto* p = by_port(primary_port);
    if (p == nullptr) return nullptr;
    for (auto& n : nodes_) {
        if (!n->running() || n.get() == p) continue;
        try {
            for (const auto& l : parse_nodes(n->cmd1({"CLUSTER", "NODES"})))
                if (by_port(l.port) == n.get() && !l.primary) {
                    // This node is a replica: of whom?
                    for (const auto& m : parse_nodes(n->cmd1({"CLUSTER", "NODES"})))
                        if (m.id == l.primary_id && by_port(m.port) == p) return n.get();
                }
        } catch (const std::exception&) {
        }
    }
    return nullptr;
}

bool cluster_fleet::wait_ok(std::chrono::milliseconds limit, int slot) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        bool ok = true;
        int owner = -1;
        for (auto& n : nodes_) {
            if (!n->running()) continue;
            try {
                if (n->cmd1({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) {
                    ok = false;
                    break;
                }
                if (slot < 0) continue;
                int here = -1;
                for (const auto& l : parse_nodes(n->cmd1({"CLUSTER", "NODES"})))
                    if (l.primary && !l.failed)
                        for (auto [a, b] : l.slots)
                            if (slot >= a && slot <= b) here = l.port;
                if (here < 0 || (owner >= 0 && here != owner)) {
                    ok = false;
                    break;
                }
                owner = here;
            } catch (const std::exception&) {
                ok = false;
                break;
            }
        }
        if (ok) return true;
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

}  // namespace corolock::test
