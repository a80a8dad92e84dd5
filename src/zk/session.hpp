// One ZooKeeper session, driven by the caller's strand through the
// single-threaded C client (libzookeeper_st): no thread of its own.
//
// zookeeper_interest() says which socket to watch, for what, and how soon
// the library must run again; the socket is watched by a
// posix::stream_descriptor that never owns it (the library opens and
// closes it, and may replace it on a reconnect: a new socket is noticed by
// its inode), and the "run again" by a steady_timer. zookeeper_process()
// then reads, writes and calls the completions, on the strand. A request's
// completion is found by an id, never by a pointer the library keeps, so a
// handle closed with requests out leaves nothing dangling.
//
// The session's clock (session_clock.hpp) learns from every answered
// request; a heartbeat (an exists() of the root, a read) goes out every
// third of the timeout so that an idle session's deadline keeps ahead. An
// expired session is replaced by a new one at once; the listener hears of
// every change.
#pragma once

#include "core/backoff.hpp"
#include "core/inner_executor.hpp"
#include "zk/session_clock.hpp"
#include "zk/url.hpp"

#include <corolock/error.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

struct _zhandle;  // the C client's handle (zhandle_t)

namespace spdlog { class logger; }

namespace corolock::detail::zk {

// The fields of a node's Stat that the recipe reads.
struct node_stat {
    std::int64_t czxid = 0, mzxid = 0, pzxid = 0;
    std::int32_t num_children = 0;
    std::int32_t version = 0;  // the data's version
};

// Requests handed to the library, by kind (heartbeats apart), for the tests
// that count a lock cycle's round trips. Strand only.
struct request_counts {
    std::uint64_t create = 0, create_child = 0, remove = 0, set_data = 0, children = 0,
                  get_data = 0;
};

class session : public std::enable_shared_from_this<session> {
public:
    using clock = std::chrono::steady_clock;
    using strand_type = boost::asio::strand<inner_executor>;

    enum class event { connected, suspended, expired };
    // Told on the strand.
    using listener = std::function<void(event)>;

    // Return codes are the C client's (ZOK, ZNONODE, ZCONNECTIONLOSS, ...).
    using create_handler = std::function<void(int rc, std::string path, node_stat)>;
    using stat_handler = std::function<void(int rc, node_stat)>;
    using children_handler = std::function<void(int rc, std::vector<std::string>, node_stat)>;
    using void_handler = std::function<void(int rc)>;
    // getData's answer: the node's data and stat (create's shape, so the same type).
    using data_handler = create_handler;
    // A node watch fired (deleted, changed) or the session it was set in ended.
    using watch_handler = std::function<void()>;

    session(strand_type strand, zk_options opts, spdlog::logger& log, listener l);
    ~session();
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    // Strand only, from here on.
    void start();
    // Closes the session (the ensemble deletes its ephemeral nodes at once
    // when the connection is up; see stop_blocking_bound). Outstanding
    // requests complete with ZCLOSING. Idempotent.
    void stop() noexcept;
    bool stopped() const noexcept { return stopped_; }

    const session_clock& timing() const noexcept { return clock_; }
    // Increases with every new session (after an expiry).
    std::uint64_t generation() const noexcept { return generation_; }

    // `flags`: ZOO_EPHEMERAL | ZOO_SEQUENCE, ZOO_CONTAINER, or 0.
    void create(const std::string& path, const std::string& data, int flags, create_handler h);
    // One transaction (a multi): an ephemeral sequential child `dir`/`name`,
    // then an empty setData of `dir`, whose Stat is the answer's: its mzxid
    // is the transaction's zxid (the child's czxid), its num_children
    // counts the new child. `dir` must hold no data of its own.
    void create_child(const std::string& dir, const std::string& name, const std::string& data,
                      create_handler h);
    void remove(const std::string& path, void_handler h);
    // `version`: the data's version it must be at (ZBADVERSION otherwise);
    // -1: any.
    void set_data(const std::string& path, const std::string& data, stat_handler h,
                  std::int32_t version = -1);
    // One transaction (a multi): a check that `checked` is at data version
    // `version`, then a setData of `path` (any version). The answer is the
    // first failing operation's code (ZBADVERSION, ZNONODE, ...).
    void checked_set(const std::string& checked, std::int32_t version, const std::string& path,
                     const std::string& data, void_handler h);
    void children(const std::string& path, children_handler h);
    // getChildren() with a watch of the node's children: `w` is called once,
    // when a child comes or goes or the node goes, or when the session ends
    // or is stopped. A node that does not exist answers ZNONODE and leaves
    // no watch.
    void watch_children(const std::string& path, children_handler h, watch_handler w);
    // getData() with a watch of the node: `w` is called once, when the node
    // changes or goes, or when the session ends or is stopped. A node that
    // does not exist answers ZNONODE and leaves no watch (an exists() watch
    // would stay, waiting for a creation that never comes).
    void watch_data(const std::string& path, stat_handler h, watch_handler w);
    // getData without a watch.
    void get_data(const std::string& path, data_handler h);

    const request_counts& requests() const noexcept { return requests_; }

private:
    struct pending;
    void open();
    void close_handle() noexcept;
    template <class Handler, class Call>
    void submit(Handler h, Call call);
    static void assign(pending& p, create_handler& h);
    static void assign(pending& p, stat_handler& h);
    static void assign(pending& p, children_handler& h);
    static void assign(pending& p, void_handler& h);
    static void fail_with(create_handler& h, int rc);
    static void fail_with(stat_handler& h, int rc);
    static void fail_with(children_handler& h, int rc);
    static void fail_with(void_handler& h, int rc);
    void drive() noexcept;
    void schedule_drive() noexcept;
    void process(int events) noexcept;
    void watch_socket(int fd, int interest);
    void release_socket() noexcept;
    void heartbeat();
    void on_session_event(int state);
    void replace_expired();
    static void on_watch(_zhandle*, int type, int state, const char* path, void* ctx);

    strand_type strand_;
    zk_options opts_;
    spdlog::logger& log_;
    listener listener_;
    _zhandle* zh_ = nullptr;
    session_clock clock_;
    std::uint64_t generation_ = 0;
    boost::asio::posix::stream_descriptor socket_;
    int fd_ = -1;
    unsigned long fd_inode_ = 0;
    std::uint64_t socket_epoch_ = 0;  // bumps when the socket is replaced
    bool read_waiting_ = false, write_waiting_ = false, drive_posted_ = false;
    boost::asio::steady_timer interest_timer_, heartbeat_timer_;
    // open() again after the C client could not make a session (jittered,
    // as every retry loop: core/backoff.hpp); reset once one is made.
    backoff reopen_{std::chrono::milliseconds(200), std::chrono::seconds(5)};
    bool heartbeat_out_ = false;
    bool stopped_ = false;
    bool in_process_ = false;  // inside the library: closing waits until it returns
    bool expired_ = false;     // told during zookeeper_process; replaced after it
    std::uint64_t next_id_ = 1;
    // Node watches by id: the library keeps the id as the watch's context.
    std::map<std::uint64_t, watch_handler> watches_;
    request_counts requests_;
};

// What a ZooKeeper return code means to a caller.
error_code error_of(int rc);
// Whether a request's answer may be on its way still, or lost with the
// connection (made or not, the request is unknown).
bool unanswered(int rc) noexcept;

// One session request from a coroutine: its handler's arguments as a tuple,
// delivered by a post to the strand (never inside the C client).
template <class... Args, class Start>
boost::asio::awaitable<std::tuple<Args...>> ask(const session::strand_type& strand, Start start) {
    return boost::asio::async_initiate<decltype(boost::asio::use_awaitable),
                                       void(std::tuple<Args...>)>(
        [&strand, start = std::move(start)](auto h) mutable {
            auto shared = std::make_shared<decltype(h)>(std::move(h));
            start([shared, strand](Args... a) {
                boost::asio::post(strand,
                                  [shared, t = std::tuple<Args...>(std::move(a)...)]() mutable {
                                      (*shared)(std::move(t));
                                  });
            });
        },
        boost::asio::use_awaitable);
}

}  // namespace corolock::detail::zk
