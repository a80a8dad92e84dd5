// The request queue behind auto-pipelining, without any I/O.
//
// Entries stay in submission order. From the front: written entries (waiting
// for their reply), staged entries (in the buffer being written now), then
// waiting entries. Replies are matched to the front entry, FIFO. A cancelled
// entry that was not yet written becomes a tombstone that is skipped when
// staging, so it is never sent; a cancelled or timed-out entry that was
// written stays as "abandoned" so that its reply is still consumed in order.
//
// The queue never runs a handler itself: every operation that completes
// requests appends them to a `completions` list that the caller runs once the
// queue is consistent again, so handlers may re-enter the client freely.
#pragma once

#include <corolock/error.hpp>
#include <corolock/reply.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/container/small_vector.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace corolock::detail {

using exec_handler = boost::asio::any_completion_handler<void(error_code, reply)>;

// A receiver of replies inside the library (the lock layer's script calls),
// called in place on the strand. Unlike an exec_handler it is not boxed per
// command: the object that waits for the reply receives it, so a command
// sent this way allocates nothing for its completion. `self` is the queue's
// reference, handed over so that the target may send again.
class reply_target {
public:
    virtual void on_reply(std::shared_ptr<reply_target> self, error_code ec, reply r) = 0;
    // A target writes its command itself, so it is queued without bytes:
    // the queue has it append them to the write buffer when they go out (and
    // again if a lost connection makes an idempotent one go out again), and
    // nothing is allocated or kept for them while the command waits. The
    // command must not change between queueing and writing.
    virtual void write_command(std::string& out) const = 0;
    // An upper bound of the bytes write_command() appends.
    virtual std::size_t command_size() const noexcept = 0;

protected:
    ~reply_target() = default;
};
using target_ptr = std::shared_ptr<reply_target>;

// A command's name (its first word), kept inline for error reports: a
// server error or a timeout names the command it answered. Longer names are
// cut at 15 bytes.
struct command_name {
    char text[15] = {};
    std::uint8_t size = 0;
    std::string_view view() const noexcept { return {text, size}; }
    // The name from a command's RESP bytes ("*N\r\n$L\r\nNAME\r\n..."); empty
    // when they are not in that form.
    static command_name of_payload(std::string_view payload) noexcept;
};

// Exactly one of handler and target is set.
struct completion {
    exec_handler handler;
    target_ptr target;
    error_code ec;
    reply result;
    bool direct = false;  // see request_queue::options::direct
    command_name name;    // empty for a target: it can write its command again
};
// Usually one completion (a reply): kept inline, so completing a command
// allocates nothing for the list.
using completions = boost::container::small_vector<completion, 2>;

// How a request's reply is recognised.
enum class reply_kind : std::uint8_t {
    normal,     // the next non-push reply
    subscribe,  // a RESP3 subscribe/unsubscribe confirmation push (or an error reply)
};

class request_queue {
public:
    using clock = std::chrono::steady_clock;
    using id_type = std::uint64_t;

    struct options {
        reply_kind kind = reply_kind::normal;
        bool idempotent = false;
        // Sent ahead of every waiting request (re-subscriptions after a
        // reconnect must precede retried commands). Dropped, not retried,
        // when the connection is lost: whoever queued it re-queues it.
        bool priority = false;
        // Carried to the completion: the client invokes the handler directly
        // instead of dispatching it to its associated executor.
        bool direct = false;
        clock::time_point deadline = clock::time_point::max();
    };

    // Queues one command's RESP bytes. Priority entries go in front of all
    // waiting entries (after any written ones).
    id_type push(std::string payload, exec_handler handler, options opts);
    // Queues a reply target's command, which it writes itself when it goes
    // out (completed in place: opts.direct is implied).
    id_type push_target(target_ptr target, options opts);

    // True when staging would produce bytes.
    bool has_writable() const noexcept { return waiting_ > 0; }
    // Live entries that the next stage() would write.
    std::size_t waiting_count() const noexcept { return waiting_; }

    // Moves waiting entries into the write buffer, returning it (empty when
    // there is nothing to write). Only one write may be in flight: call
    // on_write_done() before staging again.
    const std::string& stage();
    std::size_t staged_count() const noexcept { return staged_commands_; }
    // The write buffer's capacity, kept between writes unless a burst made it
    // large (then it is given back when the write is done).
    std::size_t buffer_capacity() const noexcept { return write_buffer_.capacity(); }
    void on_write_done();

    enum class match_result {
        matched,     // the reply completed (or was discarded for) the front entry
        push,        // an unsolicited push: route it to the pub/sub layer
        unexpected,  // a reply with no written request: the stream is out of step
    };
    match_result on_reply(reply&& r, completions& out);

    // Cancels one entry. A waiting one is never sent; a written one completes
    // now and its reply is dropped later. Returns false when the entry is
    // already complete, or is written and `written_too` is false.
    bool cancel(id_type id, error_code ec, bool written_too, completions& out);

    // Completes every entry whose deadline is at or before `now` with `ec`.
    // Returns the earliest deadline still pending (time_point::max() if none).
    // When `written` is given, it is set to how many of them had been
    // written (or staged): their replies may still be on the way.
    clock::time_point expire(clock::time_point now, error_code ec, completions& out,
                             std::size_t* written = nullptr);
    clock::time_point next_deadline() const noexcept;

    // The connection dropped. Written and staged entries fail with `ec`,
    // except idempotent ones not yet retried, which go back to waiting (the
    // count is returned). Priority entries are dropped. Waiting entries stay.
    std::size_t on_disconnect(error_code ec, completions& out);

    // The next reply could not be parsed, and the connection is about to be
    // dropped: the entry waiting for that reply fails with `ec`, the
    // parser's own error, so that its caller learns what went wrong rather
    // than a bare connection_lost. An idempotent entry not yet retried is
    // left alone: on_disconnect() sends it again on the next connection.
    // Returns whether an entry was failed.
    bool on_bad_reply(error_code ec, completions& out);

    // Fails everything (client stopped).
    void fail_all(error_code ec, completions& out);

    std::size_t size() const noexcept { return entries_.size(); }
    std::size_t written_count() const noexcept { return written_; }  // includes tombstones
    bool empty() const noexcept { return entries_.empty(); }

private:
    // cancelled: a tombstone that was never sent (skipped, never matched).
    // written with an empty handler: abandoned, its reply is dropped.
    enum class state : std::uint8_t { waiting, staged, written, cancelled, done };
    // An exec_handler whose move assignment swaps. Asio 1.81's own copies
    // its source as an lvalue, which wraps it in itself without end (a stack
    // overflow); inserting a priority command in the middle of the deque
    // move-assigns the entries behind it.
    struct swapping_handler : exec_handler {
        swapping_handler() = default;
        swapping_handler(exec_handler&& h) noexcept : exec_handler(std::move(h)) {}
        swapping_handler(swapping_handler&&) noexcept = default;
        swapping_handler& operator=(swapping_handler&& o) noexcept {
            exec_handler taken(std::move(static_cast<exec_handler&>(o)));
            swap(taken);
            return *this;
        }
        swapping_handler& operator=(std::nullptr_t) noexcept {
            exec_handler::operator=(nullptr);
            return *this;
        }
    };
    struct entry {
        id_type id;
        std::string payload;           // a handler's command (a target writes its own)
        swapping_handler handler;      // empty once completed
        target_ptr target;             // instead of handler; null once completed
        clock::time_point deadline;
        reply_kind kind;
        state st;
        bool idempotent;
        bool retried;
        bool priority;
        bool direct;
        command_name name;
    };

    // Someone still waits for the entry's reply.
    static bool live(const entry& e) noexcept { return e.handler || e.target; }
    static bool is_subscribe_confirmation(const reply& r) noexcept;
    id_type push_entry(entry e);
    // A written entry that a lost connection sends again instead of failing.
    static bool resent_on_disconnect(const entry& e) noexcept {
        // A handler's bytes are kept for it; a target writes them again.
        return e.idempotent && !e.retried && !e.priority && (e.target || !e.payload.empty());
    }
    entry* find(id_type id) noexcept;
    void complete(entry& e, error_code ec, reply r, completions& out);
    void pop_done_front() noexcept;

    // Regions, front to back: [0, written_) written or tombstones,
    // [written_, written_ + staged_) staged or tombstones, then waiting or
    // tombstones. waiting_ counts live waiting entries only.
    std::deque<entry> entries_;
    std::size_t written_ = 0;
    std::size_t staged_ = 0;
    std::size_t waiting_ = 0;
    std::string write_buffer_;
    std::size_t staged_commands_ = 0;
    id_type next_id_ = 1;
};

}  // namespace corolock::detail
