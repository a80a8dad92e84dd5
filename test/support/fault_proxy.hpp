// A fault-injecting TCP proxy for the network fault tests.
//
// It listens on a free loopback port and forwards every connection to a
// redis-server (or anything else) on 127.0.0.1. It runs its own io_context
// on its own thread, so the code under test never shares an executor with
// it, and a test drives it from any thread through the control calls below.
// Each control call takes effect on the proxy's thread before it returns.
//
// Both byte streams are cut into frames with corolock's own RESP3 parser
// (client to server: commands; server to client: replies and pushes), and
// the proxy forwards whole frames. So it knows which command each reply
// answers, can swallow exactly one reply, and can inject bytes between two
// frames. A stream the parser rejects is forwarded raw from then on (see
// stats().unparsed); the frame-based faults do not apply to it any more.
//
// The faults, each for one direction or both:
//  - delay: each frame leaves `delay` after it arrived (order is kept);
//  - pause: frames are held, and released in order by resume() (a partition
//    that TCP survives: the bytes are late, not lost);
//  - blackhole: frames are read and thrown away, sockets stay open (a
//    partition that loses bytes). A stream that lost bytes can never be in
//    step again, which real TCP never allows: it retransmits, or gives up
//    and resets. So lifting a blackhole (blackhole(false) or heal()) resets
//    every connection that lost bytes, as TCP would once it gave up, and
//    connections opened later start clean;
//  - slice: every frame is written one byte per write (TCP_NODELAY is on, so
//    each byte is its own segment);
//  - reset_all(): every connection is closed with an RST on both sides
//    (SO_LINGER 0);
//  - drop_next_reply(): the next reply (optionally: the next reply to a
//    command that a predicate picks) is swallowed, then the connection goes
//    on as chosen (see after_drop);
//  - inject_to_client(): raw bytes go to the client between two frames.
//
// For a protocol other than RESP (the conformance suite's other backends),
// framing::raw skips the parser altogether: bytes are forwarded as they
// arrive, and delay, pause, blackhole, slice and reset_all() apply to them
// as to frames; drop_next_reply() and unanswered() never see a command.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace corolock::test {

class fault_proxy {
public:
    using clock = std::chrono::steady_clock;
    using duration = clock::duration;

    enum class direction {
        to_server,  // client -> server: commands
        to_client,  // server -> client: replies and pushes
    };

    // What a connection does after drop_next_reply() swallowed its reply.
    enum class after_drop {
        // Keeps forwarding. The client's stream is then out of step (every
        // later reply answers the command before): a fault TCP cannot
        // produce on its own, for testing the proxy itself.
        forward,
        // The connection goes dark both ways, sockets open: the reply was
        // lost in a partition. The client must notice by itself (timeouts,
        // health check). heal() resets it.
        blackhole,
        // The connection is reset (RST) right after the swallowed reply:
        // the command ran on the server, its answer died with the connection.
        reset,
    };

    // A command as the client sent it: its arguments, the first one the
    // command name as written (e.g. "EVALSHA", sha, numkeys, keys...).
    using command_args = std::vector<std::string>;
    using command_matcher = std::function<bool(const command_args&)>;

    struct connection_info {
        std::uint64_t id = 0;
        clock::time_point accepted_at{};
        // When the first server->client frame was written to the client (for
        // corolock, the answer to HELLO: the client is connected from then).
        std::optional<clock::time_point> first_reply_at;
        std::optional<clock::time_point> closed_at;
        bool reset = false;  // closed by an RST from the proxy
    };

    struct statistics {
        std::uint64_t accepted = 0;        // client connections accepted
        std::uint64_t open = 0;            // connections open now
        std::uint64_t upstream_failures = 0;  // could not connect to the server
        std::uint64_t commands = 0;        // frames parsed client -> server
        std::uint64_t replies = 0;         // frames parsed server -> client (pushes included)
        std::uint64_t bytes_to_server = 0; // written to the server
        std::uint64_t bytes_to_client = 0; // written to the client
        std::uint64_t writes_to_server = 0;
        std::uint64_t writes_to_client = 0;
        std::uint64_t bytes_dropped = 0;   // thrown away by a blackhole (either way)
        std::uint64_t replies_dropped = 0; // swallowed by drop_next_reply()
        std::uint64_t injected = 0;        // inject_to_client() frames queued
        std::uint64_t resets = 0;          // connections reset by the proxy
        std::uint64_t resets_mid_command = 0;  // ... with a command still unanswered
        std::uint64_t unparsed = 0;        // streams the parser rejected (forwarded raw)
        std::vector<connection_info> connections;  // every connection, oldest first
    };

    // How the byte streams are cut: into RESP frames, or not at all.
    enum class framing { resp, raw };

    // Starts listening on 127.0.0.1 (a free port) and forwarding to
    // upstream_host:upstream_port. Throws std::system_error if it cannot listen.
    explicit fault_proxy(std::uint16_t upstream_port, std::string upstream_host = "127.0.0.1",
                         framing f = framing::resp);
    // Closes every connection and the listener, and joins the thread
    // (bounded: the loop is stopped if it does not wind down within 5 s).
    ~fault_proxy();

    fault_proxy(const fault_proxy&) = delete;
    fault_proxy& operator=(const fault_proxy&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    // "redis://127.0.0.1:PORT"
    std::string url() const;

    void set_delay(direction d, duration delay);
    void set_delay(duration both_ways);

    void blackhole(direction d, bool on = true);
    void blackhole(bool on = true);  // both ways

    void pause(direction d);
    void pause();  // both ways
    void resume(direction d);
    void resume();

    // Lifts every blackhole and pause, releasing held frames, and resets the
    // connections that lost bytes. Delay and slicing stay as they are.
    void heal();

    void slice(direction d, bool on = true);
    void slice(bool on = true);  // both ways

    // Resets every open connection (RST to both peers); returns how many.
    std::size_t reset_all();

    // Arms the proxy to swallow the next reply, on any connection, to a
    // command that `match` accepts (every command when empty). Pushes that
    // answer no command (pub/sub messages) never count. One reply only; arming
    // again replaces the pending rule. `on_drop`, when given, runs on the
    // proxy's thread the moment the reply is swallowed (before a reset), so
    // control calls made from it take effect before anything else happens.
    void drop_next_reply(after_drop after = after_drop::forward, command_matcher match = {},
                         std::function<void()> on_drop = {});
    bool drop_armed() const;

    // Arms the proxy to pause the client->server direction (as
    // pause(direction::to_server)) at the next command, on any connection,
    // that `match` accepts: that command and every later one wait until
    // resume(). For a test that must hold back one request exactly, such as
    // a clean-up the client sends on its own. Arming again replaces the rule.
    void pause_at_next(command_matcher match);
    bool pause_armed() const;

    // Arms the proxy to freeze both directions (as pause()) right after it
    // has written to the server the next chunk a client sent that contains
    // `needle` (raw framing: the bytes as read, such as a PostgreSQL query's
    // text). The server has that request and runs it; neither peer hears
    // anything more until resume() or heal(), and no close goes through: a
    // client frozen, or cut off, the moment after it sent the request.
    // Arming again replaces the rule.
    void freeze_after_next(std::string needle);
    // Whether the armed freeze happened (since the last arming).
    bool froze() const;

    // Queues bytes for the client of every open connection, between two
    // frames (after whatever is queued already); returns how many got them.
    std::size_t inject_to_client(std::string bytes);

    statistics stats() const;

    // Commands each open connection sent that have no reply yet, oldest
    // first (for tests that need to know a command reached the proxy).
    std::vector<command_args> unanswered() const;

private:
    struct connection;
    struct stream;
    struct pending_command;
    struct settings {
        duration delay[2]{};
        bool blackholed[2]{};
        bool paused[2]{};
        bool sliced[2]{};
    };
    struct drop_rule {
        after_drop after;
        command_matcher match;
        std::function<void()> on_drop;
    };

    static int index(direction d) noexcept { return d == direction::to_server ? 0 : 1; }

    // Runs f on the proxy's thread and returns its result (at once when
    // called from that thread, e.g. by a command_matcher).
    template <class F>
    auto on_loop(F f) const -> decltype(f());
    void start_accepting();
    void wake_all_writers();
    void reset_lossy_connections();
    void reset_connection(connection& c);
    void close_connection(connection& c, bool rst);

    mutable boost::asio::io_context ioc_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::ip::tcp::endpoint upstream_;
    framing framing_ = framing::resp;
    std::uint16_t port_ = 0;

    // Everything below lives on the proxy's thread.
    settings settings_;
    std::optional<drop_rule> drop_;
    std::optional<command_matcher> pause_at_;
    std::optional<std::string> freeze_after_;
    bool froze_ = false;
    std::map<std::uint64_t, std::shared_ptr<connection>> connections_;
    std::uint64_t next_id_ = 1;
    statistics stats_;
    bool stopping_ = false;

    std::atomic<bool> loop_done_{false};
    std::thread thread_;
};

}  // namespace corolock::test
