#include <corolock/mutex.hpp>

#include <corolock/detail/lock_service.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

namespace corolock {

namespace asio = boost::asio;
using detail::lock_service;
using detail::lock_state;
using clock = std::chrono::steady_clock;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
// The acquire coroutine runs on the client's strand, typed as such (see
// client_impl::awaitable): no boxed strand, no allocation per operation.
using strand_type = detail::client_impl::strand_type;
constexpr auto on_strand = asio::as_tuple(asio::use_awaitable_t<strand_type>{});
constexpr auto min_lease = std::chrono::milliseconds(10);

// One acquire in progress. The caller's handler is completed at most once:
// by the operation's result, by cancellation or by the client stopping. The
// coroutine that talks to Redis may outlive that completion, so that a lock
// granted after the caller gave up is released at once.
struct acquire_op {
    using handler_type = asio::any_completion_handler<mutex::acquire_signature>;

    acquire_op(std::shared_ptr<lock_state> s, lock_options o, bool once, handler_type h)
        : st(std::move(s)),
          opts(o),
          try_once(once),
          handler(std::move(h)),
          // The timer is only touched on the strand, and the coroutine that
          // waits on it resumes there (its own executor). Built on the inner
          // executor, it does not box a strand into an any_io_executor: one
          // heap allocation less per waiter.
          wake(st->client->strand().get_inner_executor()) {}

    std::shared_ptr<lock_state> st;
    lock_options opts;
    bool try_once;
    handler_type handler;
    asio::steady_timer wake;  // the wait; cancel() wakes it early
    detail::unlock_waiters::waiter waiter;
    bool cancelled = false;
    // A wake-up (unlock message) that arrived while no wait was pending, for
    // instance while an attempt was in flight: the next wait returns at once.
    // Without it the wake-up is lost, and the waiter, still marked woken, is
    // skipped by every later message until its TTL cap: starvation.
    bool wake_pending = false;

    // Waits for a wake-up, the timer's expiry (set by the caller), or
    // cancellation; a wake-up that came early counts.
    auto wait() {
        return asio::async_initiate<decltype(on_strand), void(error_code)>(
            [this](auto handler) {
                if (wake_pending) {
                    wake_pending = false;
                    asio::post(wake.get_executor(), asio::append(std::move(handler), error_code{}));
                    return;
                }
                wake.async_wait(std::move(handler));
            },
            on_strand);
    }
    std::uint64_t stop_hook = 0;

    bool completed() const noexcept { return !handler; }

    void complete(error_code ec, guard g) {
        if (!handler) return;
        auto slot = asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        auto ex = asio::get_associated_executor(handler, st->client->get_executor());
        asio::dispatch(ex, asio::append(std::move(handler), ec, std::move(g)));
        handler = {};
    }

    void abandon(error_code ec) {
        cancelled = true;
        complete(ec, {});
        wake.cancel();
    }
};

// Bridges the callback-style lock service into the coroutine.
auto acquire_once(lock_service& svc, const std::shared_ptr<lock_state>& st, std::uint64_t level,
                  clock::duration lease) {
    return asio::async_initiate<decltype(on_strand), void(error_code, detail::acquire_reply)>(
        [&svc, &st, level, lease](auto handler) {
            auto shared = std::make_shared<decltype(handler)>(std::move(handler));
            svc.try_acquire_once(st, level, lease,
                                 [shared](error_code ec, detail::acquire_reply r) {
                                     std::move(*shared)(ec, r);
                                 });
        },
        on_strand);
}

// Worth another attempt within the caller's wait: the connection came back
// or will; the command itself was fine.
bool is_transient(const error_code& ec) {
    return ec == error::timeout || ec == error::connection_lost || ec == error::not_connected;
}

bool is_ambiguous(const error_code& ec) {
    // The command may have run on the server even though we got no answer.
    return ec == error::timeout || ec == error::connection_lost ||
           ec == error::client_stopped || ec == asio::error::operation_aborted;
}

void release_in_background(lock_service& svc, const std::shared_ptr<lock_state>& st,
                           std::uint64_t level) {
    svc.note_background_release(+1);
    svc.release_level(st, level, [svc = svc.shared_from_this()](error_code) {
        svc->note_background_release(-1);
    });
}

asio::awaitable<void, strand_type> run_acquire(std::shared_ptr<acquire_op> op) {
    auto st = op->st;
    auto svc = lock_service::of(*st->client);
    const auto start = clock::now();
    const auto wait_deadline =
        op->opts.wait ? start + *op->opts.wait : clock::time_point::max();
    std::uint64_t level = st->next_level++;
    bool subscribed = false;
    bool acquired = false;
    auto retry_delay = st->client->cfg().reconnect_min;

    op->waiter.wake = [raw = op.get()] {
        if (raw->wake.cancel() == 0) raw->wake_pending = true;
    };
    op->stop_hook = svc->register_stop_hook([raw = op.get()] { raw->abandon(error::client_stopped); });

    // No barging past local waiters: when other handles in this process are
    // already queued for the lock (and it is not ours already), join the back
    // of the queue instead of racing the waiter that a release just woke.
    // Without this, a task that releases and at once acquires again wins
    // nearly every time, and the others starve. The wait is capped like any
    // other, at the holder's TTL as last seen by a local waiter.
    // Nor past other processes' waiters: when this process has just released
    // the lock and others wait for it, hold back for a few round trips so
    // that one of them takes its turn (bounded; see lock_service::yield_until).
    // Local waiters need no such wait: their wake-up itself is held back.
    if (!op->try_once && st->levels.empty()) {
        const auto until = std::min(svc->yield_until(st->keys.channel), wait_deadline);
        if (until > clock::now()) {
            op->wake.expires_at(until);
            co_await op->wake.async_wait(on_strand);
        }
    }
    if (!op->try_once && st->levels.empty() && !op->completed()) {
        const auto now = clock::now();
        const auto free_by = svc->expiry_hint(st->keys.channel);
        if (free_by > now && svc->waiters().waiter_count(st->keys.channel) > 0) {
            svc->add_waiter(op->waiter, st->keys.channel);
            subscribed = true;
            op->wake.expires_at(std::min(free_by, wait_deadline));
            co_await op->wait();
            if (!op->completed()) svc->rearm_waiter(op->waiter);
        }
    }

    // Bounded: every pass either completes, or waits on a timer capped by the
    // wait deadline and the holder's TTL; the caller's cancellation and the
    // client's stop both end it.
    while (!op->completed()) {
        const auto sent = clock::now();
        auto [ec, r] = co_await acquire_once(*svc, st, level, op->opts.lease);
        if (!ec && r.acquired) {
            if (op->completed()) {
                // Granted after the caller gave up: hand it straight back.
                st->client->log().debug("acquire {}: granted after cancellation; releasing",
                                        st->name);
                release_in_background(*svc, st, level);
            } else {
                acquired = true;
                svc->on_acquired(st, level, sent, op->opts);
                op->complete({}, detail::make_guard(st, level, r.token, st->tenure));
            }
            break;
        }
        if (ec) {
            // The script may have run: give that level back. It is owner- and
            // level-checked, so it is harmless if nothing was granted.
            if (is_ambiguous(ec) && !svc->stopped()) release_in_background(*svc, st, level);
            const auto now = clock::now();
            if (is_transient(ec) && !op->try_once && !op->completed() && now < wait_deadline &&
                !svc->stopped()) {
                // A lost connection or an unanswered command does not end a
                // wait: try again (with a fresh level, the old one is being
                // released) once the client has had time to reconnect.
                st->client->log().info("acquire {}: {}; retrying", st->name, ec.message());
                level = st->next_level++;
                op->wake.expires_at(std::min(now + retry_delay, wait_deadline));
                retry_delay = std::min(retry_delay * 2, st->client->cfg().reconnect_max);
                co_await op->wait();
                if (op->completed()) break;
                if (subscribed) svc->rearm_waiter(op->waiter);
                continue;
            }
            st->client->log().debug("acquire {} failed: {}", st->name, ec.message());
            op->complete(ec, {});
            break;
        }
        if (op->completed()) break;
        if (op->try_once) {
            op->complete(error::lock_held, {});
            break;
        }
        const auto now = clock::now();
        if (now >= wait_deadline) {
            op->complete(error::wait_timeout, {});
            break;
        }
        if (!subscribed) {
            // Contended: subscribe, then try again at once. The retry is
            // written after the SUBSCRIBE on the same connection, so an
            // unlock published after it was refused cannot be missed.
            svc->add_waiter(op->waiter, st->keys.channel);
            subscribed = true;
            continue;
        }
        // The holder's TTL caps the wait: a lost unlock message costs at most
        // one TTL, never a hang. A key without a TTL (not ours) is rechecked
        // once a lease period.
        const auto ttl = r.pttl >= 0 ? clock::duration(std::chrono::milliseconds(r.pttl + 1))
                                     : clock::duration(op->opts.lease);
        svc->note_expiry_hint(st->keys.channel, now + ttl);
        op->wake.expires_at(std::min(now + ttl, wait_deadline));
        co_await op->wait();
        if (op->completed()) break;
        svc->rearm_waiter(op->waiter);
    }
    if (subscribed) svc->remove_waiter(op->waiter, acquired);
    svc->unregister_stop_hook(op->stop_hook);
}

}  // namespace

error_code validate_lock_name(std::string_view name, std::string& why) {
    if (name.empty()) {
        why = "lock name is empty";
        return error::invalid_argument;
    }
    if (name.size() > max_lock_name_length) {
        why = "lock name is " + std::to_string(name.size()) + " bytes; the limit is " +
              std::to_string(max_lock_name_length);
        return error::invalid_argument;
    }
    if (name.find_first_of("{}") != std::string_view::npos) {
        why = "lock name contains '{' or '}' (the name is the keys' cluster hash tag)";
        return error::invalid_argument;
    }
    why.clear();
    return {};
}

namespace {
error_code normalize(lock_options& o, std::string& why) {
    using std::chrono::milliseconds;
    if (o.lease < min_lease) {
        why = o.lease.count() <= 0 ? "lease must be positive (at least 10 ms)"
                                   : "lease must be at least 10 ms";
        return error::invalid_argument;
    }
    if (o.wait && o.wait->count() < 0) {
        why = "wait must not be negative";
        return error::invalid_argument;
    }
    if (o.renew_interval.count() < 0 || (o.renew_interval.count() > 0 && o.renew_interval >= o.lease)) {
        why = "renew_interval must be positive and below the lease";
        return error::invalid_argument;
    }
    if (o.renew_interval.count() == 0) o.renew_interval = o.lease / 3;
    return {};
}
}  // namespace

mutex::mutex(client& c, std::string name) {
    std::string why;
    if (auto ec = validate_lock_name(name, why); ec) throw boost::system::system_error(ec, why);
    state_ = std::make_shared<lock_state>(c.impl(), std::move(name), detail::random_owner_id());
}

mutex::~mutex() = default;

const std::string& mutex::name() const noexcept { return state_->name; }
const std::string& mutex::owner_id() const noexcept { return state_->owner; }
std::size_t mutex::held_levels() const noexcept {
    return state_->held.load(std::memory_order_acquire);
}

void mutex::acquire_impl(lock_options opts, bool try_once,
                         asio::any_completion_handler<acquire_signature> handler) {
    auto& client = *state_->client;
    std::string why;
    if (auto ec = normalize(opts, why); ec) {
        client.log().debug("acquire {}: {}", state_->name, why);
        asio::post(client.get_executor(), asio::append(std::move(handler), ec, guard{}));
        return;
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<acquire_op>(state_, opts, try_once, std::move(handler));
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<acquire_op>(op)](asio::cancellation_type) {
            auto o = weak.lock();
            if (!o) return;
            // Posted: completing clears this slot, which must not happen
            // from inside the slot's own handler.
            asio::post(o->st->client->strand(), [o] { o->abandon(asio::error::operation_aborted); });
        });
    }
    // Posted, so that even an immediate completion never runs inside this call.
    asio::post(client.strand(), [op] {
        auto& c = *op->st->client;
        if (c.stopped()) {
            op->complete(error::client_stopped, {});
            return;
        }
        asio::co_spawn(c.strand(), run_acquire(op), [op](std::exception_ptr e) {
            if (!e) return;
            // Only allocation failure can get here; never leave the caller hanging.
            op->complete(error::client_stopped, {});
        });
    });
}

asio::awaitable<guard> mutex::acquire(lock_options opts) {
    auto [ec, g] = co_await async_acquire(opts, use_nothrow);
    if (ec) throw boost::system::system_error(ec, "corolock: acquire '" + state_->name + "'");
    co_return std::move(g);
}

asio::awaitable<std::optional<guard>> mutex::try_acquire(lock_options opts) {
    auto [ec, g] = co_await async_try_acquire(opts, use_nothrow);
    if (ec == error::lock_held) co_return std::nullopt;
    if (ec) throw boost::system::system_error(ec, "corolock: try_acquire '" + state_->name + "'");
    co_return std::optional<guard>(std::move(g));
}

}  // namespace corolock
