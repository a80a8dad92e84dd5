// One libpq connection driven by Asio on a strand: no thread of its own and
// no blocking call, except libpq's host-name resolution when the URL names a
// host rather than an address (docs/postgresql.md).
//
// libpq does the protocol; this shell only moves bytes when its socket is
// ready. Connecting is PQconnectStart + PQconnectPoll, each step waiting for
// the socket (re-registered at every step: libpq may replace it while it
// tries addresses). A statement is PQsendQueryParams, PQflush until sent,
// then PQgetResult once PQisBusy says the answer is complete. One reader
// coroutine per connection waits for the socket to be readable and calls
// PQconsumeInput, so a connection that the server ends while idle (an idle
// timeout, pg_terminate_backend, a restart) is seen at once and reported to
// on_lost. The socket is watched through a stream_descriptor that is
// release()d before libpq closes the descriptor it owns.
//
// Strand only. Statements on one connection run one at a time, in the order
// they were asked for.
#pragma once

#include "pg/protocol.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "core/inner_executor.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

struct pg_conn;
struct pg_result;

namespace corolock::detail::pg {

class connection : public std::enable_shared_from_this<connection> {
public:
    using clock = std::chrono::steady_clock;
    using executor_type = boost::asio::strand<inner_executor>;

    connection(executor_type ex, std::shared_ptr<const url_parts> url);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    // Connects within `timeout`; on failure the reason (scrubbed of the
    // password) in why.
    boost::asio::awaitable<error_code> connect(clock::duration timeout, std::string& why);
    // The connection held for a sequence of statements: the others wait
    // until it is dropped. Empty when the connection is gone.
    class turn {
    public:
        turn() = default;
        explicit turn(std::shared_ptr<connection> c) : c_(std::move(c)) {}
        turn(turn&& o) noexcept = default;
        turn& operator=(turn&&) = delete;
        ~turn() { if (c_) c_->free_turn(); }
        explicit operator bool() const noexcept { return c_ != nullptr; }

    private:
        std::shared_ptr<connection> c_;
    };
    // Waits for earlier statements and turns to end, then holds the connection.
    boost::asio::awaitable<turn> take_turn();

    // Runs one statement; waits for earlier ones first. A statement not
    // answered by `deadline` closes the connection (error::timeout).
    boost::asio::awaitable<answer> exec(statement s, clock::time_point deadline = clock::time_point::max());
    // The same, bounded by `bound` from when its turn comes (a statement
    // queued behind a caller's transaction).
    boost::asio::awaitable<answer> exec(statement s, clock::duration bound);
    // The same within a turn this caller holds.
    boost::asio::awaitable<answer> exec(const turn& held, statement s, clock::time_point deadline);

    // The session's transaction state after the last answer.
    enum class transaction_state { idle, open, failed, unknown };
    transaction_state transaction() const noexcept;

    // Called once when the connection breaks or is closed (not by close()).
    void on_lost(std::function<void()> f) { on_lost_ = std::move(f); }
    // Called (on the strand, never inside a statement's call) after input
    // that brought one or more NOTIFY messages of a channel this session
    // LISTENs to; without it they are dropped.
    void on_notify(std::function<void()> f) { on_notify_ = std::move(f); }
    bool usable() const noexcept;
    bool busy() const noexcept { return busy_ || waiting_ > 0; }
    int backend_pid() const noexcept { return pid_; }
    // Ends the connection: pending statements complete with `why`.
    void close(error_code why = error::connection_lost) noexcept;

private:
    boost::asio::awaitable<void> read_loop(std::weak_ptr<connection> weak);
    void broke(error_code why) noexcept;
    void poke() noexcept { wake_.cancel(); }
    void free_turn() noexcept;
    boost::asio::awaitable<answer> run(statement s, clock::time_point deadline);
    void read_result(::pg_result* r, bool describe, bool& first, answer& a);
    void reassign_socket();
    // Waits until the socket is ready for `type` (or failed): true; false
    // when `deadline` came first.
    boost::asio::awaitable<bool> wait_socket(boost::asio::posix::descriptor_base::wait_type type,
                                             clock::time_point deadline);
    answer collect();

    executor_type ex_;
    std::shared_ptr<const url_parts> url_;
    ::pg_conn* conn_ = nullptr;
    boost::asio::posix::stream_descriptor socket_;
    boost::asio::steady_timer wake_;   // a condition variable: input came, or it broke
    boost::asio::steady_timer turn_;   // a condition variable: the connection is free
    std::function<void()> on_lost_;
    std::function<void()> on_notify_;
    error_code broken_;  // set once: why the connection is gone
    bool busy_ = false;
    int waiting_ = 0;
    int pid_ = 0;
};

}  // namespace corolock::detail::pg
