// client_impl, part one: its life cycle (start, stop, abandon at the
// context's shutdown), listeners, errors and statistics, and the public
// corolock::client over it. connection_submit.cpp submits and writes
// commands; connection_loop.cpp runs the connection.
#include <corolock/client.hpp>
#include "redis/connection/client_impl.hpp"
#include "core/open_cloexec.hpp"
#include "core/logging.hpp"
#include "redis/lock/scripts.hpp"
#include "core/holder_record.hpp"
#include "redis/topology/cluster_router.hpp"

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

error_code classify_server_error(std::string_view message) noexcept {
    auto starts = [&](std::string_view prefix) { return message.substr(0, prefix.size()) == prefix; };
    if (starts("WRONGTYPE")) return error::wrong_type;
    if (starts("NOSCRIPT")) return error::no_script;
    // A fence's refusal (src/redis/fence/fence_library.cpp): a newer token was recorded.
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
      logger_(logger_or_default(cfg_.logger)),
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
    return detail::backend_access::handle(impl_ ? impl_->lock_backend().shared() : nullptr, false);
}

std::shared_ptr<detail::lock_backend> detail::connect_redis(boost::asio::any_io_executor ex,
                                                            std::string_view url,
                                                            const backend_config& settings) {
    config cfg = config::from_url(url);
    cfg.holder_label = settings.holder_label;
    if (settings.logger) cfg.logger = settings.logger;
    cfg.observer = settings.observer;
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
