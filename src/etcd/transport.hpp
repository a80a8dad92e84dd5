// The etcd v3 operations a lock backend needs, behind an interface, so that
// the HTTP/JSON gateway transport (gateway.hpp) can later be replaced by a
// gRPC one without touching the lock protocol.
//
// Every operation completes exactly once, on the transport's strand, with
// (error_code, result). On failure the result is default-constructed and
// last_error() names the cause in words (the server's message, "connection
// refused", ...). Keys and values are bytes; revisions and lease ids int64.
#pragma once

#include <corolock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace corolock::detail::etcd {

// The header etcd returns with every response.
struct response_header {
    std::int64_t revision = 0;     // the store's revision when the request was served
    std::uint64_t member_id = 0;   // the member that served it
    std::int64_t raft_term = 0;
};

struct key_value {
    std::string key;
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t version = 0;
    std::int64_t lease = 0;
};

// The range_end that makes [key, end) cover every key starting with key.
std::string prefix_end(const std::string& key);

struct range_request {
    std::string key;
    std::string range_end;  // empty: just key; prefix_end(key): the prefix
    std::int64_t limit = 0;  // 0: no limit
    bool keys_only = false;
    bool count_only = false;
    bool sort_by_create_revision = false;  // ascending; otherwise key order
    std::int64_t max_create_revision = 0;  // 0: no bound
    std::int64_t revision = 0;  // read the store as of this revision; 0: the latest
};

struct range_result {
    response_header header;
    std::vector<key_value> kvs;
    std::int64_t count = 0;  // keys in the range (may exceed kvs.size() with a limit)
    bool more = false;
};

struct put_request {
    std::string key;
    std::string value;
    std::int64_t lease = 0;  // 0: no lease
};

struct delete_request {
    std::string key;
    std::string range_end;  // empty: just key
};

struct put_result {
    response_header header;
};

struct delete_result {
    response_header header;
    std::int64_t deleted = 0;
};

// One comparison of a transaction: target(key) <op> operand.
struct compare {
    enum class target { create_revision, mod_revision, version, lease };
    enum class op { equal, greater, less, not_equal };
    std::string key;
    target what = target::create_revision;
    op relation = op::equal;
    std::int64_t operand = 0;
};

using txn_op = std::variant<range_request, put_request, delete_request>;
using txn_op_result = std::variant<range_result, put_result, delete_result>;

// If every comparison holds, the success ops run, else the failure ops; the
// results come in the same order as the ops that ran.
struct txn_request {
    std::vector<compare> compares;
    std::vector<txn_op> success;
    std::vector<txn_op> failure;
};

struct txn_result {
    response_header header;
    bool succeeded = false;
    std::vector<txn_op_result> responses;
};

struct lease_grant_result {
    response_header header;
    std::int64_t id = 0;
    std::int64_t ttl = 0;  // seconds granted
};

struct lease_keepalive_result {
    response_header header;
    std::int64_t id = 0;
    std::int64_t ttl = 0;  // seconds from now; <= 0: the lease is gone
};

struct lease_revoke_result {
    response_header header;
};

struct lease_ttl_result {
    response_header header;
    std::int64_t id = 0;
    std::int64_t ttl = -1;  // remaining seconds; -1: the lease is gone
    std::int64_t granted_ttl = 0;
};

struct watch_request {
    std::string key;
    std::string range_end;         // empty: just key; prefix_end(key): the prefix
    std::int64_t start_revision = 0;  // 0: from now
};

struct watch_event {
    enum class kind { put, del };
    kind type = kind::put;
    key_value kv;  // for a delete: key and mod_revision only
};

// One message of a watch stream: the first has created = true (the watch is
// in place from then on), the later ones carry events.
struct watch_update {
    response_header header;
    bool created = false;
    std::vector<watch_event> events;
};

// Called for every update of a watch, on the transport's strand. The last
// call carries an error: operation_aborted after cancel(), client_stopped
// after stop(), or the failure that ended the stream (the cause in
// last_error(); a compacted start revision is a server_error). Never called
// again after that one.
using watch_handler = std::function<void(error_code, watch_update)>;

class watch_stream {
public:
    virtual ~watch_stream() = default;
    // Ends the stream promptly; the handler's last call follows (on the
    // strand). Safe from any thread, idempotent.
    virtual void cancel() = 0;
};

// The cause of the most recent failure, in words. Never holds a secret.
struct failure {
    error_code code;
    std::string message;
};

template <class Result>
using handler = boost::asio::any_completion_handler<void(error_code, Result)>;

class transport {
public:
    virtual ~transport() = default;

    virtual boost::asio::any_io_executor get_executor() const = 0;

    virtual void range(range_request req, handler<range_result> h) = 0;
    virtual void txn(txn_request req, handler<txn_result> h) = 0;
    virtual void lease_grant(std::int64_t ttl_seconds, handler<lease_grant_result> h) = 0;
    // One keep-alive: renews the lease and returns its new TTL.
    virtual void lease_keepalive(std::int64_t id, handler<lease_keepalive_result> h) = 0;
    virtual void lease_revoke(std::int64_t id, handler<lease_revoke_result> h) = 0;
    virtual void lease_timetolive(std::int64_t id, handler<lease_ttl_result> h) = 0;

    // Starts a watch; h sees its updates until it ends (see watch_handler).
    virtual std::shared_ptr<watch_stream> watch(watch_request req, watch_handler h) = 0;

    // Ends every request and watch (client_stopped) and refuses new ones.
    // Idempotent; safe from any thread.
    virtual void stop() = 0;

    virtual failure last_error() const = 0;
};

}  // namespace corolock::detail::etcd
