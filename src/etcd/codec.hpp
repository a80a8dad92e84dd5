// The JSON of etcd's v3 HTTP gateway, without I/O: request bodies out,
// response bodies in. Keys and values travel base64 (standard alphabet,
// padded); int64 fields arrive as JSON strings and are also accepted as
// numbers. Every decoder rejects what does not fit (bad base64, a wrong
// type, an out-of-range number) with an error code and a message that says
// which field; fields proto3 leaves out when they are zero default to zero.
#pragma once

#include "etcd/transport.hpp"

#include <boost/json/stream_parser.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace corolock::detail::etcd::codec {

std::string base64_encode(std::string_view bytes);
// nullopt unless `text` is canonical padded base64.
std::optional<std::string> base64_decode(std::string_view text);

// Request bodies.
std::string encode_range(const range_request& req);
std::string encode_txn(const txn_request& req);
std::string encode_lease_grant(std::int64_t ttl_seconds);
std::string encode_lease_id(std::int64_t id);  // keepalive, revoke
std::string encode_lease_timetolive(std::int64_t id);
std::string encode_authenticate(std::string_view name, std::string_view password);
std::string encode_watch_create(const watch_request& req);

// What a decoder reports on failure: the code and what was wrong.
struct decode_error {
    error_code code;
    std::string message;
};

// Response bodies (HTTP 200). Each returns nullopt and fills `out` on
// success.
std::optional<decode_error> decode_range(std::string_view body, range_result& out);
std::optional<decode_error> decode_txn(std::string_view body, txn_result& out);
std::optional<decode_error> decode_lease_grant(std::string_view body, lease_grant_result& out);
// The gateway wraps a keep-alive answer as {"result": {...}}.
std::optional<decode_error> decode_lease_keepalive(std::string_view body,
                                                   lease_keepalive_result& out);
std::optional<decode_error> decode_lease_revoke(std::string_view body, lease_revoke_result& out);
std::optional<decode_error> decode_lease_timetolive(std::string_view body, lease_ttl_result& out);
std::optional<decode_error> decode_authenticate(std::string_view body, std::string& token);

// A gateway error body {"error":..., "code": <gRPC code>, "message": ...}
// (or any other non-200 answer) as a corolock code, with etcd's message:
// Unauthenticated and failed logins are auth_failed, PermissionDenied is
// no_permission, NotFound (a lease) is expired, the rest server_error.
decode_error decode_error_body(unsigned http_status, std::string_view body);

// True when the error says the auth token is invalid or expired, so that a
// new token and one retry can fix it.
bool is_stale_token(const decode_error& e);

// Splits a watch response stream into its messages, however the bytes are
// chunked: feed() whatever arrived, get the complete updates.
// What one decoded response or watch message may hold in memory (Boost.JSON
// values, arrays, strings): a body of 64 MiB of "{}," would otherwise
// decode into gigabytes. Past it: error::reply_too_large.
inline constexpr std::size_t max_decoded_bytes = 64u << 20;

class watch_decoder {
public:
    static constexpr std::size_t max_message = 16u << 20;

    watch_decoder();

    // Appends the updates completed by `bytes` to out. After an error the
    // stream is unusable. A server-side cancel (compaction, ...) is an error.
    std::optional<decode_error> feed(std::string_view bytes, std::vector<watch_update>& out);

private:
    boost::json::stream_parser parser_;
    std::size_t pending_ = 0;  // bytes of the message being parsed
    bool failed_ = false;
};

}  // namespace corolock::detail::etcd::codec
