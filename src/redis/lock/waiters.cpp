#include "redis/lock/waiters.hpp"

#include <cassert>

namespace corolock::detail {

bool unlock_waiters::add(waiter& w, std::string_view channel) {
    assert(!w.registered);
    auto it = find_channel(channels_, channel);
    const bool inserted = it == channels_.end();
    if (inserted) it = channels_.try_emplace(std::string(channel)).first;
    // Everything that can throw comes first: the waiter counts as registered
    // only once the list holds it.
    try {
        w.pos = it->second.insert(it->second.end(), &w);
    } catch (...) {
        if (inserted) channels_.erase(it);
        throw;
    }
    w.channel = &it->first;
    w.woken = false;
    w.registered = true;
    ++total_;
    return inserted;
}

bool unlock_waiters::remove(waiter& w, bool acquired) {
    if (!w.registered) return false;
    auto it = find_channel(channels_, *w.channel);
    assert(it != channels_.end());
    w.channel = nullptr;
    it->second.erase(w.pos);
    w.registered = false;
    --total_;
    const bool pass_on = w.woken && !acquired;
    w.woken = false;
    if (it->second.empty()) {
        channels_.erase(it);
        return true;
    }
    if (pass_on) wake_first(it->second);
    return false;
}

bool unlock_waiters::wake_first(std::list<waiter*>& list) {
    for (waiter* w : list) {
        if (w->woken) continue;
        w->woken = true;
        if (w->wake) w->wake(w->context);
        return true;
    }
    return false;
}

bool unlock_waiters::on_message(std::string_view channel) {
    auto it = find_channel(channels_, channel);
    if (it == channels_.end()) return false;
    return wake_first(it->second);
}

std::size_t unlock_waiters::wake_all(std::string_view channel, std::uint64_t free) {
    auto it = find_channel(channels_, channel);
    if (it == channels_.end()) return 0;
    std::size_t n = 0;
    // wake() may not add or remove waiters, so the list is stable.
    for (waiter* w : it->second) {
        if (w->woken || w->need > free) continue;
        free -= w->need;
        w->woken = true;
        ++n;
        if (w->wake) w->wake(w->context);
    }
    return n;
}

std::size_t unlock_waiters::wake_writers(std::string_view channel, std::uint64_t ms) {
    auto it = find_channel(channels_, channel);
    if (it == channels_.end()) return 0;
    std::size_t n = 0;
    // Neither wake() nor defer() may add or remove waiters.
    for (waiter* w : it->second) {
        if (w->woken) continue;
        if (w->yields) {
            if (w->defer) w->defer(w->context, ms);
            continue;
        }
        w->woken = true;
        ++n;
        if (w->wake) w->wake(w->context);
    }
    return n;
}

void unlock_waiters::wake_one_per_channel() {
    // wake() may not add or remove waiters (callers defer that work), so the
    // map is stable while we walk it.
    for (auto& [name, list] : channels_) wake_first(list);
}

std::vector<std::string> unlock_waiters::channels() const {
    std::vector<std::string> out;
    out.reserve(channels_.size());
    for (const auto& [name, list] : channels_) out.push_back(name);
    return out;
}

std::size_t unlock_waiters::waiter_count(std::string_view channel) const {
    auto it = find_channel(channels_, channel);
    return it == channels_.end() ? 0 : it->second.size();
}

namespace {

// Decimal digits (at most 19, so no overflow), or nullopt.
std::optional<std::uint64_t> digits(std::string_view s) noexcept {
    if (s.empty() || s.size() > 19) return std::nullopt;
    std::uint64_t n = 0;
    for (char ch : s) {
        if (ch < '0' || ch > '9') return std::nullopt;
        n = n * 10 + static_cast<std::uint64_t>(ch - '0');
    }
    return n;
}

}  // namespace

std::uint64_t wake_all_count(std::string_view payload) noexcept {
    if (payload.empty()) return std::numeric_limits<std::uint64_t>::max();
    return digits(payload.substr(1)).value_or(std::numeric_limits<std::uint64_t>::max());
}

std::optional<std::uint64_t> writers_wake_ms(std::string_view payload) noexcept {
    if (payload.size() < 3 || payload.substr(0, 2) != "*w") return std::nullopt;
    return digits(payload.substr(2));
}

}  // namespace corolock::detail
