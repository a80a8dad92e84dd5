// corolock::backend: a connection to a lock service, chosen by URL.
//
// Every backend gives the same lock: the same mutex, lock_options and guard
// (token, deadline, until_lost(), release()), the same async_acquire with any
// completion token. Which service holds the lock is the URL's scheme:
//
//   redis://[user:pass@]host[:port][/db]   one Redis server (config::from_url)
//   rediss://...                           the same over TLS
//   redis+sentinel://..., redis+cluster://... (or rediss+...)
//                                          Redis behind Sentinel, a Redis
//                                          Cluster (docs/topologies.md)
//   etcd://[user:pass@]host:port[,host:port...][/prefix]
//                                          an etcd cluster (v3 API, 3.4 or later)
//   etcds://...[?ca_file=PATH]             the same over TLS
//   ...?request_timeout_ms=N&connect_timeout_ms=N
//                                          etcd request and connect bounds
//                                          (default 5000 each)
//   postgresql://[user[:pass]@]host[:port]/db[?param=value...]
//   postgres://...                         a PostgreSQL 14+ database (libpq's
//                                          URI syntax; docs/postgresql.md),
//                                          when built with libpq
//   zk://host:port[,host:port...][/root][?session_timeout_ms=N]
//                                          a ZooKeeper ensemble (3.5 or later;
//                                          docs/backends.md), when built with
//                                          libzookeeper_st
//   redlock://[user:pass@]host[:port],host[:port],host[:port][/db][?query]
//   redlock+rediss://...                   RedLock over 3 or more independent
//                                          Redis servers sharing credentials
//                                          (the nodes' TLS too); the query's
//                                          node_timeout_ms=N is RedLock's, the
//                                          rest every node's (docs/redlock.md)
//
// docs/backends.md compares them and says which to choose.
//
//   corolock::backend locks(ioc.get_executor(), "redis://127.0.0.1:6379");
//   corolock::mutex m(locks, "orders:42");
//   auto g = co_await m.acquire();
//
// A corolock::client (Redis) is a backend too: client::lock_backend(). A
// Redis Cluster, which a client (one connection) cannot speak to, is opened
// as a backend: by URL, or from a config (backend(ex, cfg)) when settings
// the URL does not carry (TLS files, timeouts, a password read elsewhere)
// apply.
#pragma once

#include <corolock/export.hpp>

#include <corolock/detail/completion.hpp>
#include <corolock/error.hpp>
#include <corolock/metrics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/system_executor.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spdlog { class logger; }

namespace corolock {

struct config;

namespace detail {
class lock_backend;
struct backend_access;

// The initiation of backend::async_drain and client::async_drain (see
// detail/completion.hpp).
struct COROLOCK_API initiate_drain {
    using executor_type = boost::asio::any_io_executor;
    std::shared_ptr<lock_backend> impl;
    executor_type ex;  // the backend's; empty without one
    executor_type get_executor() const noexcept {
        return ex ? ex : executor_type(boost::asio::system_executor());
    }
    template <class Handler>
    void operator()(Handler&& handler, std::chrono::steady_clock::duration bound) const {
        auto h = erase_handler<void(error_code)>(std::forward<Handler>(handler), ex);
        start(std::move(h.handler), h.direct, bound);
    }
    void start(boost::asio::any_completion_handler<void(error_code)> handler, bool direct,
               std::chrono::steady_clock::duration bound) const;
};
}  // namespace detail

// Settings of a backend opened by URL that the URL does not carry.
struct backend_config {
    // Who this process is, for people reading a held lock (corolock status,
    // corolock list): stored with the host name and the process id beside
    // each lock this backend's handles acquire (see lock_holder). Free text,
    // at most max_holder_label_length bytes (longer is cut), as
    // config::holder_label; the CLI's run puts its command line here.
    std::string holder_label;
    // Logger for the backend's connection and lock events, as
    // config::logger: null means corolock's own logger, quiet unless
    // COROLOCK_LOG_LEVEL or spdlog::set_level raises it (it is registered
    // with spdlog as "corolock"). Every backend logs through it; RedLock's
    // nodes too.
    std::shared_ptr<spdlog::logger> logger{};
    // Told of the backend's lock events as they happen, as config::observer
    // (metrics.hpp: callbacks on the backend's strand, exceptions caught and
    // logged). Every backend: on_acquired, on_lost, on_release_found_gone;
    // on_renewal_failed where the backend renews (Redis, RedLock, etcd,
    // PostgreSQL: ZooKeeper's session keeps its locks without renewals);
    // on_reconnected where the backend reconnects (Redis and RedLock's
    // nodes). Null: nobody is told.
    std::shared_ptr<corolock::observer> observer{};
};

class COROLOCK_API backend {
public:
    using executor_type = boost::asio::any_io_executor;

    // Starts connecting at once (each backend reconnects by itself). Throws
    // boost::system::system_error with the reason as its text:
    // error::invalid_url for a malformed URL or an unknown scheme,
    // error::invalid_argument for a bad setting in it.
    backend(executor_type ex, std::string_view url);
    // The same, with settings the URL does not carry.
    backend(executor_type ex, std::string_view url, const backend_config& cfg);
    // A Redis backend from a config (config::from_url's, then adjusted), of
    // any topology: one server, Sentinel or Cluster. Its holder label is
    // cfg.holder_label. Throws system_error with error::invalid_argument
    // when cfg.validate() fails.
    backend(executor_type ex, const config& cfg);

    // RedLock (docs/redlock.md): one lock held on a majority of independent
    // Redis nodes, each any Redis URL above (3 or 5 of them). The mutex kind
    // only: the other kinds throw error::invalid_argument when made. Throws
    // as the URL constructor does for a bad URL, error::invalid_argument for
    // an empty list.
    static backend redlock(executor_type ex, const std::vector<std::string>& urls,
                           const backend_config& cfg = {});

    backend(backend&&) noexcept = default;
    backend& operator=(backend&&) noexcept;
    backend(const backend&) = delete;
    backend& operator=(const backend&) = delete;
    // Stops the backend if this handle owns it. Never throws, never blocks.
    ~backend();

    executor_type get_executor() const noexcept;
    // The URL scheme that names this kind of backend: "redis", "rediss",
    // "redis+sentinel", "redis+cluster" (or "rediss+..."), "etcd", "etcds",
    // "zk", "redlock".
    std::string_view scheme() const noexcept;
    // The lock layer's metrics (see metrics.hpp). Any thread.
    metrics_snapshot metrics() const noexcept;
    // Ends all background work; pending acquires and drains complete with
    // error::client_stopped. Idempotent, thread-safe, never blocks.
    void stop() noexcept;

    // Waits, at most `bound`, for the clean-up this backend does in the
    // background and had begun when this was called: releases of guards
    // dropped unreleased, the clean-up of lost tenures, and what acquires
    // given up (cancelled, failed, timed out) leave to do. On Redis that is
    // the release of a grant whose script was still on its way when the
    // acquire was cancelled; on etcd, the revoke of the abandoned acquire's
    // lease, which deletes its key. For a process about to exit: once this
    // completes with success, nothing those left on the server remains.
    //
    // Completes with success when that clean-up is done; it does not say
    // whether each step succeeded (a release that failed for a lost
    // connection counts as done: the server frees the lock when the lease
    // ends). error::drain_timeout when `bound` passes first (the clean-up
    // goes on); error::client_stopped after stop(), or without a backend.
    // Clean-up begun after the call, and acquires or releases still
    // running, are not waited for.
    //
    // Cancellation (any type): completes at once with operation_aborted.
    // The handler runs on its associated executor, never inside this call.
    template <class CompletionToken = detail::default_token>
    auto async_drain(std::chrono::steady_clock::duration bound,
                     CompletionToken&& token = {}) const {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiate_drain{impl_, get_executor()}, token, bound);
    }

private:
    friend struct detail::backend_access;

    // A handle on a backend made or owned elsewhere (see
    // client::lock_backend()): destroying it stops the backend only when
    // `owning`.
    backend(std::shared_ptr<detail::lock_backend> impl, bool owning) noexcept;

    std::shared_ptr<detail::lock_backend> impl_;
    bool owning_ = false;
};

namespace detail {
// How corolock's own layers, and the templates of admin.hpp and fence.hpp,
// reach what a backend handle hides from its users.
struct backend_access {
    static const std::shared_ptr<lock_backend>& impl(const backend& b) noexcept { return b.impl_; }
    static backend handle(std::shared_ptr<lock_backend> impl, bool owning) noexcept {
        return backend(std::move(impl), owning);
    }
};
}  // namespace detail

}  // namespace corolock
