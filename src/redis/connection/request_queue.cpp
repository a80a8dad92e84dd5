#include "redis/connection/request_queue.hpp"

#include <algorithm>
#include <cassert>

namespace corolock::detail {

namespace {
// A write buffer larger than this after a burst is given back instead of
// kept for reuse: ordinary traffic never needs this much, and a client that
// once sent 10,000 commands in one write should not hold their bytes forever.
constexpr std::size_t keep_capacity = 256 * 1024;

void reset(std::string& buffer) noexcept {
    if (buffer.capacity() > keep_capacity)
        std::string().swap(buffer);
    else
        buffer.clear();
}
}  // namespace

command_name command_name::of_payload(std::string_view p) noexcept {
    command_name n;
    // "*<count>\r\n$<len>\r\n<name>\r\n"
    if (p.empty() || p[0] != '*') return n;
    const auto first = p.find("\r\n$");
    if (first == std::string_view::npos) return n;
    const auto len_end = p.find("\r\n", first + 3);
    if (len_end == std::string_view::npos) return n;
    std::size_t len = 0;
    for (std::size_t i = first + 3; i < len_end; ++i) {
        if (p[i] < '0' || p[i] > '9' || len > 1000) return n;
        len = len * 10 + static_cast<std::size_t>(p[i] - '0');
    }
    const std::string_view name = p.substr(len_end + 2, len);
    n.size = static_cast<std::uint8_t>(std::min(name.size(), sizeof n.text));
    std::copy_n(name.data(), n.size, n.text);
    return n;
}

request_queue::id_type request_queue::push(std::string payload, exec_handler handler,
                                           options opts) {
    const auto name = command_name::of_payload(payload);
    return push_entry(entry{next_id_++, std::move(payload), std::move(handler), nullptr,
                            opts.deadline, opts.kind, state::waiting, opts.idempotent, false,
                            opts.priority, opts.direct, name});
}

request_queue::id_type request_queue::push_target(target_ptr target, options opts) {
    assert(target);
    return push_entry(entry{next_id_++, std::string(), exec_handler{}, std::move(target),
                            opts.deadline, opts.kind, state::waiting, opts.idempotent, false,
                            opts.priority, true, command_name{}});
}

request_queue::id_type request_queue::push_entry(entry e) {
    const id_type id = e.id;
    if (e.priority) {
        // In front of every waiting entry, but behind written and staged ones.
        entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(written_ + staged_),
                        std::move(e));
    } else {
        entries_.push_back(std::move(e));
    }
    ++waiting_;
    return id;
}

const std::string& request_queue::stage() {
    assert(staged_ == 0 && "one write at a time");
    write_buffer_.clear();
    staged_commands_ = 0;
    // Sized once: a burst of thousands of commands would otherwise double
    // the buffer a dozen times and leave it up to twice as large as needed.
    std::size_t bytes = 0;
    for (std::size_t j = written_; j < entries_.size(); ++j) {
        const entry& e = entries_[j];
        if (e.st != state::waiting) continue;
        bytes += e.target ? e.target->command_size() : e.payload.size();
    }
    write_buffer_.reserve(bytes);
    std::size_t i = written_;
    for (; i < entries_.size(); ++i) {
        entry& e = entries_[i];
        if (e.st == state::waiting) {
            if (e.target)
                e.target->write_command(write_buffer_);
            else
                write_buffer_.append(e.payload);
            e.st = state::staged;
            ++staged_commands_;
            --waiting_;
            // The bytes now live in the write buffer; a handler's entry keeps
            // its payload only while a retry may still need it.
            if (!e.idempotent || e.retried) std::string().swap(e.payload);
        } else if (e.st != state::cancelled) {
            break;  // cannot happen: everything after written_ is waiting or a tombstone
        }
    }
    staged_ = i - written_;
    return write_buffer_;
}

void request_queue::on_write_done() {
    for (std::size_t i = written_; i < written_ + staged_; ++i)
        if (entries_[i].st == state::staged) entries_[i].st = state::written;
    written_ += staged_;
    staged_ = 0;
    staged_commands_ = 0;
    reset(write_buffer_);
}

bool request_queue::is_subscribe_confirmation(const reply& r) noexcept {
    if (r.type != resp3_type::push || r.elements.empty()) return false;
    const std::string& kind = r.elements.front().str;
    return kind == "subscribe" || kind == "unsubscribe" || kind == "psubscribe" ||
           kind == "punsubscribe" || kind == "ssubscribe" || kind == "sunsubscribe";
}

void request_queue::pop_done_front() noexcept {
    // Written entries come first, then staged ones; both are in flight.
    while (written_ + staged_ > 0) {
        const state st = entries_.front().st;
        if (st != state::cancelled && st != state::done) break;
        entries_.pop_front();
        if (written_ > 0)
            --written_;
        else
            --staged_;
    }
}

request_queue::match_result request_queue::on_reply(reply&& r, completions& out) {
    pop_done_front();
    const bool is_push = r.type == resp3_type::push;
    // A staged entry may be answered too: its bytes can reach the server and
    // the reply come back before the write's own completion has run.
    if (written_ + staged_ == 0) return is_push ? match_result::push : match_result::unexpected;
    entry& front = entries_.front();
    assert(front.st == state::written || front.st == state::staged);
    if (is_push) {
        // A subscribe request is answered by its confirmation push; every
        // other push (messages, invalidations) belongs to the pub/sub layer.
        if (front.kind != reply_kind::subscribe || !is_subscribe_confirmation(r))
            return match_result::push;
    }
    if (live(front)) complete(front, {}, std::move(r), out);
    front.st = state::done;
    pop_done_front();
    return match_result::matched;
}

bool request_queue::on_bad_reply(error_code ec, completions& out) {
    pop_done_front();
    if (written_ + staged_ == 0) return false;
    entry& front = entries_.front();
    if (!live(front)) return false;  // abandoned: nobody waits for the reply
    if (resent_on_disconnect(front)) return false;
    // Completed, so on_disconnect() neither retries nor completes it again.
    complete(front, ec, {}, out);
    return true;
}

request_queue::entry* request_queue::find(id_type id) noexcept {
    // Priority inserts and retries break id order, so search linearly;
    // cancellation is rare next to sending.
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [id](const entry& e) { return e.id == id; });
    return it == entries_.end() ? nullptr : &*it;
}

void request_queue::complete(entry& e, error_code ec, reply r, completions& out) {
    out.push_back(
        completion{std::move(static_cast<exec_handler&>(e.handler)), std::move(e.target), ec,
                   std::move(r), e.direct, e.name});
    e.handler = {};
    e.target = nullptr;
    std::string().swap(e.payload);
}

bool request_queue::cancel(id_type id, error_code ec, bool written_too, completions& out) {
    entry* e = find(id);
    if (e == nullptr || !live(*e)) return false;
    switch (e->st) {
    case state::waiting:
        complete(*e, ec, {}, out);
        e->st = state::cancelled;
        --waiting_;
        return true;
    case state::staged:
    case state::written:
        if (!written_too) return false;
        complete(*e, ec, {}, out);  // stays in place, so its reply is still consumed
        return true;
    case state::cancelled:
    case state::done:
        return false;
    }
    return false;
}

request_queue::clock::time_point request_queue::expire(clock::time_point now, error_code ec,
                                                       completions& out,
                                                       std::size_t* written) {
    auto next = clock::time_point::max();
    if (written) *written = 0;
    for (auto& e : entries_) {
        if (!live(e)) continue;
        if (e.deadline <= now) {
            if (written && (e.st == state::written || e.st == state::staged)) ++*written;
            complete(e, ec, {}, out);
            if (e.st == state::waiting) {
                e.st = state::cancelled;
                --waiting_;
            }
        } else {
            next = std::min(next, e.deadline);
        }
    }
    pop_done_front();
    return next;
}

request_queue::clock::time_point request_queue::next_deadline() const noexcept {
    auto next = clock::time_point::max();
    for (const auto& e : entries_)
        if (live(e)) next = std::min(next, e.deadline);
    return next;
}

std::size_t request_queue::on_disconnect(error_code ec, completions& out) {
    const std::size_t sent = written_ + staged_;
    std::deque<entry> retry;
    for (std::size_t i = 0; i < sent; ++i) {
        entry& e = entries_[i];
        if (e.st == state::cancelled || !live(e)) continue;
        // Kept bytes, or a target that writes them again when they go out.
        if (resent_on_disconnect(e)) {
            e.retried = true;
            e.st = state::waiting;
            retry.push_back(std::move(e));
        } else {
            complete(e, ec, {}, out);
        }
    }
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(sent));
    written_ = staged_ = staged_commands_ = 0;
    // Cleared, not given back: a write on the closed connection may not have
    // completed yet, and its buffer stays valid until the next stage().
    write_buffer_.clear();

    // Unsent priority entries belong to the connection that is gone.
    for (auto& e : entries_) {
        if (e.priority && e.st == state::waiting && live(e)) {
            complete(e, ec, {}, out);
            e.st = state::cancelled;
            --waiting_;
        }
    }
    const std::size_t retried = retry.size();
    waiting_ += retried;
    entries_.insert(entries_.begin(), std::make_move_iterator(retry.begin()),
                    std::make_move_iterator(retry.end()));
    // Drop leading tombstones so the queue does not grow across reconnects.
    while (!entries_.empty() && entries_.front().st == state::cancelled) entries_.pop_front();
    return retried;
}

void request_queue::fail_all(error_code ec, completions& out) {
    for (auto& e : entries_)
        if (live(e)) complete(e, ec, {}, out);
    entries_.clear();
    written_ = staged_ = staged_commands_ = waiting_ = 0;
    write_buffer_.clear();  // as in on_disconnect()
}

}  // namespace corolock::detail
