// Fuzz target for the etcd gateway's JSON codec (etcd/codec.hpp):
//  - every decode_* and decode_error_body takes any body without an
//    exception escaping; a failure has a code and a message;
//  - the watch stream decoder gives the same updates and the same error
//    code whether the input comes whole, in two pieces or byte by byte,
//    and stays failed after an error;
//  - base64: decode(encode(b)) == b for any bytes, and whatever decodes
//    encodes back to the same text (canonical only);
//  - round trips: a range response built from the input's fields with
//    Boost.JSON (numbers as strings or integers, bytes in base64) decodes
//    to those fields; encode_range and encode_txn write JSON whose keys
//    decode back to the request's.
#include "fuzz_check.hpp"
#include "targets.hpp"

#include "etcd/codec.hpp"

#include <boost/json.hpp>

#include <string>
#include <vector>

namespace {

namespace etcd = corolock::detail::etcd;
namespace codec = corolock::detail::etcd::codec;
namespace json = boost::json;

void check_failure(const std::optional<codec::decode_error>& e) {
    if (e) FUZZ_REQUIRE(e->code.failed() && !e->message.empty());
}

void decode_everything(std::string_view body) {
    try {
        etcd::range_result range;
        check_failure(codec::decode_range(body, range));
        etcd::txn_result txn;
        check_failure(codec::decode_txn(body, txn));
        etcd::lease_grant_result grant;
        check_failure(codec::decode_lease_grant(body, grant));
        etcd::lease_keepalive_result keepalive;
        check_failure(codec::decode_lease_keepalive(body, keepalive));
        etcd::lease_revoke_result revoke;
        check_failure(codec::decode_lease_revoke(body, revoke));
        etcd::lease_ttl_result ttl;
        check_failure(codec::decode_lease_timetolive(body, ttl));
        std::string token;
        check_failure(codec::decode_authenticate(body, token));
        for (const unsigned status : {400u, 401u, 403u, 404u, 500u, 503u}) {
            const auto e = codec::decode_error_body(status, body);
            FUZZ_REQUIRE(e.code.failed());
            (void)codec::is_stale_token(e);
        }
    } catch (...) {
        FUZZ_REQUIRE(!"a decoder threw");
    }
}

bool same_kv(const etcd::key_value& a, const etcd::key_value& b) {
    return a.key == b.key && a.value == b.value && a.create_revision == b.create_revision &&
           a.mod_revision == b.mod_revision && a.version == b.version && a.lease == b.lease;
}

bool same_header(const etcd::response_header& a, const etcd::response_header& b) {
    return a.revision == b.revision && a.member_id == b.member_id && a.raft_term == b.raft_term;
}

bool same_update(const etcd::watch_update& a, const etcd::watch_update& b) {
    if (!same_header(a.header, b.header) || a.created != b.created ||
        a.events.size() != b.events.size())
        return false;
    for (std::size_t i = 0; i < a.events.size(); ++i)
        if (a.events[i].type != b.events[i].type || !same_kv(a.events[i].kv, b.events[i].kv))
            return false;
    return true;
}

struct watch_outcome {
    std::vector<etcd::watch_update> updates;
    corolock::error_code ec;
};

watch_outcome watch(std::string_view bytes, std::size_t chunk) {
    codec::watch_decoder d;
    watch_outcome out;
    for (std::size_t at = 0; at < bytes.size(); at += chunk) {
        if (const auto e = d.feed(bytes.substr(at, chunk), out.updates)) {
            check_failure(e);
            out.ec = e->code;
            // Failed for good.
            std::vector<etcd::watch_update> more;
            FUZZ_REQUIRE(d.feed("{}", more) && more.empty());
            break;
        }
    }
    return out;
}

void check_watch(std::string_view bytes) {
    const auto whole = watch(bytes, bytes.size() + 1);
    for (const std::size_t chunk : {std::size_t(1), bytes.size() / 2 + 1}) {
        const auto got = watch(bytes, chunk);
        FUZZ_REQUIRE(got.ec == whole.ec);
        FUZZ_REQUIRE(got.updates.size() == whole.updates.size());
        for (std::size_t i = 0; i < got.updates.size(); ++i)
            FUZZ_REQUIRE(same_update(got.updates[i], whole.updates[i]));
    }
}

void check_base64(std::string_view bytes) {
    const std::string encoded = codec::base64_encode(bytes);
    FUZZ_REQUIRE(encoded.size() == (bytes.size() + 2) / 3 * 4);
    const auto back = codec::base64_decode(encoded);
    FUZZ_REQUIRE(back && *back == bytes);
    if (const auto decoded = codec::base64_decode(bytes))
        FUZZ_REQUIRE(codec::base64_encode(*decoded) == bytes);
}

// An int64 as the gateway writes it (a string) or as a JSON integer.
json::value number(std::int64_t n, bool as_string) {
    if (as_string) return json::value(std::to_string(n));
    return json::value(n);
}

void check_range_round_trip(corolock::fuzz::input in) {
    etcd::range_result want;
    const std::uint8_t style = in.take_byte();
    want.header.revision = static_cast<std::int64_t>(in.take_u64());
    want.header.member_id = in.take_u64();
    want.header.raft_term = static_cast<std::int64_t>(in.take_u64());
    want.count = static_cast<std::int64_t>(in.take_u64());
    want.more = style & 1;
    json::object header;
    header["revision"] = number(want.header.revision, style & 2);
    header["member_id"] = std::to_string(want.header.member_id);
    header["raft_term"] = number(want.header.raft_term, style & 4);
    json::array kvs;
    while (!in.empty() && want.kvs.size() < 8) {
        etcd::key_value kv;
        kv.key = in.take_until('\0');
        kv.value = in.take_until('\0');
        kv.create_revision = static_cast<std::int64_t>(in.take_u64());
        kv.mod_revision = static_cast<std::int64_t>(in.take_u64());
        kv.version = in.take_byte();
        kv.lease = static_cast<std::int64_t>(in.take_u64());
        json::object o;
        o["key"] = codec::base64_encode(kv.key);
        if (!kv.value.empty()) o["value"] = codec::base64_encode(kv.value);
        o["create_revision"] = number(kv.create_revision, style & 8);
        o["mod_revision"] = number(kv.mod_revision, style & 16);
        if (kv.version != 0) o["version"] = number(kv.version, style & 32);
        o["lease"] = number(kv.lease, style & 64);
        kvs.push_back(std::move(o));
        want.kvs.push_back(std::move(kv));
    }
    json::object body;
    body["header"] = std::move(header);
    if (!kvs.empty()) body["kvs"] = std::move(kvs);
    body["count"] = number(want.count, style & 128);
    if (want.more) body["more"] = true;
    etcd::range_result got;
    FUZZ_REQUIRE(!codec::decode_range(json::serialize(body), got));
    FUZZ_REQUIRE(same_header(got.header, want.header) && got.count == want.count &&
                 got.more == want.more && got.kvs.size() == want.kvs.size());
    for (std::size_t i = 0; i < got.kvs.size(); ++i) FUZZ_REQUIRE(same_kv(got.kvs[i], want.kvs[i]));
}

std::string decoded_key(const json::value& v) {
    const auto decoded = codec::base64_decode(std::string_view(v.at("key").as_string()));
    FUZZ_REQUIRE(decoded);
    return *decoded;
}

void check_encoders(corolock::fuzz::input in) {
    etcd::range_request range;
    range.key = in.take_until('\0');
    range.range_end = in.take_until('\0');
    range.limit = in.take_byte();
    const json::value r = json::parse(codec::encode_range(range));
    FUZZ_REQUIRE(decoded_key(r) == range.key);
    if (!range.range_end.empty())
        FUZZ_REQUIRE(*codec::base64_decode(std::string_view(r.at("range_end").as_string())) ==
                     range.range_end);

    etcd::txn_request txn;
    etcd::compare c;
    c.key = in.take_until('\0');
    c.operand = static_cast<std::int64_t>(in.take_u64());
    txn.compares.push_back(c);
    etcd::put_request put;
    put.key = in.take_until('\0');
    put.value = std::string(in.rest());
    txn.success.emplace_back(put);
    txn.failure.emplace_back(range);
    const json::value t = json::parse(codec::encode_txn(txn));
    FUZZ_REQUIRE(decoded_key(t.at("compare").at(0)) == c.key);
    FUZZ_REQUIRE(t.at("compare").at(0).at("create_revision").as_string() ==
                 std::to_string(c.operand));
    const auto& p = t.at("success").at(0).at("request_put");
    FUZZ_REQUIRE(decoded_key(p) == put.key);
    FUZZ_REQUIRE(*codec::base64_decode(std::string_view(p.at("value").as_string())) == put.value);
    FUZZ_REQUIRE(decoded_key(t.at("failure").at(0).at("request_range")) == range.key);
}

}  // namespace

int corolock_fuzz_etcd_codec(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    decode_everything(bytes);
    check_watch(bytes);
    check_base64(bytes);
    check_range_round_trip(corolock::fuzz::input(data, size));
    check_encoders(corolock::fuzz::input(data, size));
    return 0;
}
