// The PostgreSQL backend: corolock's mutex as a session-level advisory lock,
// one session (connection) per tenure, with the session's
// idle_session_timeout as the lease (pg/protocol.hpp has the SQL,
// docs/postgresql.md the design and its measurements).
//
//  - acquire: a session from the backend's pool (or a new one), then one
//    statement that takes the lock and mints the fence; a waiting acquire
//    waits in the server's lock queue (pg_advisory_lock under lock_timeout),
//    never by polling. A grant that comes late (after a quarter of the
//    lease) is confirmed by a renewal before it is handed out, so the
//    deadline never starts from a send time long past.
//  - re-entry: a fence bump on the tenure's session (also a renewal).
//  - watchdog: a statement on the session every renew interval; the lease
//    deadline (send time of the last answered statement + lease - drift) is
//    watched by a timer of its own. A session that breaks (the server ended
//    it: idle timeout, pg_terminate_backend, restart) loses its tenure at
//    once.
//  - release: pg_advisory_unlock; the session goes back to the pool. A lost
//    tenure's release asks pg_locks who holds the lock now.
//  - cancellation: a cancelled waiting acquire cancels its statement with
//    pg_cancel_backend from another session (a background job, so drain()
//    waits for it); a grant that still came is released.
#pragma once

#include "core/background_work.hpp"
#include "core/backend.hpp"
#include "core/metrics_recorder.hpp"

#include <corolock/backend.hpp>
#include "pg/connection.hpp"
#include "pg/pg_elections.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace corolock::detail::pg {

struct pg_lock_state final : lock_state {
    pg_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name);

    // --- strand only: the live tenure's session ---
    std::shared_ptr<connection> session;
    // The session's idle_session_timeout: the lease its renewals extend.
    std::chrono::steady_clock::duration session_lease{};
    // The tenure's newest fence (its grant's or last re-entry's): what the
    // name's row holds while the tenure lasts.
    std::uint64_t fence = 0;
    std::unique_ptr<boost::asio::steady_timer> renew_timer, deadline_timer;
};

struct backend_options {
    std::shared_ptr<const url_parts> url;
    std::string holder_label;
    std::chrono::milliseconds connect_timeout{5'000};
    std::chrono::milliseconds request_timeout{5'000};  // a statement that does not wait
    std::size_t max_idle_sessions = 8;                 // kept for reuse
};

// Parses postgresql://... or postgres://... (libpq's URI syntax, checked by
// libpq without connecting). On failure error::invalid_url and the reason,
// without the password, in why.
error_code parse_url(std::string_view url, backend_options& out, std::string& why);

class pg_backend final : public lock_backend, public std::enable_shared_from_this<pg_backend> {
public:
    pg_backend(boost::asio::any_io_executor ex, backend_options opts,
               const backend_config& settings = {});
    ~pg_backend() override;

    boost::asio::any_io_executor get_executor() const noexcept override { return executor_; }
    const strand_type& strand() const noexcept override { return strand_; }
    bool stopped() const noexcept override { return stopped_.load(std::memory_order_acquire); }
    spdlog::logger& log() const noexcept override { return *logger_; }
    observer* event_observer() const noexcept override { return observer_.get(); }
    void stop() noexcept override;
    std::string_view scheme() const noexcept override { return "postgresql"; }
    metrics_snapshot metrics() const noexcept override { return metrics_.snapshot(); }

    using lock_backend::make_state;
    std::shared_ptr<lock_state> make_state(std::string name, const lock_spec& spec) override;
    // The advisory key (pg/protocol.hpp): two names may share one.
    std::string exclusion_key(std::string_view name) const override;
    void acquire(const std::shared_ptr<lock_state>& st, const lock_options& opts,
                 const acquire_request& req, bool try_once, acquire_handler handler,
                 bool direct) override;
    void release(const std::shared_ptr<lock_state>& st, std::uint64_t level,
                 std::shared_ptr<const tenure> t, release_handler handler, bool direct) override;
    void release_in_background(const std::shared_ptr<lock_state>& st,
                               std::uint64_t level) override;
    void drain(clock::duration bound, release_handler handler, bool direct) override;
    // The admin seam: pg_admin.cpp, a connection of its own per call.
    void admin_status(std::string name, status_handler handler) override;
    void admin_list(lock_list_options options, list_handler handler) override;
    void admin_break(std::string name, status_handler handler) override;
    void admin_release_owner(std::string name, std::string owner,
                             release_handler handler) override;
    void execute_locked(const std::shared_ptr<lock_state>& st, std::shared_ptr<tenure> t,
                        std::vector<sql_statement> statements, sql_handler handler,
                        bool direct) override;
    // Leader election: pg_elections.cpp. Waiters in pg_advisory_lock are
    // granted by the server's lock manager in the order they queued.
    election_service* elections() noexcept override { return &elections_; }
    bool mutex_serves_in_order() const noexcept override { return true; }
    // The election's proclaim: `statements` in one transaction on the
    // session of the live tenure of `name` held by `owner` at fence `epoch`,
    // as execute_locked runs a guard's (the same checks before and after);
    // error::lock_lost when this backend holds no such tenure.
    void execute_for_term(std::string name, std::string owner, std::uint64_t epoch,
                          std::vector<sql_statement> statements, sql_handler handler);

    // --- for the acquire operation, on the strand ---
    const backend_options& options() const noexcept { return opts_; }
    metrics_recorder& recorder() noexcept override { return metrics_; }
    background_work& work() noexcept { return *work_; }
    const std::string& holder_argument() const noexcept { return holder_argument_; }
    // A connected session that holds nothing: from the pool, or new.
    boost::asio::awaitable<std::shared_ptr<connection>> take_session(error_code& ec,
                                                                     std::string& why);
    // A session that holds nothing goes back to the pool (or is closed).
    void give_session(std::shared_ptr<connection> c);
    // Begins a tenure of `st` on `session` (or joins a re-entry to it).
    std::shared_ptr<tenure> on_granted(const std::shared_ptr<pg_lock_state>& st,
                                       std::shared_ptr<connection> session, std::uint64_t level,
                                       std::uint64_t fence, const lease_terms& terms,
                                       clock::time_point deadline);
    void lose_tenure(const std::shared_ptr<pg_lock_state>& st, const char* why);
    // Cancels the statement a session runs (pg_cancel_backend on another
    // session), counted as background work under `parent`.
    void cancel_in_background(int pid, const background_work::job& parent);
    // Unlocks and closes a session nobody will use again (a grant that came
    // after its acquire was given up), counted under `parent`.
    void give_back(std::shared_ptr<connection> c, std::string name,
                   const background_work::job& parent);

private:
    void end_tenure(const std::shared_ptr<pg_lock_state>& st) noexcept;
    void run_renewals(std::shared_ptr<pg_lock_state> st, std::uint64_t epoch);
    void arm_deadline(std::shared_ptr<pg_lock_state> st, std::uint64_t epoch);
    boost::asio::awaitable<void> release_live(std::shared_ptr<pg_lock_state> st,
                                              std::shared_ptr<connection> c, bool expired,
                                              release_handler h, bool direct,
                                              background_work::job job);
    struct sql_run;
    boost::asio::awaitable<void> run_locked(std::shared_ptr<sql_run> run);
    boost::asio::awaitable<error_code> transact(sql_run& run);
    boost::asio::awaitable<void> release_lost(std::shared_ptr<pg_lock_state> st,
                                              release_handler h, bool direct);

    boost::asio::any_io_executor executor_;
    strand_type strand_;
    backend_options opts_;
    std::string holder_argument_;
    std::shared_ptr<spdlog::logger> logger_;
    std::shared_ptr<observer> observer_;  // backend_config::observer
    metrics_recorder metrics_;
    std::shared_ptr<background_work> work_;
    std::atomic<bool> stopped_{false};
    bool table_ready_ = false;                            // strand only
    std::vector<std::shared_ptr<connection>> idle_;       // strand only
    std::map<std::uint64_t, std::weak_ptr<pg_lock_state>> holding_;  // strand only
    std::vector<std::weak_ptr<connection>> sessions_;     // every session made: for stop()
    pg_elections elections_{*this};
};

// A PostgreSQL backend for `url`, recording holder_label in the lock rows.
// Throws system_error (invalid_url).
std::shared_ptr<lock_backend> connect(boost::asio::any_io_executor ex, std::string_view url,
                                      const backend_config& settings);

}  // namespace corolock::detail::pg
