#include <corolock/detail/scripts.hpp>

#include <openssl/evp.h>

#include <array>
#include <cstdio>

namespace corolock::detail {

namespace {

std::string sha1_hex(std::string_view text) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_Digest(text.data(), text.size(), digest.data(), &len, EVP_sha1(), nullptr);
    std::string hex;
    hex.reserve(len * 2);
    constexpr char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < len; ++i) {
        hex.push_back(digits[digest[i] >> 4]);
        hex.push_back(digits[digest[i] & 0xf]);
    }
    return hex;
}

script make(std::string_view name, std::string_view source) {
    return script{name, source, sha1_hex(source)};
}

// KEYS[1] lock hash, KEYS[2] fence counter
// ARGV[1] owner id, ARGV[2] lease in ms, ARGV[3] level id (unique per owner)
// Returns {1, token, levels, pttl} when acquired or re-entered,
//         {0, 0, levels, pttl}     when another owner holds it (pttl -1: no TTL).
// WRONGTYPE when the name's key holds a value that is not a corolock hash.
constexpr std::string_view acquire_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then
  return {0, 0, redis.call('HLEN', KEYS[1]) - 2, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', token, 'l:' .. ARGV[3], token)
local lease = tonumber(ARGV[2])
local pttl = redis.call('PTTL', KEYS[1])
if pttl < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
  pttl = lease
end
return {1, token, redis.call('HLEN', KEYS[1]) - 2, pttl}
)lua";

// KEYS[1] lock hash, KEYS[2] unlock channel
// ARGV[1] owner id, ARGV[2] level id, or "*" for every level of the owner
// Returns {status, receivers}: status 1 released (lock deleted, unlock
// published to `receivers` subscribed connections), 2 level released but
// other levels remain, 3 level was already gone (a retry), 0 no lock,
// -1 another owner holds it. Touches nothing unless the owner matches.
constexpr std::string_view release_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return {0, 0} end
if owner ~= ARGV[1] then return {-1, 0} end
if ARGV[2] ~= '*' then
  if redis.call('HDEL', KEYS[1], 'l:' .. ARGV[2]) == 0 then return {3, 0} end
  if redis.call('HLEN', KEYS[1]) > 2 then return {2, 0} end
end
redis.call('DEL', KEYS[1])
return {1, redis.call('PUBLISH', KEYS[2], ARGV[1])}
)lua";

// KEYS[1] lock hash
// ARGV[1] owner id, ARGV[2] lease in ms
// Returns 1 renewed, 0 no lock, -1 another owner holds it.
constexpr std::string_view renew_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return 0 end
if owner ~= ARGV[1] then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
)lua";

// KEYS[1] lock hash, KEYS[2] fence counter
// Returns {owner or '', pttl, levels, last token}; read-only.
constexpr std::string_view status_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
local levels = 0
if owner ~= '' then levels = redis.call('HLEN', KEYS[1]) - 2 end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
return {owner, redis.call('PTTL', KEYS[1]), levels, last}
)lua";

// KEYS[1] lock hash, KEYS[2] unlock channel
// Force-releases whatever holds the lock and wakes waiters.
// Returns {owner or '', levels removed}.
constexpr std::string_view break_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return {'', 0} end
local levels = redis.call('HLEN', KEYS[1]) - 2
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], owner)
return {owner, levels}
)lua";

}  // namespace

const script& acquire_script() {
    static const script s = make("acquire", acquire_lua);
    return s;
}
const script& release_script() {
    static const script s = make("release", release_lua);
    return s;
}
const script& renew_script() {
    static const script s = make("renew", renew_lua);
    return s;
}
const script& status_script() {
    static const script s = make("status", status_lua);
    return s;
}
const script& break_script() {
    static const script s = make("break", break_lua);
    return s;
}

namespace {
constexpr std::string_view key_prefix = "corolock:{";
constexpr std::string_view fence_suffix = "}:fence";
constexpr std::string_view channel_suffix = "}:unlock";
}  // namespace

lock_keys::lock_keys(std::string_view name) {
    const std::size_t base = key_prefix.size() + name.size() + 1;  // "corolock:{name}"
    buffer_.reserve(2 * (key_prefix.size() + name.size()) + fence_suffix.size() +
                    channel_suffix.size());
    buffer_.append(key_prefix).append(name).append(fence_suffix);
    buffer_.append(key_prefix).append(name).append(channel_suffix);
    // A handle's name is at most max_lock_name_length bytes; an admin call
    // builds keys before it validates the name, and never uses them if bad.
    lock_size_ = static_cast<std::uint32_t>(base);
    fence_size_ = static_cast<std::uint32_t>(base + fence_suffix.size() - 1);
}

lock_keys keys_for(std::string_view name) { return lock_keys(name); }

}  // namespace corolock::detail
