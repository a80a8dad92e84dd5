// The etcd v3 transport over etcd's own HTTP/JSON gateway (etcd 3.4 serves it
// on the client port under /v3/...), with Boost.Beast on one strand.
//
// What a lock backend gets from it, and what each costs:
// - An uncontended acquire is one txn ("create my key if its create_revision
//   is 0, with lease L; then range the prefix sorted by create revision"): one
//   round trip on a pooled connection. Release is one txn (delete if
//   create_revision == R), or lease_revoke when the lease is the lock's own.
// - A lease needs a keep-alive every TTL/3 or so: lease_keepalive is one
//   unary POST /v3/lease/keepalive (the gateway answers one result and ends
//   the chunked response; the connection is kept). One lease per process can
//   serve all its locks, so the cost is per process, not per lock.
// - Waiting costs one watch per lock per process: each watch holds its own
//   HTTP connection (the gateway streams /v3/watch as chunked JSON objects on
//   it), so share one watch among a lock's local waiters.
// - A watch started at revision R+1 misses nothing after R; if R has been
//   compacted the stream ends with server_error ("compacted ...").
//
// Unary requests use a small pool of keep-alive HTTP/1.1 connections, one
// request in flight per connection, rather than pipelining: the gateway (Go's
// net/http) answers pipelined requests strictly in order, so one slow request
// (a txn waiting for a raft commit, a keep-alive to a busy leader) would hold
// up every request behind it, and a per-request timeout would have to close
// the connection and fail all of them. The pool grows to max_connections and
// then queues requests (bounded by their timeout).
//
// Failure handling: an idle connection found closed is dropped before use; a
// request that fails on a reused connection is retried once on a new one when
// it is idempotent (range, keep-alive, revoke, time-to-live, authenticate).
// A connect failure tries the next endpoint (each once per request), and the
// one that answers becomes the first choice. An auth token etcd calls invalid
// is renewed once (POST /v3/auth/authenticate) and the request retried.
#pragma once

#include "etcd/transport.hpp"

#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace corolock::detail::etcd {

struct gateway_options {
    std::vector<std::string> endpoints;  // "host:port", tried in order
    bool tls = false;                    // etcds://: system trust store, SNI, host name checked
    std::string ca_file;                 // a PEM CA bundle instead of the system store
    std::string username;                // empty: no authentication
    std::string password;
    std::chrono::milliseconds connect_timeout{5'000};  // per endpoint tried
    std::chrono::milliseconds request_timeout{5'000};  // whole request, queueing included
    std::size_t max_connections = 4;                   // unary pool; watches have their own
    // A watch that hears nothing (no event, no byte) for this long ends
    // with error::timeout, and its owner starts it again: a silent or
    // half-open connection is not kept for ever. Correctness does not
    // hang on it (a waiter also checks its predecessor's lease).
    std::chrono::milliseconds watch_idle_timeout{60'000};
};

class gateway final : public transport, public std::enable_shared_from_this<gateway> {
    struct private_tag {};

public:
    // Throws std::invalid_argument for no endpoint or a malformed one.
    static std::shared_ptr<gateway> create(boost::asio::any_io_executor ex, gateway_options opts);

    gateway(private_tag, boost::asio::any_io_executor ex, gateway_options opts);
    ~gateway() override;

    boost::asio::any_io_executor get_executor() const override { return strand_; }

    void range(range_request req, handler<range_result> h) override;
    void txn(txn_request req, handler<txn_result> h) override;
    void lease_grant(std::int64_t ttl_seconds, handler<lease_grant_result> h) override;
    void lease_keepalive(std::int64_t id, handler<lease_keepalive_result> h) override;
    void lease_revoke(std::int64_t id, handler<lease_revoke_result> h) override;
    void lease_timetolive(std::int64_t id, handler<lease_ttl_result> h) override;
    std::shared_ptr<watch_stream> watch(watch_request req, watch_handler h) override;
    void stop() override;
    failure last_error() const override;

    // For tests and metrics.
    std::size_t connections_opened() const noexcept { return opened_.load(); }  // ever, unary pool
    std::size_t authentications() const noexcept { return authentications_.load(); }

    struct impl;  // the coroutines: gateway_impl.hpp

private:
    friend struct impl;

    void record(error_code ec, std::string message);

    boost::asio::strand<boost::asio::any_io_executor> strand_;
    std::shared_ptr<impl> impl_;
    std::atomic<std::size_t> opened_{0};
    std::atomic<std::size_t> authentications_{0};
    mutable std::mutex error_mu_;
    failure last_error_;
};

}  // namespace corolock::detail::etcd
