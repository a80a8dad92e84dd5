#include "redis/election/redis_elections.hpp"

#include "core/holder_record.hpp"
#include "core/strand_leader_watch.hpp"
#include "redis/connection/client_impl.hpp"
#include "redis/lock/lock_service.hpp"
#include "redis/lock/redis_backend.hpp"
#include "redis/lock/scripts.hpp"

#include <corolock/detail/completion.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <charconv>
#include <memory>
#include <utility>

namespace corolock::detail {

namespace asio = boost::asio;

namespace {

// KEYS[1] lock hash, KEYS[2] leader record. ARGV[1] owner id, ARGV[2] epoch,
// ARGV[3] value, ARGV[4] channel. -> 1 written and announced; 0 the lock is
// not this owner's fair mutex at this epoch (its `fence` is the grant's
// token: an election never re-enters), nothing written.
constexpr std::string_view proclaim_lua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'kind')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] or v[3] ~= 'fair' then return 0 end
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'epoch', ARGV[2], 'value', ARGV[3])
redis.call('PUBLISH', ARGV[4], '*')
return 1
)lua";

// KEYS[1] leader record. ARGV[1] owner id, ARGV[2] epoch, ARGV[3] channel.
// -> 1 removed (it was the term's), 0 left (a later term's, or none); the
// change is announced either way (the term's lock was released).
constexpr std::string_view withdraw_lua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
local removed = 0
if v[1] == ARGV[1] and v[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  removed = 1
end
redis.call('PUBLISH', ARGV[3], '*')
return removed
)lua";

// KEYS[1] lock hash, KEYS[2] leader record. -> {present, epoch, value,
// holder record, lock pttl, server time µs}. Present only when the record
// is the live term's: same owner, and its epoch the lock's grant token.
constexpr std::string_view read_lua = R"lua(
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local l = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'holder', 'kind')
local r = redis.call('HMGET', KEYS[2], 'owner', 'epoch', 'value')
local pttl = redis.call('PTTL', KEYS[1])
if l[1] and l[4] == 'fair' and r[1] == l[1] and r[2] == l[2] then
  return {1, r[2], r[3] or '', l[3] or '', pttl, now}
end
return {0, '0', '', '', pttl, now}
)lua";

const script& proclaim_script(bool shard) {
    static const script s = make_script("elect_proclaim", proclaim_lua);
    static const std::string shard_source = sharded_publish(std::string(proclaim_lua));
    static const script sharded_s = make_script("elect_proclaim", shard_source);
    return shard ? sharded_s : s;
}

const script& withdraw_script(bool shard) {
    static const script s = make_script("elect_withdraw", withdraw_lua);
    static const std::string shard_source = sharded_publish(std::string(withdraw_lua));
    static const script sharded_s = make_script("elect_withdraw", shard_source);
    return shard ? sharded_s : s;
}

const script& read_script() {
    static const script s = make_script("elect_read", read_lua);
    return s;
}

std::string lock_key(std::string_view name) { return std::string(lock_keys(name).lock()); }
std::string record_key(std::string_view name) { return lock_key(name) + ":leader"; }
std::string channel_of(std::string_view name) { return lock_key(name) + ":elect"; }

bool to_number(std::string_view text, std::int64_t& out) {
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && p == text.data() + text.size();
}

// Runs `s` on the client's strand; `h` gets the reply (or the error).
void run(const std::shared_ptr<client_impl>& impl, const script& s, std::vector<std::string> keys,
         std::vector<std::string> args, bool idempotent, script_handler h) {
    asio::post(impl->strand(), [impl, &s, keys = std::move(keys), args = std::move(args),
                                idempotent, h = std::move(h)]() mutable {
        if (impl->stopped()) return h(error::client_stopped, reply{});
        const std::vector<std::string_view> k(keys.begin(), keys.end());
        const std::vector<std::string_view> a(args.begin(), args.end());
        lock_service::of(*impl)->run_script(s, k, a, idempotent, std::move(h));
    });
}

// The handler kept in a shared box, since script_handler is copyable.
template <class Signature>
auto boxed(asio::any_completion_handler<Signature> h) {
    return std::make_shared<asio::any_completion_handler<Signature>>(std::move(h));
}

error_code read_result(const reply& r, leader_reading& out) {
    const auto& e = r.elements;
    if (r.type != resp3_type::array || e.size() != 6 || e[0].type != resp3_type::integer ||
        e[4].type != resp3_type::integer)
        return error::unexpected_reply;
    std::int64_t now_us = 0;
    if (!to_number(e[5].str, now_us)) return error::unexpected_reply;
    const auto pttl = e[4].integer;
    if (pttl >= 0) out.lease_left = std::chrono::milliseconds(pttl);
    if (e[0].integer != 1) return {};
    std::int64_t epoch = 0;
    if (!to_number(e[1].str, epoch) || epoch <= 0) return error::unexpected_reply;
    leader_info l;
    l.epoch = static_cast<std::uint64_t>(epoch);
    l.value = e[2].str;
    l.holder = parse_holder_record(e[3].str, now_us);
    out.leader = std::move(l);
    return {};
}

// A subscription on the client's strand: a local waiter of the name's
// channel (lock_service), woken by every "*" on it.
class redis_watch final : public strand_leader_watch, public lock_service::wait_target {
public:
    redis_watch(std::shared_ptr<client_impl> impl, std::string channel)
        : strand_leader_watch(impl->strand(), impl->get_executor()),
          impl_(std::move(impl)),
          channel_(std::move(channel)) {
        waiter_.wake = &redis_watch::on_wake;
        waiter_.context = this;
    }

    void open() {
        asio::post(strand(), [self = weak_self(this).lock()] {
            if (self->closed() || self->impl_->stopped()) return;
            auto svc = lock_service::of(*self->impl_);
            svc->add_waiter(self->waiter_, self->channel_);
            svc->register_stop_hook(*self);
            self->self_ = self;  // kept while registered: the waiter points here
        });
    }

    // The cycle through self_ ends even when close() never ran (an
    // io_context destroyed with it queued), on the one thread left.
    void abandon() noexcept override { self_.reset(); }

    // lock_service::wait_target: only its stop hook is used.
    void wait_over() override {}
    void on_client_stopped() override {
        end();
        lock_service::of(*impl_)->forget_waiter(waiter_);
        // Let go later: this runs inside the service's own loop.
        asio::post(strand(), [keep = std::move(self_)] {});
    }

private:
    bool backend_stopped() const noexcept override { return impl_->stopped(); }

    void on_close() noexcept override {
        if (self_) {
            auto svc = lock_service::of(*impl_);
            svc->unregister_stop_hook(*this);
            if (impl_->stopped()) svc->forget_waiter(waiter_);
            else svc->remove_waiter(waiter_, true);
        }
        self_.reset();
    }

    // Re-armed for the next announcement.
    void on_taken() override {
        if (waiter_.registered) lock_service::of(*impl_)->rearm_waiter(waiter_);
    }

    static void on_wake(void* context) noexcept { static_cast<redis_watch*>(context)->announce(); }

    std::shared_ptr<client_impl> impl_;
    std::string channel_;
    unlock_waiters::waiter waiter_;
    std::shared_ptr<redis_watch> self_;
};

}  // namespace

void redis_elections::proclaim(std::string name, std::string owner, std::uint64_t epoch,
                               std::string value, done_handler h) {
    auto impl = client_.shared_from_this();
    auto box = boxed(std::move(h));
    const bool shard = impl->sharded_pubsub();
    // Idempotent: a repeat writes the same record, or finds the term gone.
    run(impl, proclaim_script(shard), {lock_key(name), record_key(name)},
        {std::move(owner), std::to_string(epoch), std::move(value), channel_of(name)}, true,
        [box, ex = impl->get_executor()](error_code ec, reply r) {
            if (!ec && (r.type != resp3_type::integer)) ec = error::unexpected_reply;
            if (!ec && r.integer != 1) ec = error::lock_lost;
            complete_now(std::move(*box), false, ex, ec);
        });
}

void redis_elections::withdraw(std::string name, std::string owner, std::uint64_t epoch,
                               done_handler h) {
    auto impl = client_.shared_from_this();
    auto box = boxed(std::move(h));
    run(impl, withdraw_script(impl->sharded_pubsub()), {record_key(name)},
        {std::move(owner), std::to_string(epoch), channel_of(name)}, true,
        [box, ex = impl->get_executor()](error_code ec, reply) {
            complete_now(std::move(*box), false, ex, ec);
        });
}

void redis_elections::read(std::string name, read_handler h) {
    auto impl = client_.shared_from_this();
    auto box = boxed(std::move(h));
    run(impl, read_script(), {lock_key(name), record_key(name)}, {}, true,
        [box, ex = impl->get_executor()](error_code ec, reply r) {
            leader_reading out;
            if (!ec) ec = read_result(r, out);
            if (ec) out = {};
            complete_now(std::move(*box), false, ex, ec, std::move(out));
        });
}

std::shared_ptr<leader_watch> redis_elections::watch(std::string name) {
    auto w = std::make_shared<redis_watch>(client_.shared_from_this(), channel_of(name));
    w->open();
    return w;
}

election_service* redis_backend::elections() noexcept { return &elections_; }

}  // namespace corolock::detail
