// The Lua scripts of the lock protocol, in one place. docs/protocol.md
// describes the same layout; keep the two in step.
//
// Keys of one lock share the hash tag {name}, so a lock works on Redis Cluster:
//   corolock:{name}         hash: owner, fence (last token), holder, l:<level> = token
//   corolock:{name}:fence   integer: the fencing-token counter (never expires)
//   corolock:{name}:unlock  pub/sub channel: a message on every full release
//                           (a shard channel, SPUBLISH, on a Redis Cluster)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace corolock::detail {

struct script {
    std::string_view name;
    std::string_view source;
    std::string sha1;  // lowercase hex, computed once
};

// A script of another lock kind: its SHA1 computed once. `source` must
// outlive the script (a static string).
script make_script(std::string_view name, std::string_view source);
// The Lua function mint_token(counter key, server time in µs) -> token, the
// hybrid logical clock of the fence counter, for a kind's script to prepend.
std::string_view token_minting_lua() noexcept;
// The Lua function expiry_of(key): when the server ends a key's TTL, in µs
// from now (scripts.cpp).
std::string_view expiry_timing_lua() noexcept;
// The Lua helpers of the kinds that keep lease ends in a sorted set (a
// shared mutex's readers, a semaphore's owners): server_now() -> µs, ms;
// num(n); wrong_type(key, what); take_ended(set, now) -> up to PRUNE_LIMIT
// (64) owners whose lease ended, removed from the set; extend(hash, set,
// ms[, new_set, hash_only]): both keys live at least ms more, never
// shortened.
std::string_view lease_set_lua() noexcept;
// The `kind` of a semaphore's hash while one owner holds it (its lease end
// is then the hash's; semaphore_scripts.hpp). Its own value, not
// "semaphore", so that scripts from before that layout refuse such a hash
// (WRONGTYPE) instead of miscounting it; status reports it as a semaphore.
inline constexpr std::string_view sole_semaphore_kind = "sole semaphore";
// The same source announcing with SPUBLISH instead of PUBLISH (a cluster).
std::string sharded_publish(std::string source);

const script& acquire_script();
// `sharded`: the variant that announces the release with SPUBLISH (Redis 7
// sharded pub/sub, on a cluster) instead of PUBLISH.
const script& release_script(bool sharded = false);
const script& renew_script();
// KEYS lock hash, fence counter, fair queue entries (lock_keys made with
// `queue`); break also the unlock channel. Both reply with the lock's
// description (scripts.cpp, describe).
const script& status_script();
// The sequencer check's read (token_state_lua, scripts.cpp).
const script& token_state_script();
const script& break_script(bool sharded = false);
// Re-writes a granted level's TTL, owner-checked: replica acknowledgement.
const script& confirm_script();

// The keys a kind has beside the hash, fence counter and channel: a fair
// mutex's queue and entries (fair_scripts.hpp), the sorted set of lease
// ends of a shared mutex's readers or a semaphore's owners
// (shared_scripts.hpp, semaphore_scripts.hpp).
enum class extra_keys : std::uint8_t { none, queue, leases };

// A lock's keys, in one buffer: "corolock:{name}:fence" then
// "corolock:{name}:unlock", then the extra keys: "corolock:{name}:queue" and
// "corolock:{name}:entries", or "corolock:{name}:leases". The lock key is
// the first one's prefix, and every length follows from its length and the
// buffer's: two offsets instead of five views, since every handle holds one.
class lock_keys {
public:
    explicit lock_keys(std::string_view name, extra_keys extra = extra_keys::none);

    std::string_view lock() const noexcept { return {buffer_.data(), lock_size_}; }   // the hash
    std::string_view fence() const noexcept { return {buffer_.data(), fence_size_}; } // the token counter
    std::string_view channel() const noexcept {  // the unlock channel
        return std::string_view(buffer_).substr(fence_size_, lock_size_ + 7);
    }
    // A fair mutex's queue keys; empty unless made with extra_keys::queue.
    std::string_view queue() const noexcept {
        if (extra_size() != 2 * lock_size_ + 14) return {};
        return {buffer_.data() + base_size(), lock_size_ + 6};
    }
    std::string_view entries() const noexcept {
        if (extra_size() != 2 * lock_size_ + 14) return {};
        return {buffer_.data() + base_size() + lock_size_ + 6, lock_size_ + 8};
    }
    // A shared mutex's or semaphore's lease ends; empty unless made with
    // extra_keys::leases.
    std::string_view leases() const noexcept {
        if (extra_size() != lock_size_ + 7) return {};
        return {buffer_.data() + base_size(), lock_size_ + 7};
    }

private:
    std::size_t base_size() const noexcept { return fence_size_ + lock_size_ + 7; }
    std::size_t extra_size() const noexcept { return buffer_.size() - base_size(); }

    std::string buffer_;
    std::uint32_t lock_size_ = 0;
    std::uint32_t fence_size_ = 0;
};
lock_keys keys_for(std::string_view name);

// Lock keys are "corolock:{" + name + "}"; a valid name has no braces, so
// the fence counter "corolock:{name}:fence" never matches. Empty when key
// is not a lock key.
std::string_view lock_name_of_key(std::string_view key) noexcept;

// Script return codes, mirrored from the Lua comments.
enum class release_status : int {
    released = 1,         // last level gone: lock deleted, unlock published
    level_released = 2,   // this level gone, the owner still holds other levels
    already_released = 3, // this level was gone already (a retry); lock still ours
    expired = 0,          // no lock at all
    not_owner = -1,       // another owner holds it
};
enum class renew_status : int { renewed = 1, expired = 0, not_owner = -1 };
enum class confirm_status : int { confirmed = 1, expired = 0, not_owner = -1, level_gone = -2 };

// The level argument that makes the release script drop every level of the
// owner at once (cleanup after a lost lease).
inline constexpr std::string_view all_levels = "*";

}  // namespace corolock::detail
