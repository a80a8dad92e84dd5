#include "etcd/lease_pool.hpp"

#include "core/watchdog_schedule.hpp"

#include <algorithm>
#include <utility>

namespace corolock::detail::etcd {

lease_pool::clock::time_point lease_pool::deadline_of(clock::time_point sent,
                                                      clock::duration duration,
                                                      std::int64_t ttl_seconds) noexcept {
    const auto granted =
        std::chrono::duration_cast<clock::duration>(std::chrono::seconds(ttl_seconds));
    return watchdog_schedule::deadline_for(sent, std::min(duration, granted));
}

std::int64_t lease_pool::ttl_seconds(clock::duration duration) noexcept {
    const auto s = std::chrono::ceil<std::chrono::seconds>(duration).count();
    return std::max<std::int64_t>(s, 1);
}

lease_pool::reserved lease_pool::reserve(clock::duration duration, clock::time_point now,
                                         lease_id& id) {
    auto [it, fresh] = by_duration_.try_emplace(duration);
    auto& l = it->second;
    id = l.id;
    if (l.id != 0 && now >= l.deadline) return reserved::stale;
    ++l.users;
    if (fresh) {
        l.duration = duration;
        return reserved::grant;
    }
    return l.id == 0 ? reserved::wait : reserved::ready;
}

void lease_pool::on_granted(clock::duration duration, lease_id id, std::int64_t ttl,
                            clock::time_point sent) {
    auto it = by_duration_.find(duration);
    if (it == by_duration_.end() || it->second.id != 0) return;
    auto& l = it->second;
    l.id = id;
    l.deadline = deadline_of(sent, duration, ttl);
    l.renew_at = sent + renew_every(duration);
    l.idle_since = sent;
    by_id_[id] = duration;
}

void lease_pool::on_grant_failed(clock::duration duration) noexcept {
    auto it = by_duration_.find(duration);
    if (it != by_duration_.end() && it->second.id == 0) by_duration_.erase(it);
}

void lease_pool::release(lease_id id, clock::time_point now) noexcept {
    auto* l = find_mut(id);
    if (!l || l->users == 0) return;
    if (--l->users == 0) l->idle_since = now;
}

void lease_pool::add_holder(lease_id id, holder_id h) {
    if (auto* l = find_mut(id)) l->holders.push_back(h);
}

void lease_pool::remove_holder(lease_id id, holder_id h) noexcept {
    auto* l = find_mut(id);
    if (!l) return;
    auto& v = l->holders;
    v.erase(std::remove(v.begin(), v.end(), h), v.end());
}

lease_pool::action lease_pool::due(lease_id id, clock::time_point now) {
    auto* l = find_mut(id);
    if (!l) return action::none;
    if (now >= l->deadline) return action::lose;
    if (l->users == 0 && now >= l->idle_since + l->duration) return action::revoke;
    if (!l->renewing && now >= l->renew_at) {
        l->renewing = true;
        return action::renew;
    }
    return action::none;
}

lease_pool::clock::time_point lease_pool::next_wake(lease_id id) const noexcept {
    const auto* l = find(id);
    if (!l) return clock::time_point::max();
    auto t = l->deadline;
    if (!l->renewing) t = std::min(t, l->renew_at);
    if (l->users == 0) t = std::min(t, l->idle_since + l->duration);
    return t;
}

bool lease_pool::on_keepalive(lease_id id, clock::time_point sent, std::int64_t ttl,
                              clock::time_point now) noexcept {
    auto* l = find_mut(id);
    if (!l) return false;
    l->renewing = false;
    if (ttl <= 0 || now >= l->deadline) return false;
    l->deadline = std::max(l->deadline, deadline_of(sent, l->duration, ttl));
    l->renew_at = sent + renew_every(l->duration);
    return true;
}

void lease_pool::on_keepalive_failed(lease_id id, clock::time_point now) noexcept {
    auto* l = find_mut(id);
    if (!l) return;
    l->renewing = false;
    l->renew_at = now + renew_every(l->duration) / 4;
}

std::optional<lease_pool::lease> lease_pool::remove(lease_id id) noexcept {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    auto d = by_duration_.find(it->second);
    by_id_.erase(it);
    if (d == by_duration_.end() || d->second.id != id) return std::nullopt;
    auto out = std::move(d->second);
    by_duration_.erase(d);
    return out;
}

const lease_pool::lease* lease_pool::find(lease_id id) const noexcept {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    auto d = by_duration_.find(it->second);
    return d == by_duration_.end() || d->second.id != id ? nullptr : &d->second;
}

lease_pool::lease* lease_pool::find_mut(lease_id id) noexcept {
    return const_cast<lease*>(std::as_const(*this).find(id));
}

bool lease_pool::alive(lease_id id, clock::time_point now) const noexcept {
    const auto* l = find(id);
    return l && now < l->deadline;
}

}  // namespace corolock::detail::etcd
