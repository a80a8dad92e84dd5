// The ZooKeeper backend: corolock's mutex on ephemeral sequential nodes,
// the recipe Curator's InterProcessMutex made standard (lock_recipe.hpp),
// over one session per backend driven by the caller's executor
// (session.hpp). docs/backends.md compares it with the others.
//
//  - acquire: create  <lock dir>/_c_<attempt id>-lock-<seq>  (ephemeral,
//    sequential) in one transaction with an empty setData of the directory,
//    whose Stat comes back: a node alone in it owns at once; otherwise list
//    the directory: the lowest sequence owns. The directories are made on
//    first use (the ancestors once per backend, the lock's own as a
//    container node, again when a create finds it gone). A create whose
//    answer was lost is looked for by its attempt id once the session is
//    back, and used or deleted.
//  - wait: a data watch on the predecessor only; its deletion (or a
//    session event) makes the waiter list the directory again.
//  - fencing token: the node's creation zxid when it was alone at its
//    creation, or when the directory has not changed since the node was
//    made (lock_recipe.hpp, creation_is_token);
//    otherwise, and for a re-entry, the zxid of a write to the holder's own
//    node at the grant (a setData, which also proves the node is still
//    there). zxids are one counter for the whole ensemble.
//  - lease: the session. Its deadline is when the last request the session
//    got an answer to was sent, plus the negotiated timeout, minus the
//    drift allowance (session_clock.hpp); heartbeats keep it ahead, and a
//    timer per held lock fires the lost signal when it passes. With the
//    watchdog off, lock_options.lease also ends the tenure locally (the
//    node is deleted then). An expired session loses every tenure held in
//    it, and a new session is made.
//  - release: the tenure's last level deletes its node. A cancelled or
//    refused acquire deletes its node too (drain() waits for that).
#pragma once

#include "core/background_work.hpp"
#include "core/backoff.hpp"
#include "core/tenure_backend.hpp"

#include <corolock/backend.hpp>
#include "zk/session.hpp"
#include "zk/url.hpp"
#include "zk/zk_elections.hpp"

#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace corolock::detail::zk {

struct zk_lock_state final : tenure_state {
    zk_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name, std::string lock_dir);

    const std::string dir;  // the lock's directory

    // --- strand only: the live tenure's node ---
    std::string node;                 // its full path
    std::uint64_t attempts = 0;       // creates begun (names each attempt)
    std::uint64_t generation = 0;     // the session it was made in
    // With the watchdog off: the lease's own end (max() with it on).
    clock::time_point lease_end = clock::time_point::max();
    bool node_watched = false;  // a data watch is set on `node`
};

class zk_backend final : public tenure_backend {
public:
    zk_backend(boost::asio::any_io_executor ex, zk_options opts,
               const backend_config& settings = {});
    ~zk_backend() override;

    void start();
    std::shared_ptr<zk_backend> shared_from_this() {
        return std::static_pointer_cast<zk_backend>(tenure_backend::shared_from_this());
    }

    std::string_view scheme() const noexcept override { return "zk"; }

    using lock_backend::make_state;
    std::shared_ptr<lock_state> make_state(std::string name, const lock_spec& spec) override;
    void acquire(const std::shared_ptr<lock_state>& st, const lock_options& opts,
                 const acquire_request& req, bool try_once, acquire_handler handler,
                 bool direct) override;
    void release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                 std::shared_ptr<const tenure> t, release_handler handler, bool direct) override;
    // The admin seam: zk_admin.cpp, a session of its own per call.
    void admin_status(std::string name, status_handler handler) override;
    void admin_list(lock_list_options options, list_handler handler) override;
    void admin_break(std::string name, status_handler handler) override;
    void admin_release_owner(std::string name, std::string owner,
                             release_handler handler) override;
    // Leader election: zk_elections.cpp. The mutex's sequential nodes are
    // served in order, first come, first served.
    election_service* elections() noexcept override;
    bool mutex_serves_in_order() const noexcept override { return true; }

    // --- for the acquire operation, on the strand ---
    session& zk() noexcept { return *session_; }
    std::string holder_value() const;
    // How long a try waits for a session that is not connected.
    clock::duration connect_bound() const noexcept { return opts_.session_timeout; }
    // Waiters are told of session events (connected, expired) by a poke.
    std::uint64_t add_waiter(std::function<void()> poke);
    void remove_waiter(std::uint64_t id) noexcept;
    // A tenure of `st` was granted (or a re-entry joined it).
    std::shared_ptr<tenure> on_granted(const std::shared_ptr<zk_lock_state>& st,
                                       std::uint64_t level, const lease_terms& terms,
                                       clock::time_point decided_sent);
    // The tenure's deadline now: the session's, or the lease's own end.
    clock::time_point deadline_of(const zk_lock_state& st) const noexcept;
    // Deletes a node of session `generation` in the background (nothing
    // when that session is gone: its ephemeral nodes went with it).
    void delete_in_background(std::string path, std::uint64_t generation,
                              const background_work::job& parent = {});
    // The node attempt `attempt` of session `generation` may have made in
    // `dir` (its create's answer was lost and the acquire ended before it
    // found out): found by its attempt id and deleted in the background, as
    // Curator's protected mode does; looked for again at each reconnection
    // of that session while the directory cannot be read.
    void delete_attempt_in_background(std::string dir, std::string attempt,
                                      std::uint64_t generation,
                                      const background_work::job& parent = {});
    // Makes the directories above and of a lock (the lock's as a container;
    // the ones above once per backend, again once found gone).
    void make_dirs(const std::string& dir, std::function<void(int rc)> done);

private:
    // The base's hooks: the tenure's node deleted once it ends; its
    // deadline, the session's (read again each heartbeat interval) or the
    // lease's own end; waiters woken and the session closed by stop().
    void give_back(const std::shared_ptr<tenure_state>& st) override;
    clock::time_point deadline_now(const tenure_state& st) const noexcept override;
    clock::duration deadline_recheck() const noexcept override;
    const char* deadline_passed(const tenure_state& st, clock::time_point now) const override;
    void on_tenure_end(const std::shared_ptr<tenure_state>& st) noexcept override;
    void wake_for_stop() override;
    void stop_protocol() noexcept override;

    void on_session_event(session::event e);
    // Watches the live tenure's node: deleted by anyone else (corolock
    // break, or by hand), the tenure is lost at once, not at the release.
    void watch_node(const std::shared_ptr<zk_lock_state>& st);
    // A background clean-up's tries left and the pauses between them.
    struct retry {
        detail::backoff pauses;
        int left = 0;
    };
    static retry retry_pauses();
    void delete_attempt(std::string path, std::uint64_t generation, background_work::job job,
                        retry tries);
    void find_attempt_to_delete(std::string dir, std::string attempt, std::uint64_t generation,
                                background_work::job job, retry tries);
    // Takes one try from `tries`: the pause before it.
    static std::chrono::steady_clock::duration take_try(retry& tries);
    // Runs f on the strand after `wait`.
    void after_pause(std::chrono::steady_clock::duration wait, std::function<void()> f);

    zk_options opts_;
    std::string holder_argument_;
    std::shared_ptr<session> session_;
    // strand only
    std::map<std::uint64_t, std::function<void()>> waiters_;
    std::uint64_t next_waiter_ = 1;
    // Nodes (path -> session generation) whose delete went unanswered
    // through every try: deleted again at the next (re)connection.
    std::map<std::string, std::uint64_t> undeleted_;
    // Given-up attempts ((dir, attempt id) -> session generation) whose
    // directory could not be read through every try: looked for again at
    // the next (re)connection.
    std::map<std::pair<std::string, std::string>, std::uint64_t> unfound_;
    // The directories above every lock's were made (or found) once.
    bool ancestors_made_ = false;
    zk_elections elections_{*this, opts_.root};
};

// A started ZooKeeper backend for `url`. Throws system_error (invalid_url).
std::shared_ptr<lock_backend> connect(boost::asio::any_io_executor ex, std::string_view url,
                                      const backend_config& settings);

}  // namespace corolock::detail::zk
