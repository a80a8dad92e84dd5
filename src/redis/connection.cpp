#include <corolock/client.hpp>
#include "redis/client_impl.hpp"
#include "core/open_cloexec.hpp"
#include "core/logging.hpp"
#include "redis/scripts.hpp"
#include "core/holder_record.hpp"
#include "redis/cluster/cluster_router.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <spdlog/spdlog.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <array>
#include <cassert>
#include <exception>
#include <mutex>
#include <tuple>

namespace corolock {
namespace detail {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using strand_type = detail::client_impl::strand_type;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable_t<strand_type>{});

error_code classify_server_error(std::string_view message) noexcept {
    auto starts = [&](std::string_view prefix) { return message.substr(0, prefix.size()) == prefix; };
    if (starts("WRONGTYPE")) return error::wrong_type;
    if (starts("NOSCRIPT")) return error::no_script;
    // A fence's refusal (src/redis/fence_library.cpp): a newer token was recorded.
    if (starts("STALE")) return error::stale_token;
    if (starts("NOPERM")) return error::no_permission;
    // An ACL denial inside a script comes back as ERR (Redis 7.0: "ERR The
    // user executing the script can't run this command or subcommand ...").
    if (message.find("user executing the script can't run") != std::string_view::npos ||
        message.find("NOPERM") != std::string_view::npos)
        return error::no_permission;
    if (starts("WRONGPASS") || starts("NOAUTH")) return error::auth_failed;
    if (message.find("invalid password") != std::string_view::npos ||
        message.find("invalid username-password") != std::string_view::npos)
        return error::auth_failed;
    return error::server_error;
}

bool retry_cannot_fix(const error_code& ec) noexcept {
    return ec == error::auth_failed || ec == error::no_permission ||
           ec == error::tls_handshake_failed || ec == error::server_too_old;
}

std::string describe_cause(const error_code& ec) {
    namespace ae = asio::error;
    if (ec == ae::host_not_found || ec == ae::host_not_found_try_again ||
        ec == ae::no_data)
        return "host not found";
    std::string text = ec.message();
    if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z' &&
        !(text.size() > 1 && text[1] >= 'A' && text[1] <= 'Z'))
        text[0] = static_cast<char>(text[0] - 'A' + 'a');
    return text;
}

namespace {

// OpenSSL's reason for a TLS failure, without Asio's " (SSL routines)"
// suffix, and with the certificate check's own reason when that failed.
std::string describe_tls_failure(const error_code& ec, SSL* ssl) {
    std::string text = ec.message();
    if (const auto paren = text.rfind(" ("); paren != std::string::npos && text.back() == ')')
        text.erase(paren);
    if (ssl != nullptr) {
        const long verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK) {
            text += ": ";
            text += X509_verify_cert_error_string(verify);
        }
    }
    return text;
}

bool is_tls_error(const error_code& ec) {
    return ec.category() == asio::error::get_ssl_category();
}

// HELLO refused as a command (Redis before 6.0 has no HELLO; NOPROTO is a
// server that knows HELLO but not protocol 3).
bool is_hello_unknown(std::string_view text) {
    return text.substr(0, 7) == "NOPROTO" ||
           (text.find("unknown command") != std::string_view::npos &&
            (text.find("HELLO") != std::string_view::npos ||
             text.find("hello") != std::string_view::npos));
}


bool is_ip_literal(const std::string& host) {
    error_code ec;
    asio::ip::make_address(host, ec);
    return !ec;
}

// Every client of an execution context, so that destroying the context
// (whose shutdown destroys pending handlers without running them, stop()'s
// included) still frees clients whose queued commands hold lock state.
class client_registry : public asio::execution_context::service {
public:
    static asio::execution_context::id id;

    explicit client_registry(asio::execution_context& ctx) : service(ctx) {}

    void add(std::weak_ptr<client_impl> c) {
        std::lock_guard lock(mu_);
        std::erase_if(clients_, [](const auto& w) { return w.expired(); });
        clients_.push_back(std::move(c));
    }

private:
    void shutdown() override {
        std::vector<std::weak_ptr<client_impl>> clients;
        {
            std::lock_guard lock(mu_);
            clients.swap(clients_);
        }
        for (auto& weak : clients)
            if (auto c = weak.lock()) c->abandon();
    }

    std::mutex mu_;
    std::vector<std::weak_ptr<client_impl>> clients_;
};

asio::execution_context::id client_registry::id;

}  // namespace

client_impl::client_impl(asio::any_io_executor ex, config cfg, std::optional<strand_type> strand)
    : executor_(ex),
      strand_(strand ? *strand : strand_type(inner_executor(ex))),
      cfg_(cfg.with_defaults()),
      logger_(cfg_.logger ? cfg_.logger : default_logger()),
      holder_(holder_argument(cfg_.holder_label)),
      // I/O objects live on the strand's inner executor (executor_ itself):
      // they are only touched on the strand, and their completions resume
      // coroutines that run there.
      resolver_(executor_),
      server_{cfg_.host, cfg_.port},
      watch_timer_(executor_),
      parser_(parser_limits{cfg_.max_bulk_length, cfg_.max_nesting_depth, cfg_.max_aggregate_size,
                            cfg_.max_reply_size}),
      write_signal_(executor_, clock::time_point::max()),
      expire_timer_(executor_, clock::time_point::max()),
      backoff_timer_(executor_),
      backoff_(cfg_.reconnect_min, cfg_.reconnect_max),
      window_timer_(executor_) {
    if (cfg_.tls.enabled) {
        ssl_ctx_.emplace(asio::ssl::context::tls_client);
        ssl_ctx_->set_options(asio::ssl::context::default_workarounds |
                              asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                              asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        if (cfg_.tls.ca_file.empty())
            ssl_ctx_->set_default_verify_paths();
        else
            ssl_ctx_->load_verify_file(cfg_.tls.ca_file);
        if (!cfg_.tls.cert_file.empty())
            ssl_ctx_->use_certificate_chain_file(cfg_.tls.cert_file);
        if (!cfg_.tls.key_file.empty())
            ssl_ctx_->use_private_key_file(cfg_.tls.key_file, asio::ssl::context::pem);
        if (cfg_.tls.verify_peer) {
            ssl_ctx_->set_verify_mode(asio::ssl::verify_peer);
            ssl_ctx_->set_verify_callback(asio::ssl::host_name_verification(
                cfg_.tls.expected_name(tls_config::peer::data_node, cfg_.host)));
        } else {
            ssl_ctx_->set_verify_mode(asio::ssl::verify_none);
        }
    }
    if (cfg_.mode == topology::cluster) router_ = std::make_shared<cluster::cluster_router>(*this);
}

client_impl::~client_impl() = default;

void client_impl::start() {
    asio::use_service<client_registry>(asio::query(executor_, asio::execution::context))
        .add(weak_from_this());
    asio::dispatch(strand_, [self = shared_from_this()] {
        if (self->started_ || self->stopped()) return;
        self->started_ = true;
        if (self->router_) {
            self->router_->start();
            return;
        }
        auto on_exit = [self](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                self->logger_->critical("client background task failed: {}", escaped{ex.what()});
            } catch (...) {
                self->logger_->critical("client background task failed");
            }
        };
        asio::co_spawn(self->strand_, self->run(), on_exit);
        asio::co_spawn(self->strand_, self->expire_loop(), on_exit);
        asio::co_spawn(self->strand_, self->connect_window(), on_exit);
        if (self->cfg_.mode == topology::sentinel)
            asio::co_spawn(self->strand_, self->sentinel_watch(), on_exit);
    });
}

void client_impl::stop() noexcept {
    if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
    try {
        asio::dispatch(strand_, [self = shared_from_this()] {
            self->logger_->debug("client stopping");
            if (self->router_) self->router_->stop();
            self->close_socket();
            self->resolver_.cancel();
            self->write_signal_.cancel();
            self->expire_timer_.cancel();
            self->backoff_timer_.cancel();
            self->window_timer_.cancel();
            self->watch_timer_.cancel();
            if (self->watch_link_) self->watch_link_->close();
            completions done;
            self->queue_.fail_all(error::client_stopped, done);
            self->run_completions(done);
            self->for_each_listener([](connection_listener& l) { l.on_stopped(); });
            self->listeners_.clear();
            self->lock_service_.reset();
            self->connected_.store(false, std::memory_order_release);
        });
    } catch (...) {
        // Only allocation can fail here; the flag is set, so every background
        // loop ends at its next step anyway.
    }
}

void client_impl::abandon() noexcept {
    stopped_.store(true, std::memory_order_release);
    connected_.store(false, std::memory_order_release);
    try {
        completions dropped;
        queue_.fail_all(error::client_stopped, dropped);
    } catch (...) {
        // Only allocation can fail; the entries then die with the client.
    }
    if (router_) router_->abandon();
    for (auto& weak : listeners_)
        if (auto l = weak.lock()) l->on_abandoned();
    listeners_.clear();
    lock_service_.reset();
}

bool client_impl::sharded_pubsub() const noexcept {
    return router_ && router_->sharded_pubsub();
}

void client_impl::on_node_connected() {
    connected_.store(true, std::memory_order_release);
    for_each_listener([](connection_listener& l) { l.on_connected(); });
}

void client_impl::on_node_push(const reply& r) {
    stats_.pushes.fetch_add(1, std::memory_order_relaxed);
    for_each_listener([&](connection_listener& l) { l.on_push(r); });
}

void client_impl::add_listener(std::weak_ptr<connection_listener> l) {
    listeners_.push_back(std::move(l));
}

template <class F>
void client_impl::for_each_listener(F&& f) {
    // Copy first: a listener may add or drop listeners while being called.
    auto copy = listeners_;
    for (auto& weak : copy)
        if (auto l = weak.lock()) f(*l);
    std::erase_if(listeners_, [](const auto& w) { return w.expired(); });
}

error_detail client_impl::last_error() const {
    std::lock_guard lock(error_mu_);
    return last_error_;
}

void client_impl::note_error(error_code code, std::string message) {
    try {
        std::lock_guard lock(error_mu_);
        last_error_.code = code;
        last_error_.message = std::move(message);
    } catch (...) {
        // A diagnostic only: losing it under memory pressure is harmless.
    }
}

client_stats client_impl::stats() const {
    client_stats s;
    s.commands_sent = stats_.commands_sent.load(std::memory_order_relaxed);
    s.writes = stats_.writes.load(std::memory_order_relaxed);
    s.replies = stats_.replies.load(std::memory_order_relaxed);
    s.pushes = stats_.pushes.load(std::memory_order_relaxed);
    s.connects = stats_.connects.load(std::memory_order_relaxed);
    s.disconnects = stats_.disconnects.load(std::memory_order_relaxed);
    s.timeouts = stats_.timeouts.load(std::memory_order_relaxed);
    s.retries = stats_.retries.load(std::memory_order_relaxed);
    s.queued = stats_.queued.load(std::memory_order_relaxed);
    return s;
}

// ---- submitting commands ----

void client_impl::exec(std::string payload, exec_options opts, exec_handler handler) {
    if (strand_.running_in_this_thread()) {
        // What dispatch() would do, without boxing a function for the strand.
        push_request(std::move(payload), opts, std::move(handler));
        return;
    }
    asio::dispatch(strand_, [self = shared_from_this(), payload = std::move(payload), opts,
                             handler = std::move(handler)]() mutable {
        self->push_request(std::move(payload), opts, std::move(handler));
    });
}

void client_impl::exec(exec_options opts, target_ptr target) {
    assert(strand_.running_in_this_thread());
    if (stopped()) {
        // Never complete inside the initiating call: post. By hand: a target
        // is the library's own, called on the strand, with no executor of its own.
        asio::post(strand_, [target = std::move(target)]() mutable {
            auto* t = target.get();
            t->on_reply(std::move(target), error::client_stopped, reply{});
        });
        return;
    }
    if (router_) {
        router_->exec(opts, std::move(target));
        return;
    }
    if (refuse_now(target)) return;
    const auto qo = queue_options(opts);
    queue_.push_target(std::move(target), qo);
    stats_.queued.store(queue_.size(), std::memory_order_relaxed);
    after_push(qo);
}

request_queue::options client_impl::queue_options(const exec_options& opts) const {
    const auto timeout = opts.timeout.count() > 0 ? opts.timeout : cfg_.command_timeout;
    request_queue::options qo;
    qo.kind = opts.kind;
    qo.idempotent = opts.idempotent;
    qo.priority = opts.priority;
    qo.direct = opts.direct;
    qo.deadline = clock::now() + timeout;
    return qo;
}

void client_impl::push_request(std::string payload, exec_options opts, exec_handler handler) {
    if (stopped()) {
        complete_refused(std::move(handler), opts.direct, error::client_stopped, reply{});
        return;
    }
    if (router_) {
        router_->exec(std::move(payload), opts, std::move(handler));
        return;
    }
    if (refuse_now(opts, handler)) return;
    auto slot = asio::get_associated_cancellation_slot(handler);
    const auto qo = queue_options(opts);
    const auto id = queue_.push(std::move(payload), std::move(handler), qo);
    stats_.queued.store(queue_.size(), std::memory_order_relaxed);

    if (slot.is_connected()) {
        slot.assign([weak = weak_from_this(), id](asio::cancellation_type type) {
            auto self = weak.lock();
            if (!self) return;
            const bool written_too =
                (type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) !=
                asio::cancellation_type::none;
            // Posted, not dispatched: the slot must not be cleared from
            // inside its own handler, which completing the command does.
            asio::post(self->strand_, [self, id, written_too] {
                completions done;
                self->queue_.cancel(id, asio::error::operation_aborted, written_too, done);
                self->run_completions(done);
            });
        });
    }
    after_push(qo);
}

reply client_impl::fail_fast_reply() const {
    reply r;
    r.type = resp3_type::simple_error;
    r.str = fail_fast_text_;
    return r;
}

void client_impl::complete_refused(exec_handler handler, bool direct, error_code ec, reply r) {
    // A direct handler has no executor of its own and expects the strand.
    if (direct)
        detail::complete_posted(std::move(handler), asio::any_io_executor(strand_), ec,
                                std::move(r));
    else
        detail::complete_posted(std::move(handler), executor_, ec, std::move(r));
}

bool client_impl::refuse_now(const exec_options& opts, exec_handler& handler) {
    if (!fail_fast_ || connected()) return false;
    complete_refused(std::move(handler), opts.direct, fail_fast_ec_, fail_fast_reply());
    return true;
}

bool client_impl::refuse_now(target_ptr& target) {
    if (!fail_fast_ || connected()) return false;
    // By hand, as in exec(opts, target): a target is no handler.
    asio::post(strand_, [target = std::move(target), ec = fail_fast_ec_,
                         r = fail_fast_reply()]() mutable {
        auto* t = target.get();
        t->on_reply(std::move(target), ec, std::move(r));
    });
    return true;
}

void client_impl::fail_queued_fast() {
    completions done;
    queue_.fail_all(fail_fast_ec_, done);
    for (auto& c : done) c.result = fail_fast_reply();
    run_completions(done);
}

void client_impl::after_push(const request_queue::options& qo) {
    if (qo.deadline < expire_timer_.expiry()) expire_timer_.cancel();
    // A burst goes out in slices, so that the server starts on the first
    // while the client is still producing the rest, instead of client and
    // server taking turns. Each slice of one burst is twice the one before:
    // 16 commands go out at once, and thousands (a watchdog tick) still take
    // only a few writes. The remainder goes when the handler that queued it
    // returns (or the reader has handed out a read's replies), which ends
    // the burst. An idle connection (nothing in flight) sends at once: there
    // is nothing to batch with, and a lone command should not wait. That
    // holds in the reader too once it has handed out the read's last reply:
    // the command goes out before the handler that queued it unwinds, and
    // the unwinding overlaps the server's work instead of delaying it.
    if (queue_.waiting_count() >= slice_) {
        slice_ = std::min(slice_ * 2, max_slice);
        flush();
    } else if (queue_.written_count() == 0 && (!in_reader_ || !parser_.has_reply())) {
        flush();
    } else {
        schedule_flush();
    }
}

void client_impl::run_completions(completions& done) {
    stats_.queued.store(queue_.size(), std::memory_order_relaxed);
    // A handler that dispatch() runs inline may throw. The rest of the list
    // is still completed (dropped, a waiting acquire would be left in the
    // lock layer's lists), and the first exception then leaves
    // io_context::run(), as it would have from dispatch().
    std::exception_ptr thrown;
    for (auto& c : done) {
        try {
            complete(c);
        } catch (...) {
            if (!thrown) thrown = std::current_exception();
        }
    }
    done.clear();
    if (thrown) asio::post(executor_, [thrown] { std::rethrow_exception(thrown); });
}

void client_impl::complete(completion& c) {
    if (!c.ec && c.result.is_error()) {
        c.ec = classify_server_error(c.result.str);
        // The server's own words reach the log and last_error(), with the
        // command they answered. NOSCRIPT is routine: the lock layer falls
        // back to EVAL.
        std::string name(c.name.view());
        if (name.empty() && c.target) {
            std::string bytes;
            c.target->write_command(bytes);
            const auto of_bytes = command_name::of_payload(bytes);
            name = of_bytes.view();
        }
        std::string text = name.empty() ? c.result.str : name + ": " + c.result.str;
        if (c.ec == error::no_permission) text = "permission denied: " + text;
        if (c.ec == error::no_script) {
            logger_->debug("{}", escaped{text});
        } else if (cfg_.mode == topology::sentinel && sentinel::is_readonly_error(c.result.str)) {
            // The primary was demoted: find the new one (the command fails).
            note_error(c.ec, text);
            rediscover(text);
        } else {
            logger_->warn("server error: {}", escaped{text});
            note_error(c.ec, std::move(text));
        }
    }
    if (c.ec == error::timeout || c.ec == error::not_connected)
        stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
    if (c.target) {
        auto* t = c.target.get();
        t->on_reply(std::move(c.target), c.ec, std::move(c.result));
        return;
    }
    if (c.direct) {
        // By hand: the lock layer's own handler, called on the strand it
        // expects (where this runs), not through any associated executor.
        std::move(c.handler)(c.ec, std::move(c.result));
        return;
    }
    auto slot = asio::get_associated_cancellation_slot(c.handler);
    if (slot.is_connected()) slot.clear();
    detail::complete_now(std::move(c.handler), false, executor_, c.ec, std::move(c.result));
}

// ---- writing ----

void client_impl::schedule_flush() {
    // Commands pushed by one handler go out in one write: the flush runs
    // once that handler returns. While the reader hands out replies it
    // flushes by itself (handle_replies), so nothing is posted then.
    if (!can_write_ || writing_ || flush_posted_ || in_reader_) return;
    flush_posted_ = true;
    asio::post(strand_, [self = shared_from_this()] {
        self->flush_posted_ = false;
        self->slice_ = first_slice;
        self->flush();
    });
}

void client_impl::flush() noexcept {
    if (!can_write_ || writing_ || !conn_ || !queue_.has_writable()) return;
    try {
        const std::string& bytes = queue_.stage();
        const auto count = queue_.staged_count();
        std::size_t sent = 0;
        if (!conn_->tls) {
            // The socket is in non-blocking mode: this sends what the
            // kernel takes now, so the server starts on these commands
            // while the reader is still handing out the replies before them.
            error_code ec;
            sent = conn_->socket.write_some(asio::buffer(bytes), ec);
            if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
                fail_write(ec);
                return;
            }
            if (sent == bytes.size()) {
                write_done(count);
                return;
            }
        }
        // The rest waits for the socket. Only this write is in flight until
        // its completion runs; commands pushed meanwhile wait for it.
        writing_ = true;
        auto on_done = asio::bind_executor(
            strand_, [self = shared_from_this(), conn = conn_, count](error_code ec, std::size_t) {
                self->on_write_complete(conn, count, ec);
            });
        const auto rest = asio::buffer(bytes) + sent;
        if (conn_->tls)
            asio::async_write(*conn_->tls, rest, std::move(on_done));
        else
            asio::async_write(conn_->socket, rest, std::move(on_done));
    } catch (const std::exception& e) {
        logger_->error("write failed: {}", escaped{e.what()});
        fail_write(make_error_code(boost::system::errc::not_enough_memory));
    }
}

void client_impl::on_write_complete(const std::shared_ptr<connection>& conn, std::size_t count,
                                    error_code ec) {
    // A write of a connection that is gone: run() has already failed or
    // re-queued its commands.
    if (conn != conn_) return;
    writing_ = false;
    if (ec) {
        fail_write(ec);
        return;
    }
    write_done(count);
    flush();
}

void client_impl::write_done(std::size_t count) {
    queue_.on_write_done();
    stats_.commands_sent.fetch_add(count, std::memory_order_relaxed);
    stats_.writes.fetch_add(1, std::memory_order_relaxed);
}

void client_impl::fail_write(error_code ec) noexcept {
    // writer() ends the connection with this error; the reader and the
    // health check are cancelled with it.
    can_write_ = false;
    if (!write_error_) write_error_ = ec;
    write_signal_.cancel();
}

// ---- the connection loop ----

client_impl::awaitable<void> client_impl::run() {
    auto self = shared_from_this();
    while (!stopped()) {
        const error_code ec = co_await connect_once();
        if (stopped()) break;
        if (ec) {
            close_socket();
            on_connect_failure(ec);
        } else {
            last_connect_error_ = {};
            last_connect_diagnostic_.clear();
            last_failure_diagnostic_.clear();
            last_connect_permanent_ = false;
            fail_fast_ = false;
            ever_connected_ = true;
            window_timer_.cancel();
            backoff_.reset();
            if (ssl_ctx_ && !cfg_.tls.verify_peer)
                logger_->warn("TLS certificate verification is disabled (config.tls.verify_peer "
                              "= false): the connection to {} is encrypted but the server is "
                              "not authenticated, and anyone on the path can impersonate it",
                              escaped{peer()});
            connected_.store(true, std::memory_order_release);
            const bool again = stats_.connects.fetch_add(1, std::memory_order_relaxed) > 0;
            logger_->info("connected to {}", escaped{peer()});
            if (cfg_.mode == topology::sentinel) {
                // A new primary may have lost the last writes (asynchronous
                // replication): on_connected() re-verifies every held lock.
                if (again && !(server_ == last_primary_))
                    logger_->warn("the primary of {} is now {} (was {})",
                                  escaped{cfg_.service_name}, escaped{sentinel::to_string(server_)},
                                  escaped{sentinel::to_string(last_primary_)});
                last_primary_ = server_;
            }
            for_each_listener([](connection_listener& l) { l.on_connected(); });
            if (again)
                notify(event_observer(), *logger_, "on_reconnected",
                       [](observer& o) { o.on_reconnected(); });

            // Commands queued while disconnected go out now.
            can_write_ = true;
            flush();
            const auto result = co_await (reader() || writer() || health_check());
            const error_code why = std::visit([](const error_code& e) { return e; }, result);
            can_write_ = false;
            writing_ = false;
            write_error_ = {};

            connected_.store(false, std::memory_order_release);
            close_socket();
            if (stopped()) break;
            stats_.disconnects.fetch_add(1, std::memory_order_relaxed);
            logger_->warn("connection to {} lost: {}", escaped{peer()},
                          why.message());
            completions done;
            const auto retried = queue_.on_disconnect(error::connection_lost, done);
            stats_.retries.fetch_add(retried, std::memory_order_relaxed);
            run_completions(done);
            for_each_listener([](connection_listener& l) { l.on_disconnected(); });
        }
        if (stopped()) break;
        if (std::exchange(reconnect_now_, false)) {
            // The Sentinels moved the primary: no backoff before asking them.
            backoff_.reset();
            continue;
        }
        const auto delay = backoff_.next();
        logger_->debug("reconnecting in {} ms",
                       std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
        backoff_timer_.expires_after(delay);
        co_await backoff_timer_.async_wait(use_nothrow);
    }
}

void client_impl::close_socket() noexcept {
    if (conn_) {
        // Pending operations end with operation_aborted; the streams live
        // on until the last of them has run.
        error_code ignored;
        conn_->socket.shutdown(tcp::socket::shutdown_both, ignored);
        conn_->socket.close(ignored);
        conn_.reset();
    }
}

void client_impl::on_connect_failure(error_code ec) {
    last_connect_error_ = ec;
    if (last_connect_diagnostic_.empty()) last_connect_diagnostic_ = describe_cause(ec);
    last_failure_diagnostic_ = last_connect_diagnostic_;
    // Retrying cannot fix these, nor a failed handshake (SELECT of a
    // database the server lacks) or no primary after one of them. (A server
    // that is fixed meanwhile is still found: the reconnecting goes on.)
    last_connect_permanent_ = retry_cannot_fix(ec) ||
                              ((ec == error::handshake_failed || ec == error::no_primary) &&
                               last_connect_permanent_);
    logger_->warn("connect to {} failed: {}{}{}", escaped{peer()}, ec.message(),
                  last_connect_diagnostic_.empty() ? "" : ": ", escaped{last_connect_diagnostic_});
    note_error(ec, last_connect_diagnostic_);
    if (last_connect_permanent_) {
        const bool was = fail_fast_ && fail_fast_ec_ == ec;
        fail_fast_ = true;
        fail_fast_ec_ = ec;
        fail_fast_text_ = last_connect_diagnostic_;
        if (!was)
            logger_->warn("commands to {} fail at once ({}) until a connection succeeds",
                          escaped{peer()}, escaped{last_connect_diagnostic_});
        fail_queued_fast();
    } else if (window_passed_ && !ever_connected_) {
        fail_fast_ = true;
        fail_fast_ec_ = error::never_connected;
        fail_fast_text_ = "never connected: " + last_connect_diagnostic_;
        fail_queued_fast();
    } else {
        // A transient failure after a permanent one: back to waiting.
        fail_fast_ = false;
    }
}

client_impl::awaitable<void> client_impl::connect_window() {
    auto self = shared_from_this();
    window_timer_.expires_after(cfg_.connect_timeout);
    co_await window_timer_.async_wait(use_nothrow);
    if (stopped() || ever_connected_) co_return;
    window_passed_ = true;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.connect_timeout).count();
    // The last failed attempt's cause: a retry may be under way, and it
    // clears last_connect_diagnostic_ when it starts.
    std::string cause = last_connect_error_ ? last_failure_diagnostic_
                                            : "the first attempt is still connecting";
    logger_->warn("no connection to {} within {} ms ({}): commands fail with never_connected "
                  "until one succeeds",
                  escaped{peer()}, ms, escaped{cause});
    if (fail_fast_) co_return;  // a permanent failure already fails them
    fail_fast_ = true;
    fail_fast_ec_ = error::never_connected;
    fail_fast_text_ = "never connected: " + cause;
    if (!last_connect_error_)
        note_error(error::connect_timeout, "no connection within " + std::to_string(ms) + " ms");
    fail_queued_fast();
}

client_impl::awaitable<error_code> client_impl::connect_once() {
    last_connect_diagnostic_.clear();
    last_connect_permanent_ = false;
    reconnect_now_ = false;  // this attempt is the one asked for
    if (cfg_.mode == topology::sentinel) co_return co_await connect_via_sentinels();
    // A named local, not a temporary in the co_await: g++ 12 destroys such
    // a temporary twice.
    const endpoint server{cfg_.host, cfg_.port};
    co_return co_await connect_to(server);
}

std::string client_impl::peer() const {
    if (cfg_.mode == topology::sentinel && server_.port == 0)
        return "the primary of " + cfg_.service_name;
    return sentinel::to_string(server_);
}

client_impl::awaitable<error_code> client_impl::connect_to(const endpoint& server) {
    server_ = server;
    last_connect_diagnostic_.clear();
    last_connect_permanent_ = false;
    asio::steady_timer deadline(executor_);
    // connect_timeout is also how long commands wait for a first connection
    // (see connect_window); one attempt may take longer than that on a slow
    // link, and then still connects for the commands that come later.
    const clock::duration attempt_timeout =
        std::max<clock::duration>(cfg_.connect_timeout, std::chrono::seconds(5));
    deadline.expires_after(attempt_timeout);
    const auto timed_out = [&] {
        last_connect_diagnostic_ =
            "no answer within " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(attempt_timeout).count()) +
            " ms";
        return error_code(error::connect_timeout);
    };

    auto [rec, endpoints] = co_await resolver_.async_resolve(
        server_.host, std::to_string(server_.port), use_nothrow);
    if (rec) {
        last_connect_diagnostic_ = describe_cause(rec);
        co_return error::resolve_failed;
    }
    if (stopped()) co_return error::client_stopped;

    conn_ = std::make_shared<connection>(executor_);
    const auto conn = conn_;
    // Each endpoint in turn, on a socket opened close-on-exec (Asio's own
    // range connect would open them without).
    error_code cec = asio::error::host_not_found;
    for (const auto& entry : endpoints) {
        const auto ep = entry.endpoint();
        error_code ignored;
        conn->socket.close(ignored);
        if (cec = open_cloexec(conn->socket, ep.protocol()); cec) continue;
        auto connected = co_await (conn->socket.async_connect(ep, use_nothrow) ||
                                   deadline.async_wait(use_nothrow));
        if (connected.index() == 1) co_return timed_out();
        cec = std::get<0>(std::get<0>(connected));
        if (!cec || stopped() || conn_ != conn) break;
    }
    if (cec) {
        last_connect_diagnostic_ = describe_cause(cec);
        co_return cec;
    }
    // stop() may have closed it while connecting.
    if (conn_ != conn) co_return error::client_stopped;
    error_code oec;
    conn->socket.set_option(tcp::no_delay(true), oec);
    // For flush()'s direct send; asynchronous operations are unaffected.
    if (!oec) conn->socket.non_blocking(true, oec);
    if (oec) {
        last_connect_diagnostic_ = oec.message();
        co_return oec;
    }

    if (ssl_ctx_) {
        conn->tls.emplace(conn->socket, *ssl_ctx_);
        // server_.host is the configured host, or the address a Sentinel
        // named: without tls.server_name, the name it announced is checked.
        const std::string sni =
            cfg_.tls.expected_name(tls_config::peer::data_node, server_.host);
        if (!is_ip_literal(sni)) SSL_set_tlsext_host_name(conn->tls->native_handle(), sni.c_str());
        // A Sentinel's primary is only known now: check its name, not the
        // configured host's (single mode checks that in the context).
        if (cfg_.mode == topology::sentinel && cfg_.tls.verify_peer)
            conn->tls->set_verify_callback(asio::ssl::host_name_verification(sni));
        auto hs = co_await (conn->tls->async_handshake(asio::ssl::stream_base::client, use_nothrow) ||
                            deadline.async_wait(use_nothrow));
        if (hs.index() == 1) {
            timed_out();
            // A plain-text Redis reads the ClientHello as an inline command
            // and waits for a newline that may never come.
            last_connect_diagnostic_ =
                "TLS handshake: " + last_connect_diagnostic_ + " (is that port plain-text Redis?)";
            co_return error::connect_timeout;
        }
        if (auto [hec] = std::get<0>(hs); hec) {
            // OpenSSL's own failures (a plain-text server, a certificate
            // that does not verify) are reported as such; the peer closing
            // mid-handshake is a socket failure like any other.
            if (is_tls_error(hec)) {
                last_connect_diagnostic_ =
                    "TLS handshake: " + describe_tls_failure(hec, conn->tls->native_handle());
                co_return error::tls_handshake_failed;
            }
            last_connect_diagnostic_ = "TLS handshake: " + describe_cause(hec);
            co_return hec;
        }
    }

    auto hello = co_await (handshake() || deadline.async_wait(use_nothrow));
    if (hello.index() == 1) co_return timed_out();
    co_return std::get<0>(hello);
}

client_impl::awaitable<error_code> client_impl::handshake() {
    // HELLO 3 switches to RESP3, authenticates and names the connection in
    // one round trip; SELECT follows when a database is chosen.
    command hello{"HELLO", "3"};
    if (!cfg_.password.empty()) {
        hello.arg("AUTH")
            .arg(cfg_.username.empty() ? std::string_view("default") : std::string_view(cfg_.username))
            .arg(cfg_.password);
    }
    if (!cfg_.client_name.empty()) hello.arg("SETNAME").arg(cfg_.client_name);
    std::string out = hello.payload();
    std::size_t expected = 1;
    const std::string db = std::to_string(cfg_.database);
    if (cfg_.database != 0) {
        command{"SELECT", db}.append_to(out);
        ++expected;
    }
    // A Sentinel's answer may be stale: the server must say it is the
    // primary itself, on every connect.
    const bool check_role = cfg_.mode == topology::sentinel;
    if (check_role) {
        command{"ROLE"}.append_to(out);
        ++expected;
    }
    if (auto [ec, n] = co_await write_all(out); ec) {
        if (conn_ && conn_->tls && is_tls_error(ec)) {
            last_connect_diagnostic_ = "TLS handshake: " + describe_tls_failure(ec, nullptr);
            co_return error::tls_handshake_failed;
        }
        last_connect_diagnostic_ = "sending HELLO: " + describe_cause(ec);
        co_return error::connection_lost;
    }

    parser_.reset();
    std::array<char, 4096> buf;
    std::vector<reply> replies;
    while (replies.size() < expected) {
        auto [ec, n] = co_await read_some(buf.data(), buf.size());
        if (ec) {
            // A TLS 1.3 server checks the client's certificate after the
            // handshake: "certificate required" arrives as the first read's
            // alert.
            if (conn_ && conn_->tls && is_tls_error(ec)) {
                last_connect_diagnostic_ = "TLS handshake: " + describe_tls_failure(ec, nullptr);
                co_return error::tls_handshake_failed;
            }
            last_connect_diagnostic_ = "waiting for the HELLO reply: " + describe_cause(ec);
            co_return error::connection_lost;
        }
        error_code pec;
        parser_.consume(std::string_view(buf.data(), n), pec);
        if (pec) {
            last_connect_diagnostic_ = parser_.diagnostic();
            co_return pec;
        }
        while (parser_.has_reply()) {
            reply r = parser_.pop();
            if (r.type == resp3_type::push) continue;  // nothing is subscribed yet
            replies.push_back(std::move(r));
        }
    }
    if (replies[0].is_error()) {
        const std::string& text = replies[0].str;
        if (is_hello_unknown(text)) {
            last_connect_diagnostic_ = "HELLO 3: " + text +
                                       " (corolock needs RESP3: Redis 6.0 or later)";
            co_return error::server_too_old;
        }
        const auto ec = classify_server_error(text);
        if (ec == error::no_permission) {
            last_connect_diagnostic_ = "permission denied: HELLO: " + text;
            co_return ec;
        }
        // The credentials are never echoed: only the server's words.
        last_connect_diagnostic_ = "HELLO: " + text;
        // LOADING, BUSY and the like pass; anything else is retried as well.
        co_return ec == error::auth_failed ? ec : error_code(error::handshake_failed);
    }
    if (cfg_.database != 0 && replies[1].is_error()) {
        last_connect_diagnostic_ = "SELECT " + db + ": " + replies[1].str;
        // A database the server does not have stays missing; LOADING passes.
        last_connect_permanent_ = replies[1].str.substr(0, 7) != "LOADING";
        co_return error::handshake_failed;
    }
    if (check_role) {
        std::string role;
        if (!sentinel::role_is_master(replies.back(), role)) {
            last_connect_diagnostic_ =
                sentinel::to_string(server_) +
                (role == "slave" || role == "replica" ? std::string(" is a replica")
                                                      : " is not a primary (" + role + ")");
            co_return error::no_primary;
        }
    }
    // Anything the server sent beyond the handshake replies would be out of
    // step with the queue.
    if (parser_.has_reply()) co_return error::protocol_error;
    last_read_ = clock::now();
    co_return error_code{};
}

client_impl::awaitable<std::pair<error_code, std::size_t>> client_impl::read_some(char* data,
                                                                           std::size_t size) {
    // The local copy keeps the streams alive while the read is pending.
    const auto conn = conn_;
    if (!conn) co_return std::pair{error_code(error::connection_lost), std::size_t{0}};
    auto buffer = asio::buffer(data, size);
    if (conn->tls) {
        auto [ec, n] = co_await conn->tls->async_read_some(buffer, use_nothrow);
        co_return std::pair{ec, n};
    }
    auto [ec, n] = co_await conn->socket.async_read_some(buffer, use_nothrow);
    co_return std::pair{ec, n};
}

client_impl::awaitable<std::pair<error_code, std::size_t>> client_impl::write_all(const std::string& data) {
    const auto conn = conn_;
    if (!conn) co_return std::pair{error_code(error::connection_lost), std::size_t{0}};
    if (conn->tls) {
        auto [ec, n] = co_await asio::async_write(*conn->tls, asio::buffer(data), use_nothrow);
        co_return std::pair{ec, n};
    }
    auto [ec, n] = co_await asio::async_write(conn->socket, asio::buffer(data), use_nothrow);
    co_return std::pair{ec, n};
}

void client_impl::handle_reply(reply&& r) {
    completions done;
    switch (queue_.on_reply(std::move(r), done)) {
    case request_queue::match_result::matched:
        stats_.replies.fetch_add(1, std::memory_order_relaxed);
        run_completions(done);
        break;
    case request_queue::match_result::push:
        stats_.pushes.fetch_add(1, std::memory_order_relaxed);
        for_each_listener([&](connection_listener& l) { l.on_push(r); });
        break;
    case request_queue::match_result::unexpected:
        // on_reply left r intact: it did not match anything.
        logger_->error("unsolicited reply {}; resetting the connection", to_string(r));
        close_socket();
        break;
    }
}

client_impl::awaitable<error_code> client_impl::reader() {
    // Once this ends the connection is going: no write may start on it
    // while the race unwinds (see stop_writing).
    stop_writing on_exit{*this};
    std::array<char, 16 * 1024> buf;
    for (;;) {
        // The socket is read here rather than through read_some(): one
        // coroutine frame and resumption less per read on the reply path.
        // The local copy keeps the streams alive while the read is pending.
        const auto conn = conn_;
        if (!conn) co_return error::connection_lost;
        const auto buffer = asio::buffer(buf);
        // Two plain statements: g++ 12 miscompiles co_await inside ?:.
        error_code ec;
        std::size_t n = 0;
        if (conn->tls)
            std::tie(ec, n) = co_await conn->tls->async_read_some(buffer, use_nothrow);
        else
            std::tie(ec, n) = co_await conn->socket.async_read_some(buffer, use_nothrow);
        if (ec) co_return ec;
        last_read_ = clock::now();
        error_code pec;
        parser_.consume(std::string_view(buf.data(), n), pec);
        // Replies parsed before an error are still delivered in order.
        if (!handle_replies()) co_return error::protocol_error;  // an unexpected reply closed it
        if (pec) {
            logger_->error("protocol error: {}", parser_.diagnostic());
            // The command whose reply this was hears why; the rest of the
            // connection's commands fail (or are retried) as on any drop.
            completions done;
            queue_.on_bad_reply(pec, done);
            run_completions(done);
            co_return pec;
        }
    }
}

bool client_impl::handle_replies() {
    // Handlers resumed here push their next commands; push_request sends
    // each full slice of them, and the rest goes out after the last reply.
    in_reader_ = true;
    struct reset {
        bool& flag;
        ~reset() { flag = false; }
    } guard{in_reader_};
    while (parser_.has_reply()) {
        handle_reply(parser_.pop());
        if (!conn_) return false;
    }
    in_reader_ = false;
    slice_ = first_slice;
    flush();
    return true;
}

client_impl::awaitable<error_code> client_impl::writer() {
    // The writing itself is flush()'s; this only ends the connection when a
    // write fails, so that the reader and the health check end with it.
    // Checked before every wait too: flush() can fail before this starts.
    for (;;) {
        if (stopped()) co_return error::client_stopped;
        if (write_error_) co_return write_error_;
        if (!conn_) co_return error::connection_lost;
        write_signal_.expires_at(clock::time_point::max());
        auto [ec] = co_await write_signal_.async_wait(use_nothrow);
        (void)ec;  // a cancelled wait is the signal
    }
}

client_impl::awaitable<error_code> client_impl::health_check() {
    stop_writing on_exit{*this};
    asio::steady_timer timer(executor_);
    const auto interval = cfg_.health_check_interval;
    for (;;) {
        timer.expires_after(interval);
        auto [ec] = co_await timer.async_wait(use_nothrow);
        if (ec) co_return ec;
        if (clock::now() - last_read_ < interval) continue;
        // Quiet for a whole interval: ask. PING is answered even while the
        // connection is subscribed under RESP3.
        auto [pec, r] = co_await asio::async_initiate<decltype(use_nothrow),
                                                      void(error_code, reply)>(
            [this](auto handler) {
                exec_options opts;
                opts.timeout = cfg_.command_timeout;
                push_request(command{"PING"}.payload(), opts, exec_handler(std::move(handler)));
            },
            use_nothrow);
        if (pec == error::timeout || pec == error::not_connected) {
            logger_->warn("health check: no PING reply within {} ms",
                          std::chrono::duration_cast<std::chrono::milliseconds>(
                              cfg_.command_timeout)
                              .count());
            co_return error::timeout;
        }
        if (pec) co_return pec;
    }
}

client_impl::awaitable<void> client_impl::expire_loop() {
    auto self = shared_from_this();
    while (!stopped()) {
        expire_timer_.expires_at(queue_.next_deadline());
        co_await expire_timer_.async_wait(use_nothrow);
        if (stopped()) break;
        completions done;
        // A command that timed out while the client could not connect says so.
        const error_code ec = connected() ? error_code(error::timeout)
                                          : error_code(error::not_connected);
        std::size_t written = 0;
        queue_.expire(clock::now(), ec, done, &written);
        if (!done.empty()) {
            std::string name(done.front().name.view());
            note_error(ec, (name.empty() ? std::string("a command") : name) +
                               (ec == error::timeout ? ": no reply within its timeout"
                                                     : ": not connected within its timeout"));
        }
        run_completions(done);
        if (written > 0 && can_write_ && !stopped()) {
            // A written command got no reply in time: the replies ahead of
            // it are late (a stalled or trickling server), and every command
            // behind it waits for them. The stream is reset, so the
            // commands still queued go out on a fresh connection; a
            // server that trickles bytes can no longer keep them waiting.
            logger_->warn("{} written command(s) to {} got no reply in time; resetting the "
                          "connection",
                          written, escaped{peer()});
            fail_write(error::timeout);
        }
    }
}

}  // namespace detail

// ---- corolock::client ----

namespace {
// `cluster_ok`: a lock backend may be a Redis Cluster; a corolock::client,
// whose async_exec runs any command on one connection, may not.
config checked(config cfg, bool cluster_ok = false) {
    std::string why;
    if (auto ec = cfg.validate(why); ec) throw boost::system::system_error(ec, why);
    if (cfg.mode == topology::cluster && !cluster_ok)
        throw boost::system::system_error(
            make_error_code(error::invalid_argument),
            "corolock::client speaks to one server; for a Redis Cluster open a "
            "corolock::backend(executor, url) instead (see docs/topologies.md)");
    return cfg;
}
}  // namespace

client::client(executor_type ex, config cfg)
    : impl_(std::make_shared<detail::client_impl>(ex, checked(std::move(cfg)))) {
    impl_->start();
}

client::client(executor_type ex, std::string_view url) : client(ex, config::from_url(url)) {}

metrics_snapshot detail::client_impl::read_metrics() const {
    auto m = metrics_.snapshot();
    const auto connects = stats_.connects.load(std::memory_order_relaxed);
    m.reconnects = connects > 0 ? connects - 1 : 0;
    m.commands_in_flight = stats_.queued.load(std::memory_order_relaxed);
    if (router_) {
        constexpr auto relaxed = std::memory_order_relaxed;
        const auto& c = router_->counters();
        m.cluster_moved = c.moved.load(relaxed);
        m.cluster_ask = c.ask.load(relaxed);
        m.cluster_retries = c.tryagain.load(relaxed) + c.clusterdown.load(relaxed);
        const auto reads = c.refreshes.load(relaxed);
        m.cluster_map_refreshes = reads > 0 ? reads - 1 : 0;
    }
    return m;
}

metrics_snapshot client::metrics() const noexcept {
    return impl_ ? impl_->read_metrics() : metrics_snapshot{};
}

backend client::lock_backend() const noexcept {
    return backend(impl_ ? impl_->lock_backend().shared() : nullptr, false);
}

std::shared_ptr<detail::lock_backend> detail::connect_redis(boost::asio::any_io_executor ex,
                                                            std::string_view url,
                                                            std::string_view holder_label) {
    config cfg = config::from_url(url);
    cfg.holder_label = holder_label;
    return connect_redis(std::move(ex), std::move(cfg));
}

std::shared_ptr<detail::lock_backend> detail::connect_redis(boost::asio::any_io_executor ex,
                                                            config cfg) {
    // A backend only takes locks: a server may make it hold a megabyte per
    // reply, not the 64 MiB a general client allows (limits set are kept).
    cfg.use_lock_only_limits();
    auto impl = std::make_shared<detail::client_impl>(ex, checked(std::move(cfg), true));
    impl->start();
    return impl->lock_backend().shared();
}

client::~client() {
    if (impl_) impl_->stop();
}

client::executor_type client::get_executor() const noexcept { return impl_->get_executor(); }
const config& client::get_config() const noexcept { return impl_->cfg(); }
void client::stop() noexcept {
    if (impl_) impl_->stop();
}
bool client::is_connected() const noexcept { return impl_ && impl_->connected(); }
client_stats client::stats() const { return impl_ ? impl_->stats() : client_stats{}; }
error_detail client::last_error() const { return impl_ ? impl_->last_error() : error_detail{}; }

void client::initiate_exec::start(boost::asio::any_completion_handler<exec_signature> handler,
                                  command cmd) const {
    detail::client_impl::exec_options opts;
    opts.idempotent = cmd.is_idempotent();
    const auto name = cmd.name();
    if (name == "SUBSCRIBE" || name == "UNSUBSCRIBE" || name == "PSUBSCRIBE" ||
        name == "PUNSUBSCRIBE" || name == "SSUBSCRIBE" || name == "SUNSUBSCRIBE") {
        // Answered by a confirmation push per channel; one channel per command.
        opts.kind = detail::reply_kind::subscribe;
    }
    impl->exec(cmd.payload(), opts, std::move(handler));
}

}  // namespace corolock
