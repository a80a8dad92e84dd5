#include <corolock/detail/resp3_parser.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace corolock::detail {

namespace {

constexpr std::size_t default_max_bulk_length = 512u * 1024 * 1024;
constexpr std::size_t default_max_nesting_depth = 32;
constexpr std::size_t default_max_aggregate_size = 16u * 1024 * 1024;
// Header lines of numeric types are short; a longer one is garbage, and
// capping it keeps a stream without CRLF from growing the buffer forever.
constexpr std::size_t max_numeric_line = 128;
// An untrusted element count never reserves more than this up front.
constexpr std::size_t max_reserve = 1024;

std::string printable(char c) {
    if (c >= 0x21 && c <= 0x7e) return std::string("'") + c + "'";
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
    return buf;
}

// Strict decimal: optional '-', then digits only, fitting int64.
bool parse_int64(std::string_view s, std::int64_t& out) {
    if (s.empty() || s == "-") return false;
    const std::size_t digits_from = s.front() == '-' ? 1 : 0;
    for (std::size_t i = digits_from; i < s.size(); ++i)
        if (s[i] < '0' || s[i] > '9') return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
    if (s == "inf" || s == "+inf") {
        out = std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == "-inf") {
        out = -std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == "nan" || s == "-nan") {
        out = std::numeric_limits<double>::quiet_NaN();
        return true;
    }
    if (s.empty()) return false;
    // from_chars would also take "infinity" and hex floats; RESP3 doubles are
    // plain decimal with an optional exponent.
    for (char c : s)
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'))
            return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

bool is_big_number(std::string_view s) {
    const std::size_t from = !s.empty() && s.front() == '-' ? 1 : 0;
    if (s.size() == from) return false;
    for (std::size_t i = from; i < s.size(); ++i)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

}  // namespace

resp3_parser::resp3_parser(parser_limits limits) : limits_(limits) {
    if (limits_.max_bulk_length == 0) limits_.max_bulk_length = default_max_bulk_length;
    if (limits_.max_nesting_depth == 0) limits_.max_nesting_depth = default_max_nesting_depth;
    if (limits_.max_aggregate_size == 0) limits_.max_aggregate_size = default_max_aggregate_size;
}

void resp3_parser::reset() noexcept {
    buffer_.clear();
    pos_ = 0;
    scanned_ = 0;
    base_offset_ = 0;
    stack_.clear();
    pending_attributes_.clear();
    ready_.clear();
    error_ = {};
    diagnostic_.clear();
}

reply resp3_parser::pop() {
    reply r = std::move(ready_.front());
    ready_.pop_front();
    return r;
}

void resp3_parser::consume(std::string_view data, error_code& ec) {
    if (error_) {
        ec = error_;
        return;
    }
    // Drop what was parsed before appending, so the buffer holds at most one
    // partial frame plus the new chunk.
    if (pos_ == buffer_.size()) {
        base_offset_ += pos_;
        buffer_.clear();
        pos_ = 0;
    } else if (pos_ > 0 && pos_ >= buffer_.size() / 2) {
        base_offset_ += pos_;
        buffer_.erase(0, pos_);
        pos_ = 0;
    }
    buffer_.append(data);
    // Each successful step consumes at least one header line, so this ends.
    for (;;) {
        switch (parse_one()) {
        case step::done: continue;
        case step::need_more: ec = {}; return;
        case step::failed: ec = error_; return;
        }
    }
}

resp3_parser::step resp3_parser::fail(error e, std::string what, std::size_t at) {
    error_ = e;
    diagnostic_ = std::move(what) + " at byte " + std::to_string(base_offset_ + at);
    return step::failed;
}

void resp3_parser::open(reply&& node, std::size_t count, bool is_attribute) {
    if (count == 0) {
        if (!is_attribute) finish_value(std::move(node));
        return;
    }
    node.elements.reserve(std::min(count, max_reserve));
    stack_.push_back(open_aggregate{std::move(node), count, is_attribute});
}

void resp3_parser::finish_value(reply&& value) {
    // Walks up while the value completes its parent aggregate.
    for (;;) {
        if (stack_.empty()) {
            ready_.push_back(std::move(value));
            return;
        }
        open_aggregate& top = stack_.back();
        top.node.elements.push_back(std::move(value));
        if (--top.remaining > 0) return;
        open_aggregate done = std::move(top);
        stack_.pop_back();
        if (done.is_attribute) {
            // An attribute is not an element of its parent: it annotates the
            // next value at this level.
            for (auto& e : done.node.elements) pending_attributes_.push_back(std::move(e));
            return;
        }
        value = std::move(done.node);
    }
}

resp3_parser::step resp3_parser::parse_one() {
    if (pos_ >= buffer_.size()) return step::need_more;
    const std::size_t start = pos_;
    const char type = buffer_[start];
    switch (type) {
    case '+': case '-': case ':': case '$': case '*': case '_': case ',': case '#':
    case '(': case '!': case '=': case '%': case '~': case '>': case '|':
        break;
    default:
        return fail(error::protocol_error, "unknown RESP3 type byte " + printable(type), start);
    }

    // The header line: type byte, text, CRLF.
    const bool long_line = type == '+' || type == '-' || type == '(';
    const std::size_t line_cap = long_line ? limits_.max_bulk_length : max_numeric_line;
    const std::size_t lf = buffer_.find('\n', start + 1 + scanned_);
    if (lf == std::string::npos) {
        scanned_ = buffer_.size() - start - 1;
        if (scanned_ > line_cap + 1)
            return fail(long_line ? error::reply_too_large : error::protocol_error,
                        std::string("header line of '") + type + "' longer than " +
                            std::to_string(line_cap) + " bytes",
                        start);
        return step::need_more;
    }
    scanned_ = 0;
    if (lf < start + 2 || buffer_[lf - 1] != '\r')
        return fail(error::protocol_error, "line not terminated by CRLF", lf);
    const std::string_view text(buffer_.data() + start + 1, lf - 1 - (start + 1));
    if (text.size() > line_cap)
        return fail(long_line ? error::reply_too_large : error::protocol_error,
                    std::string("header line of '") + type + "' longer than " +
                        std::to_string(line_cap) + " bytes",
                    start);
    if (text.find('\r') != std::string_view::npos)
        return fail(error::protocol_error, "stray CR inside a line", start);
    const std::size_t after_line = lf + 1;

    // A new value takes the attributes that preceded it.
    auto make = [this](resp3_type t) {
        reply r;
        r.type = t;
        if (!pending_attributes_.empty()) {
            r.attributes = std::move(pending_attributes_);
            pending_attributes_.clear();
        }
        return r;
    };

    switch (type) {
    case '+':
    case '-': {
        reply r = make(type == '+' ? resp3_type::simple_string : resp3_type::simple_error);
        r.str.assign(text);
        pos_ = after_line;
        finish_value(std::move(r));
        return step::done;
    }
    case ':': {
        std::int64_t v = 0;
        if (!parse_int64(text, v))
            return fail(error::protocol_error, "invalid integer \"" + std::string(text) + "\"", start);
        reply r = make(resp3_type::integer);
        r.integer = v;
        pos_ = after_line;
        finish_value(std::move(r));
        return step::done;
    }
    case '_': {
        if (!text.empty()) return fail(error::protocol_error, "null with a payload", start);
        pos_ = after_line;
        finish_value(make(resp3_type::null));
        return step::done;
    }
    case '#': {
        if (text != "t" && text != "f")
            return fail(error::protocol_error, "invalid boolean \"" + std::string(text) + "\"", start);
        reply r = make(resp3_type::boolean);
        r.integer = text == "t" ? 1 : 0;
        pos_ = after_line;
        finish_value(std::move(r));
        return step::done;
    }
    case ',': {
        double d = 0;
        if (!parse_double(text, d))
            return fail(error::protocol_error, "invalid double \"" + std::string(text) + "\"", start);
        reply r = make(resp3_type::double_type);
        r.number = d;
        r.str.assign(text);
        pos_ = after_line;
        finish_value(std::move(r));
        return step::done;
    }
    case '(': {
        if (!is_big_number(text))
            return fail(error::protocol_error, "invalid big number", start);
        reply r = make(resp3_type::big_number);
        r.str.assign(text);
        pos_ = after_line;
        finish_value(std::move(r));
        return step::done;
    }
    case '$':
    case '!':
    case '=': {
        if (text == "?")
            return fail(error::protocol_error, "streamed strings are not supported", start);
        std::int64_t len = 0;
        if (!parse_int64(text, len))
            return fail(error::protocol_error, "invalid length \"" + std::string(text) + "\"", start);
        if (len == -1 && type == '$') {  // RESP2 null bulk string
            pos_ = after_line;
            finish_value(make(resp3_type::null));
            return step::done;
        }
        if (len < 0)
            return fail(error::protocol_error, "negative length " + std::to_string(len), start);
        if (static_cast<std::uint64_t>(len) > limits_.max_bulk_length)
            return fail(error::reply_too_large,
                        "string of " + std::to_string(len) + " bytes exceeds the limit of " +
                            std::to_string(limits_.max_bulk_length),
                        start);
        const auto n = static_cast<std::size_t>(len);
        if (buffer_.size() - after_line < n + 2) return step::need_more;  // header re-read next time
        if (buffer_[after_line + n] != '\r' || buffer_[after_line + n + 1] != '\n')
            return fail(error::protocol_error, "string payload not followed by CRLF", after_line + n);
        const std::string_view payload(buffer_.data() + after_line, n);
        reply r;
        if (type == '=') {
            if (n < 4 || payload[3] != ':')
                return fail(error::protocol_error, "verbatim string without a \"fmt:\" prefix", start);
            r = make(resp3_type::verbatim_string);
            r.format.assign(payload.substr(0, 3));
            r.str.assign(payload.substr(4));
        } else {
            r = make(type == '$' ? resp3_type::bulk_string : resp3_type::blob_error);
            r.str.assign(payload);
        }
        pos_ = after_line + n + 2;
        finish_value(std::move(r));
        return step::done;
    }
    default: {  // aggregates: * % ~ > |
        if (text == "?")
            return fail(error::protocol_error, "streamed aggregates are not supported", start);
        std::int64_t count = 0;
        if (!parse_int64(text, count))
            return fail(error::protocol_error, "invalid element count \"" + std::string(text) + "\"",
                        start);
        if (count == -1 && type == '*') {  // RESP2 null array
            pos_ = after_line;
            finish_value(make(resp3_type::null));
            return step::done;
        }
        if (count < 0)
            return fail(error::protocol_error, "negative element count " + std::to_string(count), start);
        const bool pairs = type == '%' || type == '|';
        const auto max = limits_.max_aggregate_size;
        const auto ucount = static_cast<std::uint64_t>(count);
        if (ucount > max || (pairs && ucount * 2 > max))
            return fail(error::reply_too_large,
                        "aggregate of " + std::to_string(count) + (pairs ? " pairs" : " elements") +
                            " exceeds the limit of " + std::to_string(max) + " elements",
                        start);
        if (stack_.size() + 1 > limits_.max_nesting_depth)
            return fail(error::nesting_too_deep,
                        "aggregates nested deeper than " + std::to_string(limits_.max_nesting_depth),
                        start);
        resp3_type t = resp3_type::array;
        switch (type) {
        case '%': t = resp3_type::map; break;
        case '~': t = resp3_type::set; break;
        case '>': t = resp3_type::push; break;
        default: break;
        }
        const bool is_attribute = type == '|';
        reply node;
        if (is_attribute) {
            node.type = resp3_type::map;  // never delivered itself
        } else {
            node = make(t);
        }
        pos_ = after_line;
        open(std::move(node), static_cast<std::size_t>(pairs ? ucount * 2 : ucount), is_attribute);
        return step::done;
    }
    }
}

}  // namespace corolock::detail
