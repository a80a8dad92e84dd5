#include "support/replica_set.hpp"

#include "support/async_test.hpp"
#include "support/sys_util.hpp"

#include <stdexcept>
#include <string>
#include <string_view>

namespace corolock::test {

namespace {
// The number after "field:" in an INFO section, 0 when absent.
std::size_t info_number(const std::string& info, std::string_view field) {
    const std::string key = std::string(field) + ":";
    const auto at = info.find(key);
    if (at == std::string::npos) return 0;
    return std::stoul(info.substr(at + key.size()));
}

}  // namespace

replica_set::replica_set(std::size_t replicas, std::chrono::milliseconds sync_timeout) {
    redis_server_options po;
    // A replica's first sync otherwise waits 5 s for others to join it.
    po.extra_args = {"--repl-diskless-sync-delay", "0"};
    primary_ = std::make_unique<redis_server>(po);
    for (std::size_t i = 0; i < replicas; ++i) {
        redis_server_options o;
        o.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary_->port())};
        replicas_.push_back(std::make_unique<redis_server>(o));
    }
    if (!wait_until([&] { return online() >= replicas; }, sync_timeout, std::chrono::milliseconds(20)))
        throw std::runtime_error("replica_set: " + std::to_string(online()) + " of " +
                                 std::to_string(replicas) + " replicas online in time");
}

std::size_t replica_set::online() const {
    return count_of(primary_->cmd1({"INFO", "replication"}), "state=online");
}

std::size_t replica_set::blocked_clients() const {
    return info_number(primary_->cmd1({"INFO", "clients"}), "blocked_clients");
}

}  // namespace corolock::test
