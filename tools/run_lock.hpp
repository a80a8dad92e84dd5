// What corolock run takes (run_lock: one of the lock kinds, made from the
// options) and what it then holds (held_lock).
#pragma once

#include "cli.hpp"

#include <corolock/backend.hpp>
#include <corolock/election.hpp>
#include <corolock/fair_mutex.hpp>
#include <corolock/guard.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>
#include <corolock/printable.hpp>
#include <corolock/semaphore.hpp>
#include <corolock/shared_mutex.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace corolock::cli {

// What run holds: one NAME's guard, or the multi_guard of several NAMEs;
// elect: a term (the same calls on each; its release is the resignation).
class held_lock {
public:
    held_lock() = default;
    explicit held_lock(guard g) noexcept : one_(std::move(g)) {}
    explicit held_lock(multi_guard g) noexcept : many_(std::move(g)), several_(true) {}
    explicit held_lock(leadership t) noexcept : term_(std::move(t)), elected_(true) {}

    explicit operator bool() const noexcept {
        if (elected_) return static_cast<bool>(term_);
        return several_ ? many_.owns_lock() : one_.owns_lock();
    }
    guard::clock::time_point lease_deadline() const noexcept {
        if (elected_) return term_.lease_deadline();
        return several_ ? many_.lease_deadline() : one_.lease_deadline();
    }
    // Each name with its token, in canonical order (elect: the epoch).
    std::vector<std::pair<std::string, std::uint64_t>> tokens(const run_options& o) const {
        if (elected_) return {{o.names.front(), term_.epoch()}};
        if (several_) return many_.tokens();
        return {{o.names.front(), one_.token()}};
    }
    // The tokens for -v: "42", or "a=42, b=7".
    std::string tokens_text() const {
        if (elected_) return "epoch " + std::to_string(term_.epoch());
        if (!several_) return std::to_string(one_.token());
        std::string out;
        for (const auto& [name, token] : many_.tokens())
            out += (out.empty() ? "" : ", ") + printable(name) + "=" + std::to_string(token);
        return out;
    }
    template <class Token>
    auto async_until_lost(Token&& token) const {
        if (elected_) return term_.async_until_lost(std::forward<Token>(token));
        if (several_) return many_.async_until_lost(std::forward<Token>(token));
        return one_.async_until_lost(std::forward<Token>(token));
    }
    template <class Token>
    auto async_release(Token&& token) {
        if (elected_) return term_.async_resign(std::forward<Token>(token));
        if (several_) return many_.async_release(std::forward<Token>(token));
        return one_.async_release(std::forward<Token>(token));
    }

private:
    guard one_;
    multi_guard many_;
    leadership term_;
    bool several_ = false;
    bool elected_ = false;
};

// The lock `run` takes: a mutex, a fair_mutex (--fair), a semaphore
// (--capacity), a shared mutex's level (-s, -x) or, for several NAMEs, a
// multi_lock; one of them made from the options.
class run_lock {
public:
    run_lock(const backend& b, const run_options& o) : permits_(o.permits), level_(o.level) {
        if (o.elect()) {
            election_.emplace(b, o.names.front());
            leader_value_ = *o.leader_value;
        } else if (o.several())
            multi_.emplace(b, o.names);
        else if (o.capacity > 0)
            semaphore_.emplace(b, o.names.front(), o.capacity);
        else if (o.level != lock_level::mutex)
            shared_.emplace(b, o.names.front());
        else if (o.fair)
            fair_.emplace(b, o.names.front());
        else
            plain_.emplace(b, o.names.front());
    }
    // The owner id of the one lock; empty for several NAMEs (one per name).
    const std::string& owner_id() const noexcept {
        static const std::string none;
        if (multi_ || election_) return none;
        if (semaphore_) return semaphore_->owner_id();
        if (shared_) return shared_->owner_id();
        return fair_ ? fair_->owner_id() : plain_->owner_id();
    }
    // A semaphore's or shared mutex's holders are many: there is no one
    // holder to look up.
    bool has_many_holders() const noexcept { return semaphore_ || shared_; }
    template <class Token>
    auto async_acquire(lock_options opts, Token&& token) {
        if (semaphore_)
            return semaphore_->async_acquire(permits_, opts, std::forward<Token>(token));
        if (shared_ && level_ == lock_level::shared)
            return shared_->async_acquire_shared(opts, std::forward<Token>(token));
        if (shared_) return shared_->async_acquire(opts, std::forward<Token>(token));
        if (fair_) return fair_->async_acquire(opts, std::forward<Token>(token));
        return plain_->async_acquire(opts, std::forward<Token>(token));
    }
    // Acquires, cancelled through `slot`.
    boost::asio::awaitable<std::tuple<error_code, held_lock>> acquire(
        lock_options opts, boost::asio::cancellation_slot slot) {
        if (election_) {
            auto [ec, t] = co_await election_->async_campaign(
                leader_value_, opts, boost::asio::bind_cancellation_slot(slot, use_nothrow));
            co_return std::tuple<error_code, held_lock>{ec, held_lock(std::move(t))};
        }
        if (multi_) {
            auto [ec, g] = co_await multi_->async_acquire(
                opts, boost::asio::bind_cancellation_slot(slot, use_nothrow));
            co_return std::tuple<error_code, held_lock>{ec, held_lock(std::move(g))};
        }
        auto [ec, g] =
            co_await async_acquire(opts, boost::asio::bind_cancellation_slot(slot, use_nothrow));
        co_return std::tuple<error_code, held_lock>{ec, held_lock(std::move(g))};
    }

private:
    std::uint32_t permits_;
    lock_level level_;
    std::optional<shared_mutex> shared_;
    std::optional<mutex> plain_;
    std::optional<fair_mutex> fair_;
    std::optional<semaphore> semaphore_;
    std::optional<multi_lock> multi_;
    std::optional<election> election_;  // elect
    std::string leader_value_;
};

}  // namespace corolock::cli
