// open_redlock (include/corolock/redlock.hpp): the RedLock backend over
// nodes the caller opened, its settings checked first.
#include <corolock/redlock.hpp>

#include "redlock/redlock_backend.hpp"

#include <boost/system/system_error.hpp>

#include <memory>
#include <string>
#include <utility>

namespace corolock {

namespace {

[[noreturn]] void refuse(const std::string& why) {
    throw boost::system::system_error(make_error_code(error::invalid_argument), why);
}

// One server or a Sentinel set: what a RedLock node may be.
bool redis_node(std::string_view scheme) {
    return scheme == "redis" || scheme == "rediss" || scheme == "redis+sentinel" ||
           scheme == "rediss+sentinel";
}

}  // namespace

backend open_redlock(backend::executor_type ex, std::vector<backend> nodes,
                     const redlock_settings& settings) {
    if (nodes.empty()) refuse("open_redlock: no nodes");
    if (settings.node_timeout.count() < 0) refuse("open_redlock: node_timeout is negative");
    for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!redis_node(nodes[i].scheme()))
            refuse("open_redlock: node " + std::to_string(i + 1) + " is a " +
                   std::string(nodes[i].scheme().empty() ? "moved-from" : nodes[i].scheme()) +
                   " backend; RedLock's nodes are independent Redis servers (one server or "
                   "a Sentinel set each)");
    detail::redlock_options opts;
    if (settings.node_timeout.count() > 0) opts.node_timeout = settings.node_timeout;
    return detail::backend_access::handle(
        std::make_shared<detail::redlock_backend>(std::move(ex), std::move(nodes), opts), true);
}

}  // namespace corolock
