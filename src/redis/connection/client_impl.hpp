// The client's shared implementation. Internal: corolock's own layers (the
// lock service, the watchdog) talk to it; users see corolock::client.
//
// Everything here runs on `strand()`. The connection is driven by one
// coroutine (run) that connects, performs the handshake, then races a reader,
// a write-failure watch and a health check until the connection fails, and
// starts over after a jittered backoff. Writes themselves are not a
// coroutine: flush() sends every queued command when the handler that queued
// it returns, and the reader flushes as it hands out replies. A separate
// coroutine expires timed-out commands, so commands queued while
// disconnected still complete on time.
#pragma once

#include <corolock/client.hpp>
#include "core/backoff.hpp"
#include "core/inner_executor.hpp"
#include "redis/lock/redis_backend.hpp"
#include "core/metrics_recorder.hpp"
#include "redis/connection/request_queue.hpp"
#include "redis/resp/resp3_parser.hpp"
#include "redis/topology/sentinel.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <memory>
#include <optional>
#include <vector>

namespace spdlog { class logger; }

namespace corolock::detail {

namespace cluster { class cluster_router; }

// Implemented by layers that keep per-connection state (subscriptions).
// Called on the client's strand.
class connection_listener {
public:
    virtual ~connection_listener() = default;
    // After each successful handshake, before any queued command is written:
    // the place to re-queue SUBSCRIBEs with request_queue priority.
    virtual void on_connected() = 0;
    virtual void on_disconnected() = 0;
    // An unsolicited RESP3 push (pub/sub message, invalidation, ...).
    virtual void on_push(const reply& r) = 0;
    // client::stop() was called: drop everything.
    virtual void on_stopped() = 0;
    // The execution context is being destroyed without stop() having run:
    // drop pending work without running it (see client_impl::abandon).
    virtual void on_abandoned() noexcept {}
};

class client_impl : public std::enable_shared_from_this<client_impl> {
public:
    using strand_type = boost::asio::strand<inner_executor>;
    using clock = std::chrono::steady_clock;

    struct exec_options {
        reply_kind kind = reply_kind::normal;
        bool idempotent = false;
        bool priority = false;
        // The handler is the lock layer's own and expects the strand: it is
        // invoked directly there when the command completes, without looking
        // up and dispatching to an associated executor (whose type-erased
        // copies cost several allocations per command).
        bool direct = false;
        // Zero means config.command_timeout.
        clock::duration timeout{};
    };

    // `strand`: the one to run on, shared with another client (a cluster's
    // node connections run on their front's); a new one when absent.
    client_impl(boost::asio::any_io_executor ex, config cfg,
                std::optional<strand_type> strand = std::nullopt);
    ~client_impl();

    void start();
    void stop() noexcept;
    // The execution context is being destroyed without having run stop()'s
    // work: drop (never invoke) queued handlers and the listeners, as Asio
    // does with its own pending handlers. They can own lock state that owns
    // this client, a cycle only this breaks. No thread runs the context now.
    void abandon() noexcept;

    // Queues RESP bytes for one command. Any thread; the handler's
    // cancellation slot is honoured as documented on client::async_exec.
    void exec(std::string payload, exec_options opts, exec_handler handler);
    // One command of the library's own reply target, which writes the
    // command itself when it goes out (reply_target::write_command) and is
    // called in place on the strand (as if opts.direct). On the strand only.
    void exec(exec_options opts, target_ptr target);

    const strand_type& strand() const noexcept { return strand_; }
    boost::asio::any_io_executor get_executor() const noexcept { return executor_; }
    const config& cfg() const noexcept { return cfg_; }
    // Unlock messages go by sharded pub/sub (SSUBSCRIBE, SPUBLISH, push
    // "smessage") on the lock's shard: on a cluster of Redis 7 or later.
    bool sharded_pubsub() const noexcept;
    // The acquire script's holder argument, formatted once (holder_argument).
    const std::string& holder() const noexcept { return holder_; }
    spdlog::logger& log() const noexcept { return *logger_; }
    bool connected() const noexcept { return connected_.load(std::memory_order_acquire); }
    bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }
    client_stats stats() const;
    // The lock layer's counters (strand writes), and their snapshot (any thread).
    metrics_recorder& metrics() noexcept { return metrics_; }
    metrics_snapshot read_metrics() const;
    observer* event_observer() const noexcept { return cfg_.observer.get(); }
    error_detail last_error() const;
    // Records a failure for last_error(). Any thread.
    void note_error(error_code code, std::string message);

    // On the strand only.
    void add_listener(std::weak_ptr<connection_listener> l);

    // A slot for the lock layer's per-client service, created on first use.
    // On the strand only.
    std::shared_ptr<void>& lock_service_slot() noexcept { return lock_service_; }

    // This client as the core's lock backend (see redis_backend.hpp).
    redis_backend& lock_backend() noexcept { return backend_; }

    // topology::cluster: this client has no connection of its own; its
    // commands go through the router to the node of their key's slot
    // (cluster/cluster_router.hpp), and its listeners hear every node's
    // connects and pushes. Null otherwise.
    const cluster::cluster_router* router() const noexcept { return router_.get(); }
    void on_node_connected();
    void on_node_push(const reply& r);

    // Commands fail at once because the last connection attempt failed for
    // a reason retrying cannot fix (see on_connect_failure).
    bool connect_unfixable() const noexcept { return fail_fast_ && last_connect_permanent_; }

private:
    using tcp = boost::asio::ip::tcp;
    // The background coroutines run on the strand, typed as such: boxing a
    // strand in an any_io_executor does not fit its small buffer, so every
    // operation's work tracking would otherwise cost a heap allocation.
    template <class T> using awaitable = boost::asio::awaitable<T, strand_type>;

    awaitable<void> run();
    awaitable<error_code> connect_once();
    // One attempt at one server: resolve, TCP, TLS, handshake.
    awaitable<error_code> connect_to(const endpoint& server);
    // topology::sentinel (src/redis/topology/sentinel_connect.cpp): asks the
    // Sentinels in order for the primary and connects to the first one
    // that confirms its role; error::no_primary when none does.
    awaitable<error_code> connect_via_sentinels();
    awaitable<std::pair<error_code, sentinel::master_addr>> ask_sentinel(sentinel_link& link,
                                                                         const endpoint& s,
                                                                         std::string& why);
    // Follows the Sentinels' +switch-master messages for the service, on a
    // subscription of its own re-established with bounded backoff.
    awaitable<void> sentinel_watch();
    awaitable<error_code> subscribe_switch_master(const endpoint& s, std::string& why);
    // The subscription's two halves, run together until either ends (why
    // says how): the messages, each noted in `heard`; and the health check,
    // a PING after health_check_interval of silence that must be answered
    // within command_timeout, so a paused or cut-off Sentinel is left for
    // another instead of leaving the client deaf to failovers.
    awaitable<void> sentinel_listen(const endpoint& s, clock::time_point& heard,
                                    std::string& why);
    awaitable<void> sentinel_keepalive(const clock::time_point& heard, std::string& why);
    // The primary is elsewhere (a +switch-master, a -READONLY reply): ends
    // the connection, and the next attempt starts at once.
    void rediscover(std::string_view why);
    awaitable<error_code> handshake();
    awaitable<error_code> reader();
    awaitable<error_code> writer();
    awaitable<error_code> health_check();
    awaitable<void> expire_loop();
    // Waits connect_timeout from the start; if no connection was made by
    // then, commands fail with never_connected until one is.
    awaitable<void> connect_window();

    // A connection attempt failed. Decides whether commands fail at once
    // (fail_fast_) and with what, and records the cause.
    void on_connect_failure(error_code ec);
    // Fails every queued command with the fail-fast error and its text.
    void fail_queued_fast();
    // Completes a command that arrives while failing fast, without queueing it.
    bool refuse_now(const exec_options& opts, exec_handler& handler);
    // Completes a command refused before it was queued: never inside the
    // initiating call (complete_posted); a direct handler on the strand.
    void complete_refused(exec_handler handler, bool direct, error_code ec, reply r);
    bool refuse_now(target_ptr& target);
    reply fail_fast_reply() const;

    awaitable<std::pair<error_code, std::size_t>> read_some(char* data, std::size_t size);
    awaitable<std::pair<error_code, std::size_t>> write_all(const std::string& data);

    void push_request(std::string payload, exec_options opts, exec_handler handler);
    request_queue::options queue_options(const exec_options& opts) const;
    // After a push: re-arms the expiry timer and starts or schedules a write.
    void after_push(const request_queue::options& qo);
    // Runs completed requests' handlers and targets, every one even if one throws.
    void run_completions(completions& done);
    void complete(completion& c);
    void handle_reply(reply&& r);
    // Hands out every parsed reply; false when an unexpected one closed
    // the connection.
    bool handle_replies();
    void close_socket() noexcept;
    // Writing is callback-driven, not a coroutine: flush() stages every
    // waiting command and writes it at once (a non-blocking send on plain
    // TCP, so the bytes are on their way before flush() returns), falling
    // back to an asynchronous write for what the socket does not take.
    void schedule_flush();
    void flush() noexcept;
    struct connection;
    void on_write_complete(const std::shared_ptr<connection>& conn, std::size_t count,
                           error_code ec);
    void write_done(std::size_t count);
    void fail_write(error_code ec) noexcept;
    // Held by the reader and the health check: when either ends, the
    // connection is being torn down, and a command written in the time the
    // race takes to unwind would fail with connection_lost instead of
    // waiting for the next connection.
    struct stop_writing {
        client_impl& c;
        ~stop_writing() { c.can_write_ = false; }
    };
    // The server for log lines: host:port, or "the primary of NAME" before
    // a Sentinel named one.
    std::string peer() const;
    template <class F> void for_each_listener(F&& f);

    boost::asio::any_io_executor executor_;
    strand_type strand_;
    config cfg_;
    std::shared_ptr<spdlog::logger> logger_;
    std::string holder_;

    // One connection's streams. Shared: every pending operation's
    // coroutine or handler holds it, so closing the connection (close_socket)
    // never destroys a stream that an operation still uses; an SSL stream in
    // particular is touched by its operations' completions.
    struct connection {
        explicit connection(const boost::asio::any_io_executor& ex) : socket(ex) {}
        tcp::socket socket;
        std::optional<boost::asio::ssl::stream<tcp::socket&>> tls;  // after socket: dies first
    };

    std::optional<boost::asio::ssl::context> ssl_ctx_;
    std::shared_ptr<connection> conn_;  // null while disconnected
    tcp::resolver resolver_;
    // The server of the current (or last) connection: cfg_'s host and port,
    // or the primary a Sentinel named.
    endpoint server_;
    // topology::sentinel: the +switch-master subscription's connection and
    // backoff timer, and whether the next connect attempt skips the backoff.
    std::unique_ptr<sentinel_link> watch_link_;
    boost::asio::steady_timer watch_timer_;
    bool reconnect_now_ = false;
    endpoint last_primary_;  // of the last connection, to log a change

    request_queue queue_;
    resp3_parser parser_;
    // A condition variable: cancel() wakes writer(), which ends the
    // connection when a write failed (write_error_) or the client stopped.
    boost::asio::steady_timer write_signal_;
    boost::asio::steady_timer expire_timer_;
    boost::asio::steady_timer backoff_timer_;

    std::vector<std::weak_ptr<connection_listener>> listeners_;
    std::shared_ptr<void> lock_service_;
    redis_backend backend_{*this};
    std::shared_ptr<cluster::cluster_router> router_;

    clock::time_point last_read_{};
    backoff backoff_;  // between connection attempts (reset on success)
    error_code last_connect_error_;
    std::string last_connect_diagnostic_;  // the attempt in progress's, then the failure's
    // last_connect_error_'s diagnostic, kept while a new attempt (which
    // clears last_connect_diagnostic_) runs: the cause connect_window names.
    std::string last_failure_diagnostic_;
    // The last attempt failed in a way retrying cannot fix (credentials,
    // database index, certificate, server version).
    bool last_connect_permanent_ = false;
    // The last attempt's every address refused the connection (ECONNREFUSED).
    bool last_connect_refused_ = false;
    bool started_ = false;
    bool ever_connected_ = false;
    bool window_passed_ = false;   // connect_timeout has passed since start()
    // While disconnected: commands fail at once with fail_fast_ec_, their
    // reply's text naming the cause, instead of being queued.
    bool fail_fast_ = false;
    error_code fail_fast_ec_;
    std::string fail_fast_text_;
    boost::asio::steady_timer window_timer_;

    mutable std::mutex error_mu_;
    error_detail last_error_;

    // The write side, on the strand. can_write_ is true between a finished
    // handshake and the end of that connection.
    bool can_write_ = false;
    bool writing_ = false;        // an asynchronous write is in flight
    bool flush_posted_ = false;   // a flush() is already posted
    bool in_reader_ = false;      // the reader is handling replies; it flushes itself
    // Commands per write while a burst is being produced (see push_request):
    // the first slice, and the most any slice grows to.
    static constexpr std::size_t first_slice = 16;
    static constexpr std::size_t max_slice = 4096;
    std::size_t slice_ = first_slice;  // commands that make the next slice of a burst
    error_code write_error_;

    std::atomic<bool> connected_{false};
    std::atomic<bool> stopped_{false};

    struct atomic_stats {
        std::atomic<std::uint64_t> commands_sent{0}, writes{0}, replies{0}, pushes{0},
            connects{0}, disconnects{0}, timeouts{0}, retries{0};
        std::atomic<std::size_t> queued{0};
    } stats_;
    metrics_recorder metrics_;
};

template <class F>
void client_impl::for_each_listener(F&& f) {
    // Copy first: a listener may add or drop listeners while being called.
    auto copy = listeners_;
    for (auto& weak : copy)
        if (auto l = weak.lock()) f(*l);
    std::erase_if(listeners_, [](const auto& w) { return w.expired(); });
}

// Awaits on the client's strand without throwing: the error_code comes back
// first in a tuple (connection.cpp's coroutines, the Sentinel connect).
inline constexpr auto use_nothrow =
    boost::asio::as_tuple(boost::asio::use_awaitable_t<client_impl::strand_type>{});

// Maps a server error reply's text to a corolock error code.
error_code classify_server_error(std::string_view message) noexcept;

// The cause of a socket or resolver failure in plain words, as
// client::last_error() reports it: "connection refused", "host not found".
// System messages start with a capital and netdb ones add a parenthesised
// detail ("Host not found (authoritative)"); both read oddly after a colon.
std::string describe_cause(const error_code& ec);

// A connection attempt failed for a reason that retrying cannot fix: the
// credentials, the ACL, the certificate or the server's version are wrong,
// not the network. Commands then fail at once instead of waiting.
bool retry_cannot_fix(const error_code& ec) noexcept;

}  // namespace corolock::detail
