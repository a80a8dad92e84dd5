#include "support/sentinel_fleet.hpp"
#include "support/sys_util.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace corolock::test {

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A field of a flattened name/value reply (SENTINEL MASTER), or "".
std::string field(const std::vector<std::string>& flat, std::string_view name) {
    for (std::size_t i = 0; i + 1 < flat.size(); i += 2)
        if (flat[i] == name) return flat[i + 1];
    return {};
}


}  // namespace

sentinel_fleet::sentinel_fleet(sentinel_fleet_options opts) : opts_(std::move(opts)) {
    const auto deadline = clock_type::now() + opts_.ready_timeout;
    // With TLS, the first server makes the CA and certificate all share
    // (the Sentinels one of their own when the servers' has other names).
    auto tls_options = [&] {
        redis_server_options o;
        if (!opts_.tls) return o;
        o.tls = true;
        if (!servers_.empty()) o.tls_files_from = servers_[0]->dir();
        o.extra_args = {"--tls-replication", "yes"};
        return o;
    };
    {
        auto o = tls_options();
        if (opts_.tls) o.tls_names = opts_.data_tls_names;
        servers_.push_back(std::make_unique<redis_server>(o));
    }
    const std::string primary_port = std::to_string(named_port(0));
    for (std::size_t i = 0; i < opts_.replicas; ++i) {
        auto o = tls_options();
        o.extra_args.insert(o.extra_args.end(), {"--replicaof", "127.0.0.1", primary_port});
        servers_.push_back(std::make_unique<redis_server>(o));
    }
    const std::string& name = opts_.service;
    for (std::size_t i = 0; i < opts_.sentinels; ++i) {
        auto o = tls_options();
        if (opts_.tls && !opts_.data_tls_names.empty()) o.tls_names = default_tls_names;
        o.sentinel_config = {
            "sentinel monitor " + name + " 127.0.0.1 " + primary_port + " " +
                std::to_string(opts_.quorum),
            "sentinel down-after-milliseconds " + name + " " +
                std::to_string(opts_.down_after.count()),
            "sentinel failover-timeout " + name + " " +
                std::to_string(opts_.failover_timeout.count()),
            "sentinel parallel-syncs " + name + " 1",
        };
        sentinels_.push_back(std::make_unique<redis_server>(o));
    }
    wait_ready(deadline);
}

sentinel_fleet::~sentinel_fleet() {
    // The Sentinels first: they would otherwise start failovers while the
    // servers go. redis_server's destructor stops its process by PID.
    sentinels_.clear();
    servers_.clear();
}

void sentinel_fleet::wait_ready(clock_type::time_point deadline) {
    std::string last = "not asked yet";
    for (;;) {
        try {
            bool ready = true;
            const auto info = servers_[0]->cmd1({"INFO", "replication"});
            if (count_of(info, "state=online") < opts_.replicas) {
                ready = false;
                last = "replicas not in sync: " + info;
            }
            for (std::size_t i = 0; ready && i < sentinels_.size(); ++i) {
                const auto m = sentinels_[i]->cmd({"SENTINEL", "MASTER", opts_.service});
                const auto replicas = field(m, "num-slaves");
                const auto others = field(m, "num-other-sentinels");
                if (replicas != std::to_string(opts_.replicas) ||
                    others != std::to_string(opts_.sentinels - 1)) {
                    ready = false;
                    last = "sentinel " + std::to_string(i) + " knows " + replicas +
                           " replicas and " + others + " other sentinels";
                }
            }
            if (ready) return;
        } catch (const std::exception& e) {
            last = e.what();
        }
        if (clock_type::now() >= deadline)
            throw std::runtime_error("sentinel_fleet: not ready within " +
                                     std::to_string(opts_.ready_timeout.count()) +
                                     " ms: " + last);
        std::this_thread::sleep_for(100ms);
    }
}

std::string sentinel_fleet::url() const { return url(opts_.service); }

std::string sentinel_fleet::url(const std::string& service) const {
    std::vector<std::size_t> all(sentinels_.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return url(service, all);
}

std::string sentinel_fleet::url(const std::string& service,
                                const std::vector<std::size_t>& which) const {
    std::string out = opts_.tls ? "rediss+sentinel://" : "redis+sentinel://";
    for (std::size_t k = 0; k < which.size(); ++k) {
        if (k > 0) out += ',';
        const auto& s = *sentinels_.at(which[k]);
        out += "127.0.0.1:";
        out += std::to_string(opts_.tls ? s.tls_port() : s.port());
    }
    return out + "/" + service;
}

int sentinel_fleet::primary_index(std::size_t asked) const {
    try {
        const auto addr =
            sentinels_.at(asked)->cmd({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", opts_.service});
        if (addr.size() != 2) return -1;
        for (std::size_t i = 0; i < servers_.size(); ++i)
            if (std::to_string(named_port(i)) == addr[1]) return static_cast<int>(i);
    } catch (const std::exception&) {
    }
    return -1;
}

std::uint16_t sentinel_fleet::named_port(std::size_t i) const {
    const auto& s = *servers_.at(i);
    return opts_.tls ? s.tls_port() : s.port();
}

std::size_t sentinel_fleet::wait_for_failover(std::size_t old_primary,
                                              std::chrono::milliseconds limit) {
    const auto deadline = clock_type::now() + limit;
    std::string last = "not asked yet";
    for (;;) {
        int agreed = -2;
        for (std::size_t i = 0; i < sentinels_.size(); ++i) {
            if (!sentinels_[i]->running()) continue;
            const int p = primary_index(i);
            agreed = (agreed == -2 || agreed == p) ? p : -1;
        }
        if (agreed >= 0 && static_cast<std::size_t>(agreed) != old_primary) {
            try {
                const auto role = servers_.at(static_cast<std::size_t>(agreed))->cmd({"ROLE"});
                if (!role.empty() && role[0] == "master") return static_cast<std::size_t>(agreed);
                last = "server " + std::to_string(agreed) + " says " +
                       (role.empty() ? std::string("nothing") : role[0]);
            } catch (const std::exception& e) {
                last = e.what();
            }
        } else {
            last = agreed == -1 ? "the sentinels disagree" : "no new primary named";
        }
        if (clock_type::now() >= deadline)
            throw std::runtime_error("sentinel_fleet: no failover within " +
                                     std::to_string(limit.count()) + " ms: " + last);
        std::this_thread::sleep_for(50ms);
    }
}

}  // namespace corolock::test
