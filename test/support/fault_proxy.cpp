#include "support/fault_proxy.hpp"

#include "redis/resp/resp3_parser.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <deque>
#include <exception>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string_view>

namespace corolock::test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

void report(const char* what, std::exception_ptr e) {
    if (!e) return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        std::cerr << "fault_proxy: " << what << " failed: " << ex.what() << std::endl;
    } catch (...) {
        std::cerr << "fault_proxy: " << what << " failed" << std::endl;
    }
}

std::string upper(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

// How many replies a command gets: one, except the subscribe family, which
// gets one confirmation per channel (corolock sends one channel a command).
std::size_t replies_expected(const fault_proxy::command_args& args) {
    if (args.empty()) return 1;
    const auto name = upper(args.front());
    const bool subscribe_family = name == "SUBSCRIBE" || name == "UNSUBSCRIBE" ||
                                  name == "PSUBSCRIBE" || name == "PUNSUBSCRIBE" ||
                                  name == "SSUBSCRIBE" || name == "SUNSUBSCRIBE";
    return subscribe_family ? std::max<std::size_t>(1, args.size() - 1) : 1;
}

// A push that answers no command: a pub/sub message or an invalidation.
bool is_out_of_band(const reply& r) {
    if (r.type != resp3_type::push || r.elements.empty()) return false;
    const std::string& kind = r.elements.front().str;
    return kind == "message" || kind == "pmessage" || kind == "smessage" || kind == "invalidate";
}

}  // namespace

// One direction of one connection: the frames read from its source and not
// yet written to its sink.
struct fault_proxy::stream {
    struct segment {
        std::string bytes;
        clock::time_point due;
        bool freeze_after = false;  // freeze_after_next's request: pause both ways once written
    };

    explicit stream(const asio::any_io_executor& ex) : wake(ex, clock::time_point::max()) {}

    corolock::detail::resp3_parser parser;
    std::string frame;     // bytes of the frame being received
    bool raw = false;      // the parser gave up: bytes go through unframed
    std::deque<segment> out;
    asio::steady_timer wake;  // the writer's wait; cancel() wakes it
    bool eof = false;      // the source closed: close once `out` is written
};

struct fault_proxy::pending_command {
    command_args args;
    std::size_t replies_left;
};

struct fault_proxy::connection : std::enable_shared_from_this<connection> {
    connection(fault_proxy& p, std::uint64_t i, std::size_t info, tcp::socket c)
        : proxy(p),
          id(i),
          info_index(info),
          client(std::move(c)),
          server(p.ioc_),
          streams{stream(p.ioc_.get_executor()), stream(p.ioc_.get_executor())} {}

    fault_proxy& proxy;
    const std::uint64_t id;
    const std::size_t info_index;  // in proxy.stats_.connections
    tcp::socket client;
    tcp::socket server;
    stream streams[2];             // [0] to the server, [1] to the client
    std::deque<pending_command> pending;
    bool dark = false;        // after a dropped reply with after_drop::blackhole
    bool lost_bytes = false;  // a blackhole threw bytes of this connection away
    bool closed = false;

    tcp::socket& source(int d) { return d == 0 ? client : server; }
    tcp::socket& sink(int d) { return d == 0 ? server : client; }
    connection_info& info() { return proxy.stats_.connections[info_index]; }

    asio::awaitable<void> run() {
        auto [ec] = co_await server.async_connect(proxy.upstream_, nothrow);
        if (ec || closed) {
            ++proxy.stats_.upstream_failures;
            proxy.close_connection(*this, false);
            co_return;
        }
        error_code ignored;
        client.set_option(tcp::no_delay(true), ignored);
        server.set_option(tcp::no_delay(true), ignored);
        auto self = shared_from_this();
        for (int d = 0; d < 2; ++d) {
            asio::co_spawn(proxy.ioc_, read_loop(d), [self](std::exception_ptr e) { report("reader", e); });
            asio::co_spawn(proxy.ioc_, write_loop(d), [self](std::exception_ptr e) { report("writer", e); });
        }
    }

    asio::awaitable<void> read_loop(int d) {
        std::array<char, 16 * 1024> buf;
        for (;;) {
            auto [ec, n] = co_await source(d).async_read_some(asio::buffer(buf), nothrow);
            if (closed) co_return;
            if (ec) {
                // End of stream or an error: pass it on once what was read
                // has been written (the writer closes the connection).
                streams[d].eof = true;
                streams[d].wake.cancel();
                co_return;
            }
            consume(d, std::string_view(buf.data(), n));
        }
    }

    // Cuts the bytes into frames. The parser is fed one byte at a time, so
    // that each frame's end is known exactly; test traffic is small.
    void consume(int d, std::string_view data) {
        stream& s = streams[d];
        if (s.raw || proxy.framing_ == framing::raw) {
            auto& rule = proxy.freeze_after_;
            const bool freeze = d == 0 && rule && data.find(*rule) != std::string_view::npos;
            if (freeze) rule.reset();
            forward(d, std::string(data), freeze);
            return;
        }
        for (std::size_t i = 0; i < data.size() && !closed; ++i) {
            s.frame.push_back(data[i]);
            error_code ec;
            s.parser.consume(data.substr(i, 1), ec);
            if (ec) {
                s.raw = true;
                ++proxy.stats_.unparsed;
                std::string rest = std::move(s.frame);
                s.frame.clear();
                rest.append(data.substr(i + 1));
                forward(d, std::move(rest));
                return;
            }
            if (s.parser.has_reply()) {
                reply r = s.parser.pop();
                std::string bytes = std::move(s.frame);
                s.frame.clear();
                on_frame(d, std::move(bytes), r);
            }
        }
    }

    void on_frame(int d, std::string bytes, const reply& r) {
        if (d == 0) {
            ++proxy.stats_.commands;
            command_args args;
            for (const auto& e : r.elements) args.push_back(e.str);
            const auto n = replies_expected(args);
            auto& pause_rule = proxy.pause_at_;
            if (pause_rule && (!*pause_rule || (*pause_rule)(args))) {
                pause_rule.reset();
                proxy.settings_.paused[0] = true;  // before this command is written
            }
            pending.push_back(pending_command{std::move(args), n});
            forward(0, std::move(bytes));
            return;
        }
        ++proxy.stats_.replies;
        if (!is_out_of_band(r) && !pending.empty()) {
            auto& rule = proxy.drop_;
            if (rule && (!rule->match || rule->match(pending.front().args))) {
                const drop_rule fired = std::move(*rule);
                rule.reset();
                ++proxy.stats_.replies_dropped;
                if (fired.on_drop) fired.on_drop();
                if (fired.after == after_drop::reset) {
                    // Reset with the command still unanswered (it counts so).
                    proxy.reset_connection(*this);
                    return;
                }
                if (fired.after == after_drop::blackhole) {
                    dark = true;
                    lost_bytes = true;
                }
                if (--pending.front().replies_left == 0) pending.pop_front();
                return;
            }
            if (--pending.front().replies_left == 0) pending.pop_front();
        }
        forward(1, std::move(bytes));
    }

    void forward(int d, std::string bytes, bool freeze_after = false) {
        if (closed || bytes.empty()) return;
        if (proxy.settings_.blackholed[d] || dark) {
            proxy.stats_.bytes_dropped += bytes.size();
            lost_bytes = true;
            return;
        }
        streams[d].out.push_back(
            stream::segment{std::move(bytes), clock::now() + proxy.settings_.delay[d], freeze_after});
        streams[d].wake.cancel();
    }

    asio::awaitable<void> write_loop(int d) {
        stream& s = streams[d];
        for (;;) {
            if (closed) co_return;
            const settings& set = proxy.settings_;
            if (s.out.empty() || set.paused[d]) {
                // A freeze (freeze_after_next) holds a close as well: the
                // server must not learn that the frozen client gave up.
                if (s.out.empty() && s.eof && !(set.paused[d] && proxy.froze_)) {
                    proxy.close_connection(*this, false);
                    co_return;
                }
                s.wake.expires_at(clock::time_point::max());
                co_await s.wake.async_wait(nothrow);
                continue;
            }
            if (clock::now() < s.out.front().due) {
                s.wake.expires_at(s.out.front().due);
                co_await s.wake.async_wait(nothrow);
                continue;
            }
            std::string bytes = std::move(s.out.front().bytes);
            const bool freeze_after = s.out.front().freeze_after;
            s.out.pop_front();
            if (set.blackholed[d] || dark) {  // in flight when the blackhole began
                proxy.stats_.bytes_dropped += bytes.size();
                lost_bytes = true;
                continue;
            }
            const bool sliced = set.sliced[d];
            error_code ec;
            std::uint64_t writes = 0;
            if (sliced) {
                for (std::size_t i = 0; i < bytes.size() && !ec && !closed; ++i) {
                    auto [wec, n] = co_await asio::async_write(sink(d), asio::buffer(&bytes[i], 1), nothrow);
                    ec = wec;
                    ++writes;
                }
            } else {
                auto [wec, n] = co_await asio::async_write(sink(d), asio::buffer(bytes), nothrow);
                ec = wec;
                ++writes;
            }
            if (closed) co_return;
            if (ec) {
                proxy.close_connection(*this, false);
                co_return;
            }
            auto& st = proxy.stats_;
            (d == 0 ? st.bytes_to_server : st.bytes_to_client) += bytes.size();
            (d == 0 ? st.writes_to_server : st.writes_to_client) += writes;
            if (d == 1 && !info().first_reply_at) info().first_reply_at = clock::now();
            if (freeze_after) {
                proxy.settings_.paused[0] = proxy.settings_.paused[1] = true;
                proxy.froze_ = true;
            }
        }
    }
};

fault_proxy::fault_proxy(std::uint16_t upstream_port, std::string upstream_host, framing f)
    : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      upstream_(asio::ip::make_address(upstream_host), upstream_port),
      framing_(f) {
    port_ = acceptor_.local_endpoint().port();
    start_accepting();
    thread_ = std::thread([this] {
        for (int attempt = 0; attempt < 100; ++attempt) {
            try {
                ioc_.run();
                break;
            } catch (const std::exception& e) {
                std::cerr << "fault_proxy: " << e.what() << std::endl;
            }
        }
        loop_done_.store(true);
    });
}

fault_proxy::~fault_proxy() {
    try {
        asio::post(ioc_, [this] {
            stopping_ = true;
            error_code ignored;
            acceptor_.close(ignored);
            auto all = connections_;
            for (auto& [id, c] : all) close_connection(*c, false);
        });
    } catch (...) {
        ioc_.stop();
    }
    // Every coroutine ends once its sockets are closed, and run() returns.
    const auto deadline = clock::now() + 5s;
    while (!loop_done_.load() && clock::now() < deadline) std::this_thread::sleep_for(1ms);
    if (!loop_done_.load()) ioc_.stop();
    thread_.join();
}

std::string fault_proxy::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

template <class F>
auto fault_proxy::on_loop(F f) const -> decltype(f()) {
    using result = decltype(f());
    if (std::this_thread::get_id() == thread_.get_id()) return f();
    // Shared: if the loop does not answer in time, the task outlives this call.
    auto task = std::make_shared<std::packaged_task<result()>>(std::move(f));
    auto answer = task->get_future();
    asio::post(ioc_, [task] { (*task)(); });
    if (answer.wait_for(10s) != std::future_status::ready)
        throw std::runtime_error("fault_proxy: the proxy's thread did not answer within 10 s");
    return answer.get();
}

void fault_proxy::start_accepting() {
    acceptor_.async_accept([this](error_code ec, tcp::socket s) {
        if (stopping_ || ec == asio::error::operation_aborted) return;
        if (!ec) {
            error_code ignored;
            s.set_option(tcp::no_delay(true), ignored);
            const auto id = next_id_++;
            ++stats_.accepted;
            stats_.connections.push_back(connection_info{id, clock::now(), {}, {}, false});
            auto c = std::make_shared<connection>(*this, id, stats_.connections.size() - 1, std::move(s));
            connections_[id] = c;
            asio::co_spawn(ioc_, c->run(), [c](std::exception_ptr e) { report("connect", e); });
        }
        start_accepting();
    });
}

void fault_proxy::close_connection(connection& c, bool rst) {
    if (c.closed) return;
    c.closed = true;
    error_code ignored;
    if (rst) {
        // SO_LINGER 0: close() sends RST instead of FIN.
        if (c.client.is_open()) c.client.set_option(asio::socket_base::linger(true, 0), ignored);
        if (c.server.is_open()) c.server.set_option(asio::socket_base::linger(true, 0), ignored);
    }
    c.client.close(ignored);
    c.server.close(ignored);
    for (auto& s : c.streams) s.wake.cancel();
    c.info().closed_at = clock::now();
    c.info().reset = rst;
    connections_.erase(c.id);
}

void fault_proxy::reset_connection(connection& c) {
    if (c.closed) return;
    ++stats_.resets;
    if (!c.pending.empty()) ++stats_.resets_mid_command;
    close_connection(c, true);
}

void fault_proxy::wake_all_writers() {
    for (auto& [id, c] : connections_)
        for (auto& s : c->streams) s.wake.cancel();
}

void fault_proxy::reset_lossy_connections() {
    auto all = connections_;
    for (auto& [id, c] : all)
        if (c->lost_bytes) reset_connection(*c);
}

void fault_proxy::set_delay(direction d, duration delay) {
    on_loop([&] {
        settings_.delay[index(d)] = delay;
        wake_all_writers();
    });
}

void fault_proxy::set_delay(duration both_ways) {
    set_delay(direction::to_server, both_ways);
    set_delay(direction::to_client, both_ways);
}

void fault_proxy::blackhole(direction d, bool on) {
    on_loop([&] {
        settings_.blackholed[index(d)] = on;
        if (!on) reset_lossy_connections();
    });
}

void fault_proxy::blackhole(bool on) {
    on_loop([&] {
        settings_.blackholed[0] = settings_.blackholed[1] = on;
        if (!on) reset_lossy_connections();
    });
}

void fault_proxy::pause(direction d) {
    on_loop([&] { settings_.paused[index(d)] = true; });
}

void fault_proxy::pause() {
    on_loop([&] { settings_.paused[0] = settings_.paused[1] = true; });
}

void fault_proxy::resume(direction d) {
    on_loop([&] {
        settings_.paused[index(d)] = false;
        wake_all_writers();
    });
}

void fault_proxy::resume() {
    on_loop([&] {
        settings_.paused[0] = settings_.paused[1] = false;
        wake_all_writers();
    });
}

void fault_proxy::heal() {
    on_loop([&] {
        settings_.blackholed[0] = settings_.blackholed[1] = false;
        settings_.paused[0] = settings_.paused[1] = false;
        reset_lossy_connections();
        wake_all_writers();
    });
}

void fault_proxy::slice(direction d, bool on) {
    on_loop([&] { settings_.sliced[index(d)] = on; });
}

void fault_proxy::slice(bool on) {
    on_loop([&] { settings_.sliced[0] = settings_.sliced[1] = on; });
}

std::size_t fault_proxy::reset_all() {
    return on_loop([&] {
        auto all = connections_;
        for (auto& [id, c] : all) reset_connection(*c);
        return all.size();
    });
}

void fault_proxy::drop_next_reply(after_drop after, command_matcher match, std::function<void()> on_drop) {
    on_loop([&] { drop_ = drop_rule{after, std::move(match), std::move(on_drop)}; });
}

bool fault_proxy::drop_armed() const {
    return on_loop([&] { return drop_.has_value(); });
}

void fault_proxy::pause_at_next(command_matcher match) {
    on_loop([&] { pause_at_ = std::move(match); });
}

bool fault_proxy::pause_armed() const {
    return on_loop([&] { return pause_at_.has_value(); });
}

void fault_proxy::freeze_after_next(std::string needle) {
    on_loop([&] {
        freeze_after_ = std::move(needle);
        froze_ = false;
    });
}

bool fault_proxy::froze() const {
    return on_loop([&] { return froze_; });
}

std::size_t fault_proxy::inject_to_client(std::string bytes) {
    return on_loop([&] {
        std::size_t n = 0;
        for (auto& [id, c] : connections_) {
            if (c->closed) continue;
            c->forward(1, bytes);
            ++stats_.injected;
            ++n;
        }
        return n;
    });
}

fault_proxy::statistics fault_proxy::stats() const {
    return on_loop([&] {
        statistics s = stats_;
        s.open = connections_.size();
        return s;
    });
}

std::vector<fault_proxy::command_args> fault_proxy::unanswered() const {
    return on_loop([&] {
        std::vector<command_args> out;
        for (const auto& [id, c] : connections_)
            for (const auto& p : c->pending) out.push_back(p.args);
        return out;
    });
}

}  // namespace corolock::test
