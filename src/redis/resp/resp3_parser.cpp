#include "redis/resp/resp3_parser.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace corolock::detail {

namespace {

constexpr std::size_t default_max_bulk_length = 512u * 1024 * 1024;
constexpr std::size_t default_max_nesting_depth = 32;
constexpr std::size_t default_max_aggregate_size = 16u * 1024 * 1024;
constexpr std::size_t default_max_reply_size = 64u * 1024 * 1024;
// Header lines of numeric types are short; a longer one is garbage, and
// capping it keeps a stream without CRLF from growing the buffer forever.
constexpr std::size_t max_numeric_line = 128;
// An untrusted element count never reserves more than this up front; larger
// aggregates grow as their elements actually arrive.
constexpr std::size_t max_reserve = 256;
// Below this the buffer's capacity is not worth giving back; well above
// a socket read, so ordinary traffic never shrinks and regrows it.
constexpr std::size_t keep_capacity = 256 * 1024;
// How much of an offending line a diagnostic quotes.
constexpr std::size_t max_quoted = 32;

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

bool all_digits(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// Diagnostics end up in logs: never copy raw server bytes into them.
std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x21 && u <= 0x7e) return std::string("'") + c + "'";
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", u);
    return buf;
}

std::string quoted(std::string_view s) {
    std::string out = "\"";
    for (char c : s.substr(0, max_quoted)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
            out.push_back(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out.append(buf);
        }
    }
    out.push_back('"');
    if (s.size() > max_quoted) out.append("...");
    return out;
}

std::string header_of(char type) { return std::string(" in '") + type + "' header"; }

// Decimal fitting int64: an optional '-' (or '+' where the RESP3 grammar
// allows one, i.e. for integer values but not for lengths), then digits.
bool parse_int64(std::string_view s, bool allow_plus, std::int64_t& out) noexcept {
    // Most numbers on the wire are short and non-negative: lengths, counts,
    // small integers. Up to 18 digits cannot overflow.
    if (!s.empty() && s.size() <= 18 && is_digit(s.front())) {
        std::int64_t v = 0;
        for (char c : s) {
            if (!is_digit(c)) return false;
            v = v * 10 + (c - '0');
        }
        out = v;
        return true;
    }
    std::string_view digits = s;
    if (!s.empty() && (s.front() == '-' || (allow_plus && s.front() == '+'))) {
        digits.remove_prefix(1);
        // from_chars takes a '-' but not a '+'.
        if (s.front() == '+') s.remove_prefix(1);
    }
    if (!all_digits(digits)) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

// For a syntactically valid decimal that from_chars found out of range:
// whether it is too large (rather than too small). Compares the decimal
// exponent of its first significant digit with zero.
bool overflows(std::string_view mantissa, std::string_view exponent) noexcept {
    std::int64_t e = 0;
    const bool negative_exp = !exponent.empty() && exponent.front() == '-';
    if (!exponent.empty() && (exponent.front() == '-' || exponent.front() == '+'))
        exponent.remove_prefix(1);
    // Saturate: the line is capped, so anything this large is decisive.
    for (char c : exponent) e = std::min<std::int64_t>(e * 10 + (c - '0'), 1'000'000);
    if (negative_exp) e = -e;
    const std::size_t dot = std::min(mantissa.find('.'), mantissa.size());
    const std::size_t first = mantissa.find_first_not_of("0.");
    if (first == std::string_view::npos) return false;
    const auto magnitude = first < dot ? static_cast<std::int64_t>(dot - first - 1)
                                       : -static_cast<std::int64_t>(first - dot);
    return magnitude + e >= 0;
}

// RESP3 doubles: [+|-]digits[.digits][(e|E)[+|-]digits], or inf, -inf, nan.
// from_chars alone would also take "infinity", hex floats and ".5".
bool parse_double(std::string_view s, double& out) noexcept {
    bool negative = false;
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
        negative = s.front() == '-';
        s.remove_prefix(1);
    }
    if (s == "inf") {
        out = negative ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == "nan") {
        out = std::numeric_limits<double>::quiet_NaN();
        return true;
    }
    std::size_t i = 0;
    auto skip_digits = [&] {
        const std::size_t from = i;
        while (i < s.size() && is_digit(s[i])) ++i;
        return i > from;
    };
    if (!skip_digits()) return false;
    if (i < s.size() && s[i] == '.') {
        ++i;
        if (!skip_digits()) return false;
    }
    const std::size_t mantissa_end = i;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        if (!skip_digits()) return false;
    }
    if (i != s.size()) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc::result_out_of_range) {
        // Valid syntax, just beyond double: saturate instead of dropping the
        // connection; the exact text stays in reply::str.
        const auto exponent = mantissa_end < s.size() ? s.substr(mantissa_end + 1) : std::string_view();
        out = overflows(s.substr(0, mantissa_end), exponent) ? std::numeric_limits<double>::infinity()
                                                             : 0.0;
    } else if (ec != std::errc() || end != s.data() + s.size()) {
        return false;
    }
    if (negative) out = -out;
    return true;
}

bool is_big_number(std::string_view s) noexcept {
    if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
    return all_digits(s);
}

bool is_type_byte(char c) noexcept {
    switch (c) {
    case '+': case '-': case ':': case '$': case '*': case '_': case ',': case '#':
    case '(': case '!': case '=': case '%': case '~': case '>': case '|':
        return true;
    default:
        return false;
    }
}

}  // namespace

resp3_parser::resp3_parser(parser_limits limits) : limits_(limits) {
    if (limits_.max_bulk_length == 0) limits_.max_bulk_length = default_max_bulk_length;
    if (limits_.max_nesting_depth == 0) limits_.max_nesting_depth = default_max_nesting_depth;
    if (limits_.max_aggregate_size == 0) limits_.max_aggregate_size = default_max_aggregate_size;
    if (limits_.max_reply_size == 0) limits_.max_reply_size = default_max_reply_size;
}

void resp3_parser::reset() noexcept {
    // Swapped out rather than cleared: after a large reply, a reconnect
    // should not keep its buffer alive.
    std::string().swap(buffer_);
    pos_ = 0;
    scanned_ = 0;
    base_offset_ = 0;
    stack_.clear();
    pending_attributes_.clear();
    ready_.clear();
    reply_cost_ = 0;
    error_ = {};
    diagnostic_.clear();
}

reply resp3_parser::pop() {
    reply r = std::move(ready_.front());
    ready_.pop_front();
    return r;
}

void resp3_parser::compact() {
    const std::size_t tail = buffer_.size() - pos_;
    if (buffer_.capacity() > keep_capacity && buffer_.capacity() / 4 > tail) {
        // A large frame is gone: give its memory back. Copying the tail is
        // paid for by the growth that made the buffer this large.
        std::string smaller;
        smaller.reserve(std::max(tail, keep_capacity));
        smaller.append(buffer_, pos_, tail);
        buffer_.swap(smaller);
    } else if (pos_ > 0 && pos_ >= tail) {
        // Moving the tail costs no more than the bytes parsed before it, so
        // compaction stays linear overall and the buffer holds at most twice
        // the partial frame.
        buffer_.erase(0, pos_);
    } else {
        return;
    }
    base_offset_ += pos_;
    pos_ = 0;
}

void resp3_parser::consume(std::string_view data, error_code& ec) {
    if (error_) {
        ec = error_;
        return;
    }
    buffer_.append(data);
    // Each successful step consumes at least one header line, so this ends.
    for (;;) {
        switch (parse_one()) {
        case step::done: continue;
        case step::need_more:
            // Between calls, hold only the partial frame.
            compact();
            ec = {};
            return;
        case step::failed: ec = error_; return;
        }
    }
}

bool resp3_parser::over_reply_limit(std::size_t cost) const noexcept {
    return cost > limits_.max_reply_size || reply_cost_ > limits_.max_reply_size - cost;
}

resp3_parser::step resp3_parser::reply_limit_failure(std::size_t cost, std::size_t at) {
    return fail(error::reply_too_large,
                "reply would hold more than " + std::to_string(limits_.max_reply_size) +
                    " bytes in memory (" + std::to_string(reply_cost_) + " so far, next value " +
                    std::to_string(cost) + ")",
                at);
}

resp3_parser::step resp3_parser::fail(error e, std::string what, std::size_t at) {
    error_ = e;
    diagnostic_ = std::move(what) + " at byte " + std::to_string(base_offset_ + at);
    return step::failed;
}

reply& resp3_parser::emplace_value(resp3_type t) {
    // Built where it ends up, not moved there: the next element of the
    // innermost open aggregate, or the next ready reply.
    reply& r = stack_.empty() ? ready_.emplace_back() : stack_.back().node.elements.emplace_back();
    r.type = t;
    take_pending_attributes(r);
    return r;
}

void resp3_parser::take_pending_attributes(reply& r) {
    // A new value takes the attributes that preceded it (Redis sends them
    // only on client tracking, so the common case has none to move).
    if (pending_attributes_.empty()) return;
    r.attributes = std::move(pending_attributes_);
    pending_attributes_.clear();
}

void resp3_parser::value_placed() {
    // Walks up while the value completes its aggregate.
    while (!stack_.empty()) {
        open_aggregate& top = stack_.back();
        if (--top.remaining > 0) return;
        if (top.is_attribute) {
            // An attribute is not an element of its parent: it annotates the
            // next value at this level, together with any attribute that
            // came right before it.
            std::vector<reply> attrs = std::move(top.node.attributes);
            for (auto& e : top.node.elements) attrs.push_back(std::move(e));
            for (auto& e : pending_attributes_) attrs.push_back(std::move(e));
            pending_attributes_ = std::move(attrs);
            stack_.pop_back();
            return;
        }
        // Complete: it becomes the next element of its parent (which the
        // new element does not move: the parent's vector is not stack_), or
        // the next ready reply.
        reply& slot = stack_.size() > 1 ? stack_[stack_.size() - 2].node.elements.emplace_back()
                                        : ready_.emplace_back();
        slot = std::move(top.node);
        stack_.pop_back();
    }
}

resp3_parser::step resp3_parser::parse_one() {
    if (pos_ >= buffer_.size()) return step::need_more;
    // A new top-level value starts: the previous reply's memory is its
    // receiver's now.
    if (stack_.empty() && pending_attributes_.empty()) reply_cost_ = 0;
    const std::size_t start = pos_;
    const char type = buffer_[start];
    // Checked before the line is complete, so garbage fails at its first byte.
    if (!is_type_byte(type))
        return fail(error::protocol_error, "unknown RESP3 type byte " + printable(type), start);

    // The header line: type byte, text, CRLF. Simple strings, errors and big
    // numbers carry their value in the line, so they get the bulk limit,
    // and are charged to the reply as their bytes arrive: the line may be no
    // longer than the reply has room left for, so an unending line cannot
    // make the client buffer more than max_reply_size either. Every other
    // header is a short number.
    const bool long_line = type == '+' || type == '-' || type == '(';
    std::size_t line_cap = max_numeric_line;
    bool reply_room_caps = false;
    if (long_line) {
        // reply_cost_ never exceeds the limit (over_reply_limit).
        const std::size_t left = limits_.max_reply_size - reply_cost_;
        const std::size_t text_room = left > sizeof(reply) ? left - sizeof(reply) : 0;
        reply_room_caps = text_room < limits_.max_bulk_length;
        line_cap = reply_room_caps ? text_room : limits_.max_bulk_length;
    }
    auto too_long = [&] {
        if (reply_room_caps)
            return fail(error::reply_too_large,
                        "line longer than " + std::to_string(line_cap) + " bytes" +
                            header_of(type) + ": the reply would hold more than " +
                            std::to_string(limits_.max_reply_size) + " bytes in memory (" +
                            std::to_string(reply_cost_) + " so far)",
                        start);
        return fail(long_line ? error::reply_too_large : error::protocol_error,
                    "line longer than " + std::to_string(line_cap) + " bytes" + header_of(type),
                    start);
    };
    // The CR may come at most line_cap bytes after the type byte. Nothing
    // past that is looked at, so the error found does not depend on how
    // much of the stream has arrived.
    const std::size_t room = buffer_.size() - start - 1;
    const std::size_t scan_end = room > line_cap ? start + 2 + line_cap : buffer_.size();
    std::size_t cr = start + 1 + scanned_;
    while (cr < scan_end && buffer_[cr] != '\r' && buffer_[cr] != '\n') ++cr;
    if (cr == scan_end) {
        if (room > line_cap) return too_long();
        scanned_ = cr - start - 1;  // resume the scan here
        return step::need_more;
    }
    if (buffer_[cr] == '\n')
        return fail(error::protocol_error, "line ended by LF without CR" + header_of(type), cr);
    if (cr + 1 == buffer_.size()) {
        scanned_ = cr - start - 1;  // the CR is the last byte: resume at it
        return step::need_more;
    }
    if (buffer_[cr + 1] != '\n')
        return fail(error::protocol_error, "CR not followed by LF" + header_of(type), cr);
    scanned_ = 0;
    const std::string_view text(buffer_.data() + start + 1, cr - start - 1);
    const std::size_t after_line = cr + 2;

    // What the value costs in memory once parsed: its reply node, plus the
    // text it keeps (a bulk payload is added by parse_string).
    const bool keeps_text = long_line || type == ',';
    const std::size_t cost = sizeof(reply) + (keeps_text ? text.size() : 0);
    if (type != '$' && type != '!' && type != '=') {
        // Every other value is complete (or an aggregate opened) in this step.
        if (over_reply_limit(cost)) return reply_limit_failure(cost, start);
        reply_cost_ += cost;
    }

    switch (type) {
    case '+':
    case '-': {
        reply& r = emplace_value(type == '+' ? resp3_type::simple_string : resp3_type::simple_error);
        r.str.assign(text);
        pos_ = after_line;
        value_placed();
        return step::done;
    }
    case ':': {
        std::int64_t v = 0;
        if (!parse_int64(text, true, v))
            return fail(error::protocol_error, "invalid integer " + quoted(text) + header_of(type),
                        start);
        emplace_value(resp3_type::integer).integer = v;
        pos_ = after_line;
        value_placed();
        return step::done;
    }
    case '_': {
        if (!text.empty())
            return fail(error::protocol_error, "null with a payload " + quoted(text), start);
        pos_ = after_line;
        emplace_value(resp3_type::null);
        value_placed();
        return step::done;
    }
    case '#': {
        if (text != "t" && text != "f")
            return fail(error::protocol_error, "invalid boolean " + quoted(text) + header_of(type),
                        start);
        emplace_value(resp3_type::boolean).integer = text == "t" ? 1 : 0;
        pos_ = after_line;
        value_placed();
        return step::done;
    }
    case ',': {
        double d = 0;
        if (!parse_double(text, d))
            return fail(error::protocol_error, "invalid double " + quoted(text) + header_of(type),
                        start);
        reply& r = emplace_value(resp3_type::double_type);
        r.number = d;
        r.str.assign(text);
        pos_ = after_line;
        value_placed();
        return step::done;
    }
    case '(': {
        if (!is_big_number(text))
            return fail(error::protocol_error,
                        "invalid big number " + quoted(text) + header_of(type), start);
        emplace_value(resp3_type::big_number).str.assign(text);
        pos_ = after_line;
        value_placed();
        return step::done;
    }
    case '$':
    case '!':
    case '=':
        return parse_string(type, text, start, after_line);
    default:  // * % ~ > |
        return parse_aggregate(type, text, start, after_line);
    }
}

resp3_parser::step resp3_parser::parse_string(char type, std::string_view header,
                                              std::size_t start, std::size_t payload_at) {
    if (header == "?")
        return fail(error::protocol_error,
                    "streamed string" + header_of(type) + " (never sent by Redis) is not supported",
                    start);
    std::int64_t len = 0;
    if (!parse_int64(header, false, len))
        return fail(error::protocol_error, "invalid length " + quoted(header) + header_of(type),
                    start);
    if (len == -1 && type == '$') {  // the RESP2 null bulk string
        // A value like any other: its node is charged (as the null array's is).
        if (over_reply_limit(sizeof(reply))) return reply_limit_failure(sizeof(reply), start);
        reply_cost_ += sizeof(reply);
        pos_ = payload_at;
        emplace_value(resp3_type::null);
        value_placed();
        return step::done;
    }
    if (len < 0)
        return fail(error::protocol_error,
                    "negative length " + std::to_string(len) + header_of(type), start);
    if (static_cast<std::uint64_t>(len) > limits_.max_bulk_length)
        return fail(error::reply_too_large,
                    "length " + std::to_string(len) + header_of(type) + " exceeds the limit of " +
                        std::to_string(limits_.max_bulk_length) + " bytes",
                    start);
    const auto n = static_cast<std::size_t>(len);
    // Checked before the payload is buffered, so a hostile length cannot
    // make the client hold more than the limit either.
    const std::size_t cost = sizeof(reply) + n;
    if (over_reply_limit(cost)) return reply_limit_failure(cost, start);
    // Incomplete: the short header is read again when more bytes come, the
    // payload is only counted, so a large string costs linear time.
    if (buffer_.size() - payload_at < n + 2) return step::need_more;
    if (buffer_[payload_at + n] != '\r' || buffer_[payload_at + n + 1] != '\n')
        return fail(error::protocol_error,
                    "payload of " + std::to_string(n) + " bytes not followed by CRLF" +
                        header_of(type),
                    payload_at + n);
    const std::string_view payload(buffer_.data() + payload_at, n);
    if (type == '=') {
        if (n < 4 || payload[3] != ':')
            return fail(error::protocol_error,
                        "verbatim string without a \"fmt:\" prefix" + header_of(type), payload_at);
        reply& r = emplace_value(resp3_type::verbatim_string);
        r.format.assign(payload.substr(0, 3));
        r.str.assign(payload.substr(4));
    } else {
        emplace_value(type == '$' ? resp3_type::bulk_string : resp3_type::blob_error).str.assign(payload);
    }
    reply_cost_ += cost;
    pos_ = payload_at + n + 2;
    value_placed();
    return step::done;
}

resp3_parser::step resp3_parser::parse_aggregate(char type, std::string_view header,
                                                 std::size_t start, std::size_t after_line) {
    if (header == "?")
        return fail(error::protocol_error,
                    "streamed aggregate" + header_of(type) + " (never sent by Redis) is not supported",
                    start);
    std::int64_t count = 0;
    if (!parse_int64(header, false, count))
        return fail(error::protocol_error,
                    "invalid element count " + quoted(header) + header_of(type), start);
    if (count == -1 && type == '*') {  // the RESP2 null array
        pos_ = after_line;
        emplace_value(resp3_type::null);
        value_placed();
        return step::done;
    }
    if (count < 0)
        return fail(error::protocol_error,
                    "negative element count " + std::to_string(count) + header_of(type), start);
    // Maps and attributes count pairs; the limit is on elements.
    const bool pairs = type == '%' || type == '|';
    const auto max = limits_.max_aggregate_size;
    const auto ucount = static_cast<std::uint64_t>(count);
    if (ucount > max || (pairs && ucount > max / 2))
        return fail(error::reply_too_large,
                    "aggregate of " + std::to_string(count) + (pairs ? " pairs" : " elements") +
                        header_of(type) + " exceeds the limit of " + std::to_string(max) +
                        " elements",
                    start);
    if (stack_.size() >= limits_.max_nesting_depth)
        return fail(error::nesting_too_deep,
                    "aggregates nested deeper than " + std::to_string(limits_.max_nesting_depth),
                    start);
    resp3_type t = resp3_type::array;
    switch (type) {
    case '%': case '|': t = resp3_type::map; break;
    case '~': t = resp3_type::set; break;
    case '>': t = resp3_type::push; break;
    default: break;
    }
    const bool is_attribute = type == '|';
    const auto elements = static_cast<std::size_t>(pairs ? ucount * 2 : ucount);
    pos_ = after_line;
    if (elements == 0) {
        // An empty attribute leaves the pending attributes pending; an
        // empty aggregate is a complete value.
        if (!is_attribute) {
            emplace_value(t);
            value_placed();
        }
        return step::done;
    }
    // For an attribute this keeps the attributes already pending with it
    // (see open_aggregate), for anything else they annotate the aggregate.
    open_aggregate& open = stack_.emplace_back();
    open.node.type = t;
    take_pending_attributes(open.node);
    open.remaining = elements;
    open.is_attribute = is_attribute;
    open.node.elements.reserve(std::min(elements, max_reserve));
    return step::done;
}

}  // namespace corolock::detail
