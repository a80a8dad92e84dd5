#include "etcd/codec.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/parser.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <array>
#include <new>
#include <charconv>
#include <limits>

namespace corolock::detail::etcd {

std::string prefix_end(const std::string& key) {
    std::string end = key;
    while (!end.empty()) {
        auto& last = reinterpret_cast<unsigned char&>(end.back());
        if (last < 0xff) {
            ++last;
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');  // every key: etcd's "\0" range end
}

}  // namespace corolock::detail::etcd

namespace corolock::detail::etcd::codec {

namespace json = boost::json;

namespace {

constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) noexcept {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// A failed decode: thrown inside this file only, caught by each decoder.
struct bad_field {
    error_code code;
    std::string message;
};

[[noreturn]] void fail(std::string message, error code = error::unexpected_reply) {
    throw bad_field{code, std::move(message)};
}

const json::object& as_object(const json::value& v, const char* what) {
    if (!v.is_object()) fail(std::string(what) + ": not an object");
    return v.get_object();
}

// An int64 field: a JSON string of decimal digits (as the gateway sends
// them) or a JSON integer; absent means 0 (proto3 leaves zeros out).
std::int64_t int_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return 0;
    if (v->is_int64()) return v->get_int64();
    if (v->is_uint64()) fail(std::string(name) + ": out of range", error::reply_too_large);
    if (v->is_string()) {
        const auto& s = v->get_string();
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec == std::errc::result_out_of_range)
            fail(std::string(name) + ": out of range", error::reply_too_large);
        if (ec != std::errc{} || end != s.data() + s.size() || s.empty())
            fail(std::string(name) + ": not an integer");
        return n;
    }
    fail(std::string(name) + ": not an integer");
}

std::uint64_t uint_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return 0;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    if (v->is_string()) {
        const auto& s = v->get_string();
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec == std::errc::result_out_of_range)
            fail(std::string(name) + ": out of range", error::reply_too_large);
        if (ec != std::errc{} || end != s.data() + s.size() || s.empty())
            fail(std::string(name) + ": not an unsigned integer");
        return n;
    }
    fail(std::string(name) + ": not an unsigned integer");
}

bool bool_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return false;
    if (!v->is_bool()) fail(std::string(name) + ": not a boolean");
    return v->get_bool();
}

std::string bytes_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return {};
    if (!v->is_string()) fail(std::string(name) + ": not a string");
    auto decoded = base64_decode(v->get_string());
    if (!decoded) fail(std::string(name) + ": not valid base64");
    return std::move(*decoded);
}

std::string text_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return {};
    if (!v->is_string()) fail(std::string(name) + ": not a string");
    return std::string(v->get_string());
}

const json::array* array_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return nullptr;
    if (!v->is_array()) fail(std::string(name) + ": not an array");
    return &v->get_array();
}

const json::object* object_field(const json::object& o, const char* name) {
    const auto* v = o.if_contains(name);
    if (!v || v->is_null()) return nullptr;
    return &as_object(*v, name);
}

response_header header_of(const json::object& o) {
    const auto* h = object_field(o, "header");
    if (!h) fail("header: missing");
    response_header out;
    out.revision = int_field(*h, "revision");
    out.member_id = uint_field(*h, "member_id");
    out.raft_term = int_field(*h, "raft_term");
    return out;
}

key_value kv_of(const json::value& v) {
    const auto& o = as_object(v, "kv");
    key_value kv;
    kv.key = bytes_field(o, "key");
    kv.value = bytes_field(o, "value");
    kv.create_revision = int_field(o, "create_revision");
    kv.mod_revision = int_field(o, "mod_revision");
    kv.version = int_field(o, "version");
    kv.lease = int_field(o, "lease");
    return kv;
}

range_result range_of(const json::object& o) {
    range_result r;
    r.header = header_of(o);
    if (const auto* kvs = array_field(o, "kvs")) {
        r.kvs.reserve(kvs->size());
        for (const auto& kv : *kvs) r.kvs.push_back(kv_of(kv));
    }
    r.count = int_field(o, "count");
    r.more = bool_field(o, "more");
    return r;
}

// The memory a decoded JSON value may take: every allocation is counted,
// and one past the limit throws over_limit instead.
struct over_limit : std::bad_alloc {
    const char* what() const noexcept override { return "decoded JSON over its memory limit"; }
};

class bounded_resource final : public json::memory_resource {
public:
    explicit bounded_resource(std::size_t limit) noexcept : limit_(limit) {}

private:
    // Boost.JSON asks for at most the default new alignment; a larger one
    // goes to the aligned forms, each freed as it was allocated.
    static constexpr std::size_t plain = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
    void* do_allocate(std::size_t n, std::size_t align) override {
        if (n > limit_ - used_) throw over_limit();
        void* p = align <= plain ? ::operator new(n) : ::operator new(n, std::align_val_t(align));
        used_ += n;
        return p;
    }
    void do_deallocate(void* p, std::size_t n, std::size_t align) override {
        if (align <= plain) ::operator delete(p);
        else ::operator delete(p, std::align_val_t(align));
        used_ -= n;
    }
    bool do_is_equal(const json::memory_resource& other) const noexcept override {
        return this == &other;
    }

    std::size_t limit_;
    std::size_t used_ = 0;
};

json::storage_ptr bounded_storage() {
    return json::make_shared_resource<bounded_resource>(max_decoded_bytes);
}

decode_error too_large() {
    return {error::reply_too_large,
            "the response would take more than " + std::to_string(max_decoded_bytes >> 20) +
                " MiB once decoded"};
}

template <class F>
std::optional<decode_error> decode_with(std::string_view body, F&& f) {
    json::error_code jec;
    json::parse_options opts;
    opts.max_depth = 32;
    try {
        // Both bounded: the value, and the parser's temporary stack, which
        // holds an array's elements until the array closes.
        json::parser p(bounded_storage(), opts);
        p.reset(bounded_storage());
        p.write(body.data(), body.size(), jec);
        if (jec) return decode_error{error::protocol_error, "invalid JSON: " + jec.message()};
        const json::value v = p.release();
        f(as_object(v, "response"));
    } catch (const bad_field& e) {
        return decode_error{e.code, e.message};
    } catch (const over_limit&) {
        return too_large();
    }
    return std::nullopt;
}

std::string i64(std::int64_t n) { return std::to_string(n); }

json::object range_json(const range_request& r) {
    json::object o;
    o["key"] = base64_encode(r.key);
    if (!r.range_end.empty()) o["range_end"] = base64_encode(r.range_end);
    if (r.limit > 0) o["limit"] = i64(r.limit);
    if (r.keys_only) o["keys_only"] = true;
    if (r.count_only) o["count_only"] = true;
    if (r.sort_by_create_revision) {
        o["sort_order"] = "ASCEND";
        o["sort_target"] = "CREATE";
    }
    if (r.max_create_revision > 0) o["max_create_revision"] = i64(r.max_create_revision);
    if (r.revision > 0) o["revision"] = i64(r.revision);
    return o;
}

json::object op_json(const txn_op& op) {
    json::object o;
    if (const auto* r = std::get_if<range_request>(&op)) {
        o["request_range"] = range_json(*r);
    } else if (const auto* p = std::get_if<put_request>(&op)) {
        json::object put;
        put["key"] = base64_encode(p->key);
        put["value"] = base64_encode(p->value);
        if (p->lease != 0) put["lease"] = i64(p->lease);
        o["request_put"] = std::move(put);
    } else {
        const auto& d = std::get<delete_request>(op);
        json::object del;
        del["key"] = base64_encode(d.key);
        if (!d.range_end.empty()) del["range_end"] = base64_encode(d.range_end);
        o["request_delete_range"] = std::move(del);
    }
    return o;
}

const char* target_name(compare::target t) {
    switch (t) {
        case compare::target::create_revision: return "CREATE";
        case compare::target::mod_revision: return "MOD";
        case compare::target::version: return "VERSION";
        case compare::target::lease: return "LEASE";
    }
    return "CREATE";
}

const char* target_field(compare::target t) {
    switch (t) {
        case compare::target::create_revision: return "create_revision";
        case compare::target::mod_revision: return "mod_revision";
        case compare::target::version: return "version";
        case compare::target::lease: return "lease";
    }
    return "create_revision";
}

const char* op_name(compare::op r) {
    switch (r) {
        case compare::op::equal: return "EQUAL";
        case compare::op::greater: return "GREATER";
        case compare::op::less: return "LESS";
        case compare::op::not_equal: return "NOT_EQUAL";
    }
    return "EQUAL";
}

json::array ops_json(const std::vector<txn_op>& ops) {
    json::array a;
    for (const auto& op : ops) a.push_back(op_json(op));
    return a;
}

txn_op_result op_result_of(const json::value& v) {
    const auto& o = as_object(v, "responses[]");
    if (const auto* r = object_field(o, "response_range")) return range_of(*r);
    if (const auto* p = object_field(o, "response_put")) return put_result{header_of(*p)};
    if (const auto* d = object_field(o, "response_delete_range"))
        return delete_result{header_of(*d), int_field(*d, "deleted")};
    fail("responses[]: no known response");
}

watch_update watch_update_of(const json::object& msg) {
    if (const auto* err = object_field(msg, "error")) {
        fail("watch: " + text_field(*err, "message"), error::server_error);
    }
    const auto* r = object_field(msg, "result");
    if (!r) fail("watch: no result");
    if (bool_field(*r, "canceled")) {
        std::string why = text_field(*r, "cancel_reason");
        if (const auto rev = int_field(*r, "compact_revision"); rev > 0)
            why = "compacted at revision " + std::to_string(rev);
        fail("watch canceled by the server" + (why.empty() ? std::string() : ": " + why),
             error::server_error);
    }
    watch_update u;
    u.header = header_of(*r);
    u.created = bool_field(*r, "created");
    if (const auto* events = array_field(*r, "events")) {
        for (const auto& e : *events) {
            const auto& eo = as_object(e, "events[]");
            watch_event ev;
            const auto type = text_field(eo, "type");
            if (type == "DELETE") {
                ev.type = watch_event::kind::del;
            } else if (!type.empty() && type != "PUT") {
                fail("events[].type: unknown: " + type.substr(0, 32));
            }
            if (const auto* kv = eo.if_contains("kv")) ev.kv = kv_of(*kv);
            u.events.push_back(std::move(ev));
        }
    }
    return u;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const auto n = (std::uint32_t(std::uint8_t(bytes[i])) << 16) |
                       (std::uint32_t(std::uint8_t(bytes[i + 1])) << 8) | std::uint8_t(bytes[i + 2]);
        out += alphabet[n >> 18];
        out += alphabet[(n >> 12) & 63];
        out += alphabet[(n >> 6) & 63];
        out += alphabet[n & 63];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        std::uint32_t n = std::uint32_t(std::uint8_t(bytes[i])) << 16;
        if (rest == 2) n |= std::uint32_t(std::uint8_t(bytes[i + 1])) << 8;
        out += alphabet[n >> 18];
        out += alphabet[(n >> 12) & 63];
        out += rest == 2 ? alphabet[(n >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
        if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "xx=y"
        std::uint32_t n = 0;
        for (int k = 0; k < 4 - pad; ++k) {
            const int s = sextet(text[i + static_cast<std::size_t>(k)]);
            if (s < 0) return std::nullopt;
            n |= std::uint32_t(s) << (18 - 6 * k);
        }
        // Canonical only: the bits below the last byte must be zero.
        if ((pad == 1 && (n & 0xff) != 0) || (pad == 2 && (n & 0xffff) != 0)) return std::nullopt;
        out += static_cast<char>(n >> 16);
        if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
        if (pad < 1) out += static_cast<char>(n & 0xff);
    }
    return out;
}

std::string encode_range(const range_request& req) { return json::serialize(range_json(req)); }

std::string encode_txn(const txn_request& req) {
    json::array compares;
    for (const auto& c : req.compares) {
        json::object o;
        o["key"] = base64_encode(c.key);
        o["target"] = target_name(c.what);
        o["result"] = op_name(c.relation);
        o[target_field(c.what)] = i64(c.operand);
        compares.push_back(std::move(o));
    }
    json::object o;
    o["compare"] = std::move(compares);
    o["success"] = ops_json(req.success);
    o["failure"] = ops_json(req.failure);
    return json::serialize(o);
}

std::string encode_lease_grant(std::int64_t ttl_seconds) {
    return json::serialize(json::object{{"TTL", i64(ttl_seconds)}});
}

std::string encode_lease_id(std::int64_t id) {
    return json::serialize(json::object{{"ID", i64(id)}});
}

std::string encode_lease_timetolive(std::int64_t id) {
    return json::serialize(json::object{{"ID", i64(id)}, {"keys", false}});
}

std::string encode_authenticate(std::string_view name, std::string_view password) {
    return json::serialize(json::object{{"name", name}, {"password", password}});
}

std::string encode_watch_create(const watch_request& req) {
    json::object c;
    c["key"] = base64_encode(req.key);
    if (!req.range_end.empty()) c["range_end"] = base64_encode(req.range_end);
    if (req.start_revision > 0) c["start_revision"] = i64(req.start_revision);
    return json::serialize(json::object{{"create_request", std::move(c)}});
}

std::optional<decode_error> decode_range(std::string_view body, range_result& out) {
    return decode_with(body, [&](const json::object& o) { out = range_of(o); });
}

std::optional<decode_error> decode_txn(std::string_view body, txn_result& out) {
    return decode_with(body, [&](const json::object& o) {
        txn_result r;
        r.header = header_of(o);
        r.succeeded = bool_field(o, "succeeded");
        if (const auto* rs = array_field(o, "responses"))
            for (const auto& v : *rs) r.responses.push_back(op_result_of(v));
        out = std::move(r);
    });
}

std::optional<decode_error> decode_lease_grant(std::string_view body, lease_grant_result& out) {
    return decode_with(body, [&](const json::object& o) {
        lease_grant_result r;
        r.header = header_of(o);
        r.id = int_field(o, "ID");
        r.ttl = int_field(o, "TTL");
        if (const auto e = text_field(o, "error"); !e.empty()) fail(e, error::server_error);
        if (r.id == 0) fail("ID: missing");
        out = r;
    });
}

std::optional<decode_error> decode_lease_keepalive(std::string_view body,
                                                   lease_keepalive_result& out) {
    return decode_with(body, [&](const json::object& o) {
        if (const auto* err = object_field(o, "error"))
            fail("keepalive: " + text_field(*err, "message"), error::server_error);
        const auto* r = object_field(o, "result");
        if (!r) fail("result: missing");
        lease_keepalive_result k;
        k.header = header_of(*r);
        k.id = int_field(*r, "ID");
        k.ttl = int_field(*r, "TTL");
        out = k;
    });
}

std::optional<decode_error> decode_lease_revoke(std::string_view body, lease_revoke_result& out) {
    return decode_with(body, [&](const json::object& o) { out.header = header_of(o); });
}

std::optional<decode_error> decode_lease_timetolive(std::string_view body, lease_ttl_result& out) {
    return decode_with(body, [&](const json::object& o) {
        lease_ttl_result r;
        r.header = header_of(o);
        r.id = int_field(o, "ID");
        r.ttl = o.contains("TTL") ? int_field(o, "TTL") : 0;
        r.granted_ttl = int_field(o, "grantedTTL");
        out = r;
    });
}

std::optional<decode_error> decode_authenticate(std::string_view body, std::string& token) {
    return decode_with(body, [&](const json::object& o) {
        (void)header_of(o);
        auto t = text_field(o, "token");
        if (t.empty()) fail("token: missing");
        token = std::move(t);
    });
}

decode_error decode_error_body(unsigned http_status, std::string_view body) {
    std::int64_t code = -1;
    std::string message;
    json::error_code jec;
    const json::value v = json::parse(body, jec);
    if (!jec && v.is_object()) {
        try {
            const auto& o = v.get_object();
            code = int_field(o, "code");
            message = text_field(o, "message");
            if (message.empty()) message = text_field(o, "error");
        } catch (const bad_field&) {
            code = -1;
        }
    }
    if (message.empty()) {
        message = "HTTP " + std::to_string(http_status);
        if (!body.empty()) message += ": " + std::string(body.substr(0, 200));
    }
    constexpr std::int64_t not_found = 5, permission_denied = 7, unauthenticated = 16,
                           invalid_argument = 3;
    if (code == unauthenticated || http_status == 401 ||
        (code == invalid_argument && message.find("authentication failed") != std::string::npos))
        return {error::auth_failed, std::move(message)};
    if (code == permission_denied) return {error::no_permission, std::move(message)};
    if (code == not_found) return {error::expired, std::move(message)};
    return {error::server_error, std::move(message)};
}

bool is_stale_token(const decode_error& e) {
    return e.code == error::auth_failed &&
           (e.message.find("invalid auth token") != std::string::npos ||
            e.message.find("token") != std::string::npos ||
            e.message.find("user name is empty") != std::string::npos);
}

// The parser's temporary stack (an open array's elements) is bounded too.
watch_decoder::watch_decoder() : parser_(bounded_storage()) { parser_.reset(bounded_storage()); }

std::optional<decode_error> watch_decoder::feed(std::string_view bytes,
                                                std::vector<watch_update>& out) {
    if (failed_) return decode_error{error::protocol_error, "watch stream already failed"};
    while (!bytes.empty()) {
        json::error_code jec;
        std::size_t n = 0;
        try {
            n = parser_.write_some(bytes.data(), bytes.size(), jec);
        } catch (const over_limit&) {
            failed_ = true;
            return too_large();
        }
        if (jec) {
            failed_ = true;
            return decode_error{error::protocol_error, "invalid JSON in watch stream: " + jec.message()};
        }
        pending_ += n;
        bytes.remove_prefix(n);
        if (pending_ > max_message) {
            failed_ = true;
            return decode_error{error::reply_too_large, "watch message over 16 MiB"};
        }
        if (!parser_.done()) continue;
        const json::value v = parser_.release();
        parser_.reset(bounded_storage());
        pending_ = 0;
        try {
            out.push_back(watch_update_of(as_object(v, "watch message")));
        } catch (const bad_field& e) {
            failed_ = true;
            return decode_error{e.code, e.message};
        }
    }
    return std::nullopt;
}

}  // namespace corolock::detail::etcd::codec
