// What corolock status, break and list share: running a service (a Redis
// client or Cluster backend, the etcd admin, ZooKeeper's or PostgreSQL's
// admin) for one command, and how a lock reads in JSON (inspect_common.cpp).
// Each command has a file of its own: status_command.cpp, break_command.cpp,
// list_command.cpp.
#pragma once

#include "cli.hpp"

#include "etcd/etcd_admin.hpp"

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/client.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace corolock::cli {

// A duration in seconds with milliseconds ("12.345"): list's one unit.
std::string seconds(std::chrono::milliseconds d);

// "1 level", "3 levels".
std::string plural_levels(std::int64_t n);

// Runs body(*service) on a single-threaded io_context, then stops the
// service (whose reconnect loop never runs out of work by itself). make()
// throwing is a bad configuration.
template <class Service, class Make>
int with_service(Make make, const std::function<boost::asio::awaitable<int>(Service&)>& body) {
    boost::asio::io_context ioc(1);
    std::unique_ptr<Service> svc;
    try {
        svc = make(ioc.get_executor());
    } catch (const std::exception& e) {
        report_error(std::string("bad configuration: ") + e.what());
        return exit_status::usage;
    }
    int status = exit_status::os_error;
    boost::asio::co_spawn(ioc, body(*svc), [&](std::exception_ptr e, int result) {
        status = e ? report_internal_error(e) : result;
        svc->stop();
        ioc.stop();
    });
    ioc.run();
    return status;
}

// Runs body(client) on a fresh client and returns its exit status. Every
// wait inside is bounded by the client's command timeout, so this returns
// within a few seconds whatever Redis does.
int with_client(const common_options& o,
                const std::function<boost::asio::awaitable<int>(client&)>& body);

// A Redis Cluster cannot be a client (one connection): status, break and
// list run on a backend from the same config instead, whose scripts go to
// the primary serving the lock's slot (list: SCAN on every primary). It has
// no connection of its own to PING first, so its first command is the
// reachability check: a NOPERM there reads as rejected credentials, and
// the last connection attempt's own text is not at hand (the error's is
// shown).
boost::asio::awaitable<error_code> first_check(client& c);
boost::asio::awaitable<error_code> first_check(backend&);
std::string cause_of(const client& c);
std::string cause_of(const backend&);
bool pinged(const client&);
bool pinged(const backend&);

// Runs body(client), or body(backend) for a Redis Cluster; as with_client.
template <class Body>
int with_redis(const common_options& o, const Body& body) {
    if (o.cfg.mode == topology::cluster)
        return with_service<backend>(
            [&](const boost::asio::any_io_executor& ex) {
                return std::make_unique<backend>(ex, tool_config(o));
            },
            body);
    return with_client(o, body);
}

// Runs body(admin) on a fresh single-threaded etcd admin; as with_client.
int with_etcd(const common_options& o,
              const std::function<boost::asio::awaitable<int>(detail::etcd::admin&)>& body);

// Runs body(admin) on ZooKeeper's or PostgreSQL's admin once it has its own
// session or connection; `doing` names the command in a failure's report.
int with_store(const common_options& o, const std::string& doing,
               const std::function<boost::asio::awaitable<int>(store_admin&)>& body);

// The JSON object of one lock on etcd, shared by status --json and list --json.
std::string etcd_status_json(std::string_view name, const detail::etcd::admin_lock_status& st);

// The JSON object of one lock on ZooKeeper or PostgreSQL, shared by status
// --json and list --json.
std::string store_status_json(std::string_view name, bool zk, const store_lock_status& st);

// The JSON object of one lock, shared by status --json and list --json.
std::string status_json(std::string_view name, const lock_status& st);

// When a name in lock-delay becomes free to take, by this host's clock
// (the server counts the delay down; this is for people to read).
std::chrono::system_clock::time_point delayed_until(const lock_status& st);

}  // namespace corolock::cli
