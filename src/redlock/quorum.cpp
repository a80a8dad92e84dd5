#include "redlock/quorum.hpp"

#include "core/watchdog_schedule.hpp"

#include <algorithm>
#include <cassert>
#include <functional>

namespace corolock::detail {

redlock_quorum::redlock_quorum(std::size_t nodes) : nodes_(nodes) {
    assert(nodes >= 1);
}

void redlock_quorum::begin_round(clock::time_point started, clock::duration lease) {
    started_ = started;
    lease_ = lease;
    for (node& n : nodes_) n = node{};
}

void redlock_quorum::on_granted(std::size_t i, std::uint64_t token) {
    node& n = nodes_.at(i);
    if (n.state != node_state::pending) return;
    n.state = node_state::held;
    n.token = token;
    // Every request of the round was written after started_: the key lives
    // at least this long on a node whose clock runs within the drift.
    n.deadline = watchdog_schedule::deadline_for(started_, lease_);
}

void redlock_quorum::on_refused(std::size_t i) {
    node& n = nodes_.at(i);
    if (n.state == node_state::pending) n.state = node_state::refused;
}

void redlock_quorum::on_failed(std::size_t i) {
    node& n = nodes_.at(i);
    if (n.state == node_state::pending) n.state = node_state::failed;
}

std::size_t redlock_quorum::count(node_state s) const noexcept {
    return static_cast<std::size_t>(
        std::count_if(nodes_.begin(), nodes_.end(), [s](const node& n) { return n.state == s; }));
}

std::size_t redlock_quorum::held_at(clock::time_point now) const noexcept {
    return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [now](const node& n) {
        return n.state == node_state::held && n.deadline > now;
    }));
}

redlock_quorum::clock::duration redlock_quorum::validity(clock::time_point now) const noexcept {
    return watchdog_schedule::deadline_for(started_, lease_) - now;
}

redlock_quorum::outcome redlock_quorum::decide(clock::time_point now) const {
    if (validity(now) <= clock::duration::zero()) return outcome::failed;
    const std::size_t held = count(node_state::held);
    if (held >= majority()) return outcome::granted;
    if (held + count(node_state::pending) < majority()) return outcome::failed;
    return outcome::pending;
}

redlock_quorum::clock::time_point redlock_quorum::deadline() const {
    // The majority()-th latest deadline among the held nodes: until then at
    // least a majority of nodes keep the key.
    std::vector<clock::time_point> d;
    d.reserve(nodes_.size());
    for (const node& n : nodes_)
        if (n.state == node_state::held) d.push_back(n.deadline);
    const std::size_t m = majority();
    if (d.size() < m) return clock::time_point::min();
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(m - 1), d.end(),
                     std::greater<>());
    return d[m - 1];
}

void redlock_quorum::on_renewed(std::size_t i, clock::time_point sent, clock::duration lease) {
    on_confirmed_until(i, watchdog_schedule::deadline_for(sent, lease));
}

void redlock_quorum::on_confirmed_until(std::size_t i, clock::time_point deadline) {
    node& n = nodes_.at(i);
    if (n.state == node_state::refused) return;  // the key is someone else's or gone
    n.state = node_state::held;
    n.deadline = std::max(n.deadline, deadline);
}

void redlock_quorum::on_renew_refused(std::size_t i) {
    node& n = nodes_.at(i);
    n.state = node_state::refused;
    n.deadline = clock::time_point::min();
}

void redlock_quorum::on_renew_failed(std::size_t) noexcept {}

std::uint64_t redlock_quorum::max_token() const noexcept {
    std::uint64_t t = 0;
    for (const node& n : nodes_)
        if (n.state == node_state::held) t = std::max(t, n.token);
    return t;
}

}  // namespace corolock::detail
