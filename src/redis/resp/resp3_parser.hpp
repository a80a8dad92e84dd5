// An incremental RESP3 parser, without any I/O.
//
// Bytes go in through consume() in chunks split anywhere; complete top-level
// replies come out of pop() in order. The parser keeps the partial frame's
// state between calls (a stack of open aggregates, the unparsed tail of the
// input), so no byte is parsed twice except a header line that is not yet
// complete, and a large bulk string costs linear time however it is split.
//
// Malformed input, a bulk or aggregate over the limits, or nesting deeper
// than the limit puts the parser in a failed state that reset() clears; the
// diagnostic names the problem and its byte offset in the stream. Replies
// completed before the error remain poppable.
//
// Streamed strings and aggregates ($?, *? and friends) are rejected: Redis
// never sends them, and supporting them would only widen the fuzzing surface.
#pragma once

#include <corolock/error.hpp>
#include <corolock/reply.hpp>

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail {

// Zero means the default: 512 MiB (the server's proto-max-bulk-len), depth
// 32, 16 Mi elements per aggregate, 64 MiB per reply. The reply limit counts
// what one top-level reply costs in memory once parsed: sizeof(reply) for
// every value (aggregates and their elements alike) plus the bytes of text
// it keeps, so many small elements are charged for their nodes, not their
// few bytes on the wire. Every charge is made before the bytes are held: a
// bulk string's at its header, a simple string's, error's or big number's
// as its line arrives (it may be no longer than the reply has room left).
struct parser_limits {
    std::size_t max_bulk_length = 0;
    std::size_t max_nesting_depth = 0;
    std::size_t max_aggregate_size = 0;
    std::size_t max_reply_size = 0;
};

class resp3_parser {
public:
    explicit resp3_parser(parser_limits limits = {});

    // Appends bytes and parses every reply they complete. On a failure, ec
    // is set (error::protocol_error, reply_too_large or nesting_too_deep) and
    // every later call returns the same code until reset().
    void consume(std::string_view data, error_code& ec);

    bool has_reply() const noexcept { return !ready_.empty(); }
    // Precondition: has_reply(). Oldest first.
    reply pop();

    const std::string& diagnostic() const noexcept { return diagnostic_; }
    // Drops buffered bytes, the partial frame, unread replies and the error.
    void reset() noexcept;
    // Bytes held waiting for the rest of a frame.
    std::size_t buffered() const noexcept { return buffer_.size() - pos_; }

private:
    struct open_aggregate {
        // For an attribute map, node.attributes holds attributes that were
        // already pending when it opened: both sets annotate the same value.
        reply node;
        std::size_t remaining = 0;   // elements still to come
        bool is_attribute = false;  // an attribute map: attaches to the next value
    };

    enum class step { done, need_more, failed };
    step parse_one();
    step parse_string(char type, std::string_view header, std::size_t start,
                      std::size_t payload_at);
    step parse_aggregate(char type, std::string_view header, std::size_t start,
                         std::size_t after_line);
    reply& emplace_value(resp3_type t);
    void take_pending_attributes(reply& r);
    void value_placed();
    void compact();
    step fail(error e, std::string what, std::size_t at);
    bool over_reply_limit(std::size_t cost) const noexcept;
    step reply_limit_failure(std::size_t cost, std::size_t at);

    parser_limits limits_;
    std::string buffer_;
    std::size_t pos_ = 0;          // first unparsed byte in buffer_
    std::size_t scanned_ = 0;      // bytes after pos_ already searched for LF
    std::size_t base_offset_ = 0;  // stream offset of buffer_[0]
    std::vector<open_aggregate> stack_;
    std::vector<reply> pending_attributes_;  // from a completed attribute map
    std::deque<reply> ready_;
    std::size_t reply_cost_ = 0;   // memory charged to the top-level reply being parsed
    error_code error_;
    std::string diagnostic_;
};

}  // namespace corolock::detail
