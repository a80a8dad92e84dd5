#include "redis/lock/lock_service.hpp"

#include <corolock/command.hpp>
#include <corolock/detail/completion.hpp>
#include "core/lock_delay.hpp"
#include "core/logging.hpp"
#include "redis/topology/replica_acks.hpp"

#include <boost/asio/bind_executor.hpp>

#include <spdlog/spdlog.h>

#include <pthread.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <stdexcept>
#include <utility>

namespace corolock::detail {

namespace asio = boost::asio;

namespace {
extra_keys extra_keys_of(lock_spec::kind_t kind) noexcept {
    if (kind == lock_spec::kind_t::fair_mutex) return extra_keys::queue;
    if (kind == lock_spec::kind_t::shared_mutex || kind == lock_spec::kind_t::semaphore)
        return extra_keys::leases;
    return extra_keys::none;
}

void note_renewal_failed(client_impl& c, const redis_lock_state& st, error_code ec) {
    c.metrics().renewal_failed(c.event_observer(), c.log(), st.name, ec);
}
}  // namespace

redis_lock_state::redis_lock_state(std::shared_ptr<lock_backend> b, std::string lock_name,
                                   const lock_spec& s)
    : lock_state(std::move(b), std::move(lock_name), random_owner_id()),
      keys(name, extra_keys_of(s.kind)),
      spec(s) {
    lock_kind::for_spec(s);  // throws for a kind Redis does not offer
}

lock_service::lock_service(std::shared_ptr<client_impl> c)
    : client_(c),
      impl_(*c),
      watchdog_timer_(c->strand()),
      wait_timer_(c->strand()),
      work_(std::make_shared<background_work>(c->strand(), c->get_executor())) {}

std::shared_ptr<lock_service> lock_service::of(client_impl& c) {
    auto& slot = c.lock_service_slot();
    if (!slot) {
        auto svc = std::make_shared<lock_service>(c.shared_from_this());
        c.add_listener(svc);
        slot = svc;
        if (c.stopped()) svc->stopped_ = true;
    }
    return std::static_pointer_cast<lock_service>(slot);
}

replica_acks& lock_service::acks() {
    if (!acks_) {
        acks_ = std::make_shared<replica_acks>(impl_);
        if (stopped_) acks_->stop();
    }
    return *acks_;
}

// ---- scripts ----

void lock_service::run_script(const script& s, std::shared_ptr<script_call> call,
                              bool idempotent, bool priority, bool by_source) {
    detail::run_script(impl_, s, std::move(call), idempotent, priority, by_source);
}

void lock_service::run_script(const script& s, std::span<const std::string_view> keys,
                              std::span<const std::string_view> args, bool idempotent,
                              script_handler handler, bool by_source) {
    detail::run_script(impl_, s, make_stored_call(keys, args, std::move(handler)), idempotent,
                       false, by_source);
}

// One release of one level: the owner-checked release script.
class lock_service::release_call final : public script_call {
public:
    release_call(std::weak_ptr<lock_service> svc, std::shared_ptr<redis_lock_state> st,
                 std::uint64_t level, std::shared_ptr<const tenure> t, clock::time_point sent,
                 bool tracked, release_handler handler, bool direct, bool granted)
        : svc_(std::move(svc)), st_(std::move(st)), tenure_(std::move(t)), level_(level),
          sent_(sent), tracked_(tracked), direct_(direct), granted_(granted),
          handler_(std::move(handler)) {}

    void arguments(script_args& out) const override {
        st_->kind().release_arguments(*st_, level_, out);
    }

    void on_script_reply(error_code ec, reply r) override {
        // {status, receivers of the unlock message}
        if (!ec && (r.type != resp3_type::array || r.elements.size() != 2 ||
                    r.elements[0].type != resp3_type::integer ||
                    r.elements[1].type != resp3_type::integer))
            ec = error::unexpected_reply;
        if (auto s = svc_.lock(); s && st_->spec.kind != lock_spec::kind_t::fair_mutex) {
            std::int64_t receivers = -1;
            if (!ec)
                receivers =
                    static_cast<release_status>(r.elements[0].integer) == release_status::released
                        ? r.elements[1].integer
                        : 0;
            s->on_release_reply(st_->keys.channel(), tracked_, receivers, sent_);
        }
        if (!ec) {
            switch (static_cast<release_status>(r.elements[0].integer)) {
            case release_status::released:
            case release_status::level_released:
            case release_status::already_released: break;
            case release_status::expired: ec = error::expired; break;
            case release_status::not_owner: ec = error::not_owner; break;
            default: ec = error::unexpected_reply; break;
            }
            // The level's tenure was lost: whatever the server holds for this
            // owner now (a later tenure's key) is not this level, and the
            // work done under it was not protected. Never report success.
            if (!ec && tenure_ && tenure_->lost()) ec = error::lock_lost;
            if (ec && granted_ && ec == condition::lease_gone) {
                auto& c = st_->client();
                c.metrics().release_found_gone(c.event_observer(), c.log(), st_->name, ec);
            }
        }
        st_->client().log().debug("release {} level {}: {}", escaped{st_->name}, level_,
                                 ec ? ec.message() : "ok");
        complete_now(std::move(handler_), direct_, st_->client().get_executor(), ec);
    }

private:
    std::weak_ptr<lock_service> svc_;
    std::shared_ptr<redis_lock_state> st_;
    std::shared_ptr<const tenure> tenure_;  // null: nobody asks (a give-back, a dropped guard)
    std::uint64_t level_;
    clock::time_point sent_;
    bool tracked_;
    bool direct_;
    bool granted_;
    release_handler handler_;
};

// One renewal of a held lock's lease by the watchdog.
class lock_service::renew_call final : public script_call {
public:
    // Renews the live tenure for its lease, or with the watchdog off only
    // checks that the lock is still the owner's (lease 0). The server keeps
    // the lease plus the lock-delay; the deadline follows the lease alone.
    renew_call(std::weak_ptr<lock_service> svc, std::shared_ptr<redis_lock_state> st,
               std::uint64_t watch_id, clock::time_point sent)
        : svc_(std::move(svc)), st_(std::move(st)), watch_id_(watch_id), sent_(sent),
          epoch_(st_->live()->epoch),
          lease_(st_->live()->terms.renew_every.count() > 0 ? st_->live()->terms.lease
                                                             : clock::duration::zero()),
          lease_ms_(lease_.count() > 0 ? server_hold_ms(st_->live()->terms) : 0) {}

    void arguments(script_args& out) const override {
        st_->kind().renew_arguments(*st_, lease_ms_, out);
    }

    void on_script_reply(error_code ec, reply r) override {
        auto s = svc_.lock();
        if (!s || s->stopped_) return;
        // Released, lost or re-acquired since: this reply is stale.
        auto* t = st_->live();
        if (!t || t->epoch != epoch_ || !s->schedule_.contains(watch_id_)) return;
        if (clock::now() >= s->schedule_.deadline(watch_id_)) {
            // Confirmed too late: the deadline passed first (the watchdog's
            // tick and this reply were ready together), and the key may have
            // expired on the server meanwhile. A renewal only counts if it is
            // confirmed before the deadline.
            note_renewal_failed(s->impl_, *st_, error::lock_lost);
            s->lose_tenure(st_, "the lease deadline passed before the renewal was confirmed");
        } else if (!ec && r.type == resp3_type::integer &&
                   r.integer == static_cast<int>(renew_status::renewed)) {
            // The deadline follows from the lease this renewal asked for, not
            // the tenure's terms now (a re-entry may have joined a longer one).
            s->schedule_.on_renewed(watch_id_, sent_, lease_);
            t->publish_deadline(s->schedule_.deadline(watch_id_));
        } else if (!ec && r.type == resp3_type::integer) {
            note_renewal_failed(s->impl_, *st_,
                                r.integer == 0 ? error_code(error::expired) : error::not_owner);
            s->lose_tenure(st_, r.integer == 0 ? "the lock expired on the server"
                                               : "another owner holds the lock");
        } else {
            s->impl_.log().warn("renewal of {} failed: {}", escaped{st_->name},
                                ec ? ec.message() : to_string(r));
            s->schedule_.on_renew_failed(watch_id_, clock::now());
            note_renewal_failed(s->impl_, *st_, ec ? ec : error_code(error::unexpected_reply));
        }
        // Only this entry changed: O(1), not a rescan per reply (10,000 held
        // locks would cost 10^8 steps a period).
        s->arm_watchdog_for(watch_id_);
    }

private:
    std::weak_ptr<lock_service> svc_;
    std::shared_ptr<redis_lock_state> st_;
    std::uint64_t watch_id_;
    clock::time_point sent_;
    std::uint64_t epoch_;
    clock::duration lease_;
    std::int64_t lease_ms_;
};

// ---- holding ----

std::shared_ptr<tenure> lock_service::on_acquired(const std::shared_ptr<redis_lock_state>& st,
                                                  std::uint64_t level, clock::time_point sent,
                                                  clock::duration granted,
                                                  const lease_terms& asked) {
    // A re-entry's script extends the TTL (never shortens it): every term
    // joins. A tenure object that no guard refers to any more is reused (the
    // spare slot holds the last hold's): a lock taken and released over and
    // over allocates none after the first.
    const bool first =
        begin_or_join(*st, level, asked, reentry_terms::all, clock::time_point::min(), &spare_tenure_)
            .began;
    if (first) {
        schedule_.add(st->watch_id, sent,
                      std::shared_ptr<const lease_terms>(st->current, &st->current->terms), granted);
        watch(st);
    } else {
        // The re-entry made the TTL at least `granted`; it may also have
        // joined a shorter renewal interval or the watchdog.
        schedule_.on_renewed(st->watch_id, sent, granted);
    }
    st->current->publish_deadline(schedule_.deadline(st->watch_id));
    arm_watchdog_for(st->watch_id);
    return st->current;
}

void lock_service::watch(const std::shared_ptr<redis_lock_state>& st) {
    if (auto it = watched_.find(st->watch_id); it != watched_.end()) {
        it->second = st;
    } else if (spare_watched_) {
        spare_watched_.key() = st->watch_id;
        spare_watched_.mapped() = st;
        watched_.insert(std::move(spare_watched_));
    } else {
        watched_.emplace(st->watch_id, st);
    }
}

void lock_service::unwatch(std::uint64_t watch_id) noexcept {
    auto node = watched_.extract(watch_id);
    if (!node || spare_watched_) return;
    node.mapped().reset();
    spare_watched_ = std::move(node);
}

void lock_service::release_level(const std::shared_ptr<redis_lock_state>& st, std::uint64_t level,
                                 std::shared_ptr<const tenure> t, release_handler handler,
                                 bool direct, bool granted) {
    if (auto it = std::find(st->levels.begin(), st->levels.end(), level); it != st->levels.end()) {
        st->levels.erase(it);
        st->held.store(st->levels.size(), std::memory_order_release);
        if (st->levels.empty()) {
            // The tenure ends here: nothing is protected past this moment.
            const auto now = clock::now();
            if (st->current->deadline() > now) st->current->publish_deadline(now);
            // Stop renewing before the release is even sent: no zombie renewals.
            schedule_.remove(st->watch_id);
            unwatch(st->watch_id);
            if (!spare_tenure_ || spare_tenure_.use_count() > 1) spare_tenure_ = st->current;
            // The timer is not re-armed here: rescanning every held lock on
            // each release would make releasing n locks O(n^2). If it was
            // armed for this lock, it ticks once early and finds nothing.
        }
    }
    const auto sent = clock::now();
    // Only a lock with local waiters can have a wake-up to hold back; a fair
    // mutex's release hands the lock on itself, so nothing is held back.
    const bool fair = st->spec.kind == lock_spec::kind_t::fair_mutex;
    const bool tracked = !fair && waiters_.waiter_count(st->keys.channel()) > 0;
    if (tracked) handoffs_.on_release_sent(st->keys.channel());
    run_script(st->kind().release_script(impl_.sharded_pubsub()),
               std::make_shared<release_call>(weak_from_this(), st, level, std::move(t), sent,
                                              tracked, std::move(handler), direct, granted),
               /*idempotent=*/true);
}

void lock_service::release_in_background(const std::shared_ptr<redis_lock_state>& st,
                                         std::uint64_t level, bool give_back,
                                         const background_work::job& parent) {
    auto job = work_->begin_with(parent);
    release_level(
        st, level, nullptr,
        // On the strand even where the handler is not called directly.
        asio::bind_executor(impl_.strand(),
                            [work = work_, job](error_code) mutable { work->end(job); }),
        /*direct=*/true, !give_back);
}

// ---- connection events ----

void lock_service::on_connected() {
    // Subscriptions died with the old connection. Re-subscribe ahead of any
    // queued acquire, then give one waiter per lock a fresh try, because an
    // unlock message may have been published while we were away.
    for (const auto& channel : waiters_.channels()) send_subscribe(channel, true, true);
    waiters_.wake_one_per_channel();
    // A restart or failover may have dropped held keys: find out one round
    // trip after reconnecting, not at the next renewal.
    verify_held();
    check_eviction_policy();
}

void lock_service::verify_held() {
    // Collected first: a renewal that fails at once may lose its tenure,
    // which takes it out of watched_.
    std::vector<std::shared_ptr<redis_lock_state>> held;
    held.reserve(watched_.size());
    for (const auto& [id, weak] : watched_)
        if (auto st = weak.lock(); st && st->live()) held.push_back(std::move(st));
    for (const auto& st : held) send_renewal(st, /*priority=*/true);
}

void lock_service::send_renewal(const std::shared_ptr<redis_lock_state>& st, bool priority) {
    run_script(st->kind().renew_script(),
               std::make_shared<renew_call>(weak_from_this(), st, st->watch_id, clock::now()),
               /*idempotent=*/true, priority);
    impl_.metrics().add(impl_.metrics().renewals_sent);
}

void lock_service::check_eviction_policy() {
    if (eviction_checked_) return;
    eviction_checked_ = true;
    command cmd{"CONFIG", "GET", "maxmemory-policy"};
    client_impl::exec_options opts;
    opts.direct = true;
    auto self = weak_from_this();
    impl_.exec(cmd.payload(), opts, exec_handler([self](error_code ec, reply r) {
                   auto s = self.lock();
                   // CONFIG may be renamed, disabled or not allowed to this
                   // user: then nothing is known, and nothing is said.
                   if (!s || ec || r.elements.size() < 2) return;
                   const auto& policy = r.elements[1].str;  // {name, value}, map or array
                   if (policy.rfind("allkeys-", 0) == 0)
                       s->impl_.log().warn(
                           "maxmemory-policy is {}: the server may evict lock keys and fencing "
                           "counters under memory pressure (see docs/safety.md); use noeviction",
                           escaped{policy});
                   else if (policy.rfind("volatile-", 0) == 0)
                       s->impl_.log().warn(
                           "maxmemory-policy is {}: the server may evict held lock keys under "
                           "memory pressure (see docs/safety.md); use noeviction",
                           escaped{policy});
               }));
}

void lock_service::on_disconnected() {}

void lock_service::on_push(const reply& r) {
    if (r.elements.size() != 3) return;
    const auto& kind = r.elements[0].str;
    if (kind == "sunsubscribe") {
        // Unasked: the server dropped a shard channel whose slot moved to
        // another node. Subscribe again (it goes to the slot's new primary),
        // and give a waiter a try: a release may have come meanwhile.
        const auto& channel = r.elements[1].str;
        if (waiters_.waiter_count(channel) == 0 || stopped_) return;
        send_subscribe(channel, true, true);
        waiters_.on_message(channel);
        return;
    }
    if (kind != "message" && kind != "smessage") return;
    const auto& channel = r.elements[1].str;
    const auto& payload = r.elements[2].str;
    // A fair mutex's handoff: the lock is granted already, to the waiter it
    // names; nobody else is woken.
    if (!payload.empty() && payload.front() == '>') {
        on_fair_grant(payload);
        return;
    }
    // A payload that starts with '*' comes from a release that may let
    // several waiters in: "*<free permits>" (a semaphore) wakes the local
    // waiters that fit, a bare "*" (readers) every one, and "*w<ms>" (a
    // shared mutex whose readers with writer preference cannot get in for
    // ms more) every one but those readers.
    if (!payload.empty() && payload.front() == '*') {
        if (const auto ms = writers_wake_ms(payload))
            waiters_.wake_writers(channel, *ms);
        else
            waiters_.wake_all(channel, wake_all_count(payload));
        return;
    }
    // Our own release's message comes just before its reply: wait for the
    // reply to know whether other processes' waiters should go first.
    if (handoffs_.wake_on_message(channel)) waiters_.on_message(channel);
}

void lock_service::on_stopped() {
    stopped_ = true;
    watchdog_timer_.cancel();
    handoffs_.for_each_timer([](asio::steady_timer& t) { t.cancel(); });
    wait_timer_.cancel();
    // Taken one at a time from a list of their own: an operation answered
    // here may end others, which then unlink themselves from it.
    // (The new sentinel joins the ring and the old one leaves it.) Each
    // iteration takes one operation out, so this ends.
    hook_node hooks;
    if (stop_hooks_.next != &stop_hooks_) {
        hook_node::link_before(hooks, stop_hooks_);
        hook_node::unlink(stop_hooks_);
    }
    while (hooks.next != &hooks) {
        auto& op = static_cast<wait_target&>(*hooks.next);
        hook_node::unlink(*hooks.next);
        // Nothing may escape: the rest must still be answered, and `hooks`
        // must be empty before it goes out of scope.
        try {
            op.on_client_stopped();
        } catch (const std::exception& e) {
            impl_.log().error("abandoning an acquire on stop failed: {}", escaped{e.what()});
        } catch (...) {
            impl_.log().error("abandoning an acquire on stop failed");
        }
    }
    waits_.clear();
    for (auto& [id, weak] : watched_) {
        if (auto st = weak.lock()) st->signal_lost();
    }
    watched_.clear();
    schedule_.clear();
    work_->stop();
    if (acks_) acks_->stop();
}

void lock_service::on_abandoned() noexcept {
    // Nothing will run again. The waiting operations keep this service
    // alive and it keeps them: drop them, unrun, as Asio drops handlers.
    stopped_ = true;
    while (stop_hooks_.next != &stop_hooks_) hook_node::unlink(*stop_hooks_.next);
    auto dropped = std::move(waits_);
    waits_.clear();
    if (acks_) acks_->abandon();
}

// ---- the watchdog ----

void lock_service::arm_watchdog() { arm_watchdog_at(schedule_.next_wake()); }

void lock_service::arm_watchdog_for(std::uint64_t watch_id) {
    const auto next = schedule_.wake_of(watch_id);
    if (next < armed_at_) arm_watchdog_at(next);
}

void lock_service::arm_watchdog_at(clock::time_point next) {
    if (stopped_) return;
    if (next == armed_at_) return;
    armed_at_ = next;
    if (next == clock::time_point::max()) {
        watchdog_timer_.cancel();
        return;
    }
    watchdog_timer_.expires_at(next);
    watchdog_timer_.async_wait([weak = weak_from_this(), next](error_code ec) {
        auto self = weak.lock();
        if (!self || ec || self->stopped_) return;
        if (self->armed_at_ != next) return;  // superseded by a later arm
        self->armed_at_ = clock::time_point::max();
        self->on_watchdog_tick();
    });
}

void lock_service::lose_tenure(const std::shared_ptr<redis_lock_state>& st, const char* why) {
    if (!lose_live(*st, impl_.metrics(), impl_.log(), why)) return;
    auto* t = st->current.get();
    const auto levels = std::exchange(st->levels, {});
    st->held.store(0, std::memory_order_release);
    schedule_.remove(st->watch_id);
    unwatch(st->watch_id);
    st->signal_lost();
    // If the lease was only presumed lost (renewals unconfirmed), the key may
    // still be ours: remove it, owner-checked, so it cannot outlive us. Each
    // of the tenure's own levels, never all of the owner's: a grant the owner
    // got since (a fair mutex's handoff to a queued re-entry, run on the
    // server before this) is not this tenure's to remove. It is queued now,
    // so it reaches the server before any later re-acquire; it goes by
    // source (EVAL), because a NOSCRIPT answer to EVALSHA would send it
    // again behind whatever was queued meanwhile.
    // With a lock-delay the clean-up keeps the record until it expires
    // (core/lock_delay.hpp): the holder's own loss never shortens the delay.
    const bool keep_delay = t->terms.lock_delay.count() > 0;
    for (const auto level : levels) {
        auto job = work_->begin();
        script_args a;
        st->kind().release_arguments(*st, level, a);
        if (keep_delay) a.arg(std::string_view("lost"));
        run_script(
            st->kind().release_script(impl_.sharded_pubsub()), a.keys(), a.args(), true,
            [work = work_, job](error_code, reply) mutable { work->end(job); },
            /*by_source=*/true);
    }
}

void lock_service::on_watchdog_tick() {
    const auto now = clock::now();
    auto due = schedule_.due(now);
    for (auto id : due.lost) {
        auto it = watched_.find(id);
        if (it == watched_.end()) continue;
        if (auto st = it->second.lock()) {
            lose_tenure(st, "the lease deadline passed without a confirmed renewal");
        } else {
            watched_.erase(it);
        }
    }
    if (!due.renew.empty()) ++renew_batches_;
    for (auto id : due.renew) {
        auto it = watched_.find(id);
        auto st = it == watched_.end() ? nullptr : it->second.lock();
        if (!st) {
            schedule_.remove(id);
            if (it != watched_.end()) watched_.erase(it);
            continue;
        }
        send_renewal(st, /*priority=*/false);
    }
    arm_watchdog();
}

}  // namespace corolock::detail
