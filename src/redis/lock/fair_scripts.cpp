#include "redis/lock/fair_scripts.hpp"

#include <charconv>
#include <string>

namespace corolock::detail {

namespace {

// Shared by both scripts. KEYS[1] lock hash, KEYS[2] fence counter,
// KEYS[3] queue (owner -> arrival number), KEYS[4] entries (owner ->
// "<expiry ms> <seq> <lease ms> <level> <holder>"). A fair hash has four
// fields that are not levels: owner, fence, kind, holder.
constexpr std::string_view prelude_lua = R"lua(
local function num(n) return string.format('%d', n) end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- The lock's owner and kind, in one read.
local function owner_and_kind()
  local v = redis.call('HMGET', KEYS[1], 'owner', 'kind')
  return v[1], v[2]
end
-- WRONGTYPE unless the lock key is free or a fair mutex's hash.
local function not_fair(owner, kind)
  if owner then
    if kind == 'fair' then return nil end
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is held as a ' .. (kind or 'mutex') ..
                             ', not a fair mutex; the key was left untouched')
  end
  if redis.call('HLEN', KEYS[1]) > 0 then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash without an owner, ' ..
                             'which corolock never writes; the key was left untouched')
  end
  return nil
end
-- Gives the lock to `who` for `lease` ms: a new tenure. The hash holds no
-- level (it is new, or the releaser's only level is gone), so the five
-- fields written are all it has. Returns the token and its digits.
local function grant(who, level, lease, holder, now)
  local token, text = mint_token(KEYS[2], now)
  local since = text
  if token ~= now then since = num(now) end
  redis.call('HSET', KEYS[1], 'owner', who, 'fence', text, 'l:' .. level, text,
             'kind', 'fair', 'holder', since .. ' ' .. holder)
  redis.call('PEXPIRE', KEYS[1], lease)
  return token, text
end
local function leave(who)
  redis.call('ZREM', KEYS[3], who)
  redis.call('HDEL', KEYS[4], who)
end
-- The first live entry: owner, seq, lease, level, holder. Entries whose
-- lease ended are removed on the way; each round removes up to 32 or
-- returns, so the loop ends with the queue.
local function head(now_ms)
  while true do
    local first = redis.call('ZRANGE', KEYS[3], 0, 31)
    if #first == 0 then
      redis.call('DEL', KEYS[3], KEYS[4])
      return nil
    end
    local entries = redis.call('HMGET', KEYS[4], unpack(first))
    for i, who in ipairs(first) do
      if entries[i] then
        local expiry, seq, lease, level, holder =
          string.match(entries[i], '^(%d+) (%-?%d+) (%d+) (%d+) (.*)$')
        if expiry and tonumber(expiry) > now_ms then return who, seq, lease, level, holder end
      end
      leave(who)
    end
  end
end
)lua";

// ARGV[1] owner id, ARGV[2] lease in ms, ARGV[3] level id, ARGV[4] "<pid>
// <host> <label>" (the holder record), ARGV[5] the queue entry's lease in ms,
// ARGV[6] seq (an integer the waiter chose for this attempt; a handoff
// echoes the last one the entry got)
// Returns {1, token, levels, pttl, created} when granted (created 1: a new
// tenure) or re-entered, {0, 0, levels, cap, 0} when queued: the entry was
// added at the back, or its lease renewed in place, and `cap` is when to try
// again at the latest (a third of the entry lease, or the holder's TTL if
// shorter), which renews the entry; when the holder's TTL is the cap, the
// reply is {0, 0, levels, cap, 0, left_us, at_ms} (expiry_of). WRONGTYPE when the key is not free and
// not a fair mutex. A free lock goes to the caller only when the queue's
// first live entry is the caller's, or the queue is empty.
constexpr std::string_view acquire_lua = R"lua(
if not string.match(ARGV[6], '^%-?%d+$') then
  return redis.error_reply('ERR the seq argument must be an integer')
end
local owner, kind = owner_and_kind()
local bad = not_fair(owner, kind)
if bad then return bad end
local now = now_us()
local lease = tonumber(ARGV[2])
if owner == ARGV[1] then
  -- Re-entry; also a handoff whose message this attempt overtook.
  local token, text = mint_token(KEYS[2], now)
  redis.call('HSET', KEYS[1], 'fence', text, 'l:' .. ARGV[3], text)
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < lease then
    redis.call('PEXPIRE', KEYS[1], lease)
    pttl = lease
  end
  return {1, token, redis.call('HLEN', KEYS[1]) - 4, pttl, 0}
end
local now_ms = math.floor(now / 1000)
local first = head(now_ms)
if not owner and (not first or first == ARGV[1]) then
  if first then leave(first) end
  local token = grant(ARGV[1], ARGV[3], lease, ARGV[4] or '', now)
  return {1, token, 1, lease, 1}
end
local entry_lease = tonumber(ARGV[5])
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
local arrival = 1
if last[2] then arrival = tonumber(last[2]) + 1 end
redis.call('ZADD', KEYS[3], 'NX', arrival, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], num(now_ms + entry_lease) .. ' ' .. ARGV[6] .. ' ' ..
           ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. (ARGV[4] or ''))
for _, key in ipairs({KEYS[3], KEYS[4]}) do
  if redis.call('PTTL', key) < entry_lease then redis.call('PEXPIRE', key, entry_lease) end
end
local cap = math.floor(entry_lease / 3)
local levels = 0
if owner then
  levels = redis.call('HLEN', KEYS[1]) - 4
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl >= 0 and pttl < cap then
    local left, at = expiry_of(KEYS[1])
    return {0, 0, levels, pttl, 0, left, at}
  end
end
return {0, 0, levels, cap, 0}
)lua";

// ARGV[1] owner id, ARGV[2] level id or "*" (every level of the owner),
// ARGV[3] the unlock channel
// Returns {status, receivers} with the mutex release's statuses; always
// removes the owner's queue entry first (so it also cancels a wait). When
// the lock is then free (released, or found free by a cancel: status 1 or
// 0) and the queue has a live entry, the lock goes to its owner in this
// script (the level, lease and holder of its entry, a fresh token), and the
// channel gets ">owner level token seq" (seq: the entry's); receivers
// counts that message. With nobody queued, a full release publishes the
// owner id, as the mutex's does.
constexpr std::string_view release_lua = R"lua(
local owner, kind = owner_and_kind()
local bad = not_fair(owner, kind)
if bad then return bad end
local status = 0
-- Whether the hash still holds the releaser's fields, which a grant in
-- this script would overwrite all of (its only level was removed), or
-- other levels too, which must go first.
local stale = false
if owner == ARGV[1] then
  if ARGV[2] ~= '*' then
    if redis.call('HDEL', KEYS[1], 'l:' .. ARGV[2]) == 0 then return {3, 0} end
    if redis.call('HLEN', KEYS[1]) > 4 then return {2, 0} end
  else
    stale = true
  end
  status = 1
elseif owner then
  status = -1
end
-- The caller's queue entry, if it has one (a cancelled wait). An entry's
-- two halves are written and removed together; a queue member without its
-- entry is pruned by head().
if redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then redis.call('ZREM', KEYS[3], ARGV[1]) end
if status == -1 then return {-1, 0} end
local now = now_us()
local who, seq, lease, level, holder = head(math.floor(now / 1000))
if not who then
  if status == 1 then
    redis.call('DEL', KEYS[1])
    return {1, redis.call('PUBLISH', ARGV[3], ARGV[1])}
  end
  return {0, 0}
end
if stale then redis.call('DEL', KEYS[1]) end
leave(who)
local _, text = grant(who, level, tonumber(lease), holder, now)
return {status, redis.call('PUBLISH', ARGV[3], '>' .. who .. ' ' .. level .. ' ' .. text ..
                                                ' ' .. seq)}
)lua";

template <class T>
bool parse_number(std::string_view text, T& out) noexcept {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// The token minting of every kind, then the fair scripts' own prelude.
std::string with_prelude(std::string_view body) {
    return std::string(token_minting_lua())
        .append(expiry_timing_lua())
        .append(prelude_lua)
        .append(body);
}

}  // namespace

const script& fair_acquire_script() {
    static const std::string source = with_prelude(acquire_lua);
    static const script s = make_script("fair_acquire", source);
    return s;
}

const script& fair_release_script(bool shard) {
    static const std::string source = with_prelude(release_lua);
    static const script s = make_script("fair_release", source);
    static const std::string shard_source = sharded_publish(source);
    static const script sharded_s = make_script("fair_release", shard_source);
    return shard ? sharded_s : s;
}

std::optional<fair_grant> parse_fair_grant(std::string_view payload) noexcept {
    if (payload.empty() || payload.front() != '>') return std::nullopt;
    payload.remove_prefix(1);
    std::string_view parts[4];
    for (int i = 0; i < 3; ++i) {
        const auto space = payload.find(' ');
        if (space == std::string_view::npos) return std::nullopt;
        parts[i] = payload.substr(0, space);
        payload.remove_prefix(space + 1);
    }
    parts[3] = payload;
    fair_grant g;
    g.owner = parts[0];
    if (g.owner.empty() || !parse_number(parts[1], g.level) || !parse_number(parts[2], g.token) ||
        !parse_number(parts[3], g.seq))
        return std::nullopt;
    return g;
}

}  // namespace corolock::detail
