// Operator tools for locks on ZooKeeper: whether the ensemble answers, one
// lock's state, the locks held, and breaking one. Behind `corolock run`'s
// first look and `corolock status`, `list` and `break` with a zk:// URL. Private to corolock's own layers (the CLI); the
// node layout is lock_recipe.hpp's.
//
// It opens a session of its own (session.hpp). The session's creation is
// the reachability check: the ensemble answered the handshake and
// committed the session (its creation and its close are the only writes;
// nothing under the lock's directory is touched). status() lists the
// lock's directory (the lowest contender holds the lock, the others wait in
// order) and reads the holder's node: its data is the holder record
// (core/holder_record.hpp), its mzxid the holder's latest fencing token
// (the creation zxid, or the zxid of the write at the grant or at a
// re-entry, whichever came last).
#pragma once

#include "core/listed_locks.hpp"
#include "zk/session.hpp"
#include "zk/url.hpp"

#include <corolock/admin.hpp>
#include <corolock/lock_holder.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace corolock::detail::zk {

struct admin_lock_status {
    bool held = false;
    std::string node;   // the holder's node, a child of the lock's directory
    std::string owner;  // the owner id in its name
    std::string value;  // its data as stored: the holder record
    // The value read as a holder record (since: the holder's own wall clock
    // at its grant; held_for: the reader's wall clock now minus since).
    std::optional<lock_holder> holder;
    std::int64_t czxid = 0;  // the node's creation
    std::int64_t mzxid = 0;  // its last write: the holder's latest fencing token
    std::vector<std::string> waiters;  // the other contenders' nodes, in line
};

// list()'s answer, by name.
using admin_lock_list = listed_locks<admin_lock_status>;

class admin {
public:
    // Every request, and the wait for a session, is bounded by
    // request_timeout.
    admin(boost::asio::any_io_executor ex, zk_options opts,
          std::chrono::milliseconds request_timeout);
    ~admin();
    admin(const admin&) = delete;
    admin& operator=(const admin&) = delete;

    // Opens the session: success once the ensemble has accepted it;
    // error::not_connected when it has not within the request timeout.
    boost::asio::awaitable<error_code> connect();
    // The lock's directory and its holder's node. Read-only. After connect().
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> status(std::string name);

    // The locks held now whose name matches options.pattern (a Redis glob,
    // core/glob_match.hpp): the lock directories under the root, then
    // status() of each, by name, within options.max_locks and max_time
    // (zero: lock_list_defaults; the SCAN bounds do not apply). Not one
    // consistent view: each lock is read when its turn comes. Read-only.
    boost::asio::awaitable<std::tuple<error_code, admin_lock_list>> list(lock_list_options options);
    // Deletes the holder's node as status() read it (the lowest contender;
    // a later holder's node is another node), so the next contender in line
    // takes the lock. The holder's backend is told at once by its watch of
    // the node (lost signal), but whatever it is doing then is no longer
    // protected: for holders known to be dead. Answers the status read,
    // held false when nothing was held or it was released meanwhile. With
    // `only_owner` not empty, only a node of that owner is deleted: else
    // error::not_owner (someone else holds it; untouched).
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> break_lock(
        std::string name, std::string only_owner = {});

    // The cause of the last failure, in words.
    const std::string& last_error() const noexcept { return why_; }
    // Closes the session. Idempotent; never throws.
    void stop() noexcept;

private:
    class request_bound;
    boost::asio::awaitable<std::tuple<error_code, admin_lock_status>> read_status(
        std::string name);
    boost::asio::awaitable<std::tuple<error_code, admin_lock_list>> read_list(
        lock_list_options options);

    session::strand_type strand_;
    zk_options opts_;
    std::chrono::milliseconds request_timeout_;
    std::shared_ptr<spdlog::logger> logger_;
    std::shared_ptr<session> session_;
    std::string why_;
};

}  // namespace corolock::detail::zk
