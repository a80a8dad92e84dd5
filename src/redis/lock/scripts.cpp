#include "redis/lock/scripts.hpp"

#include "core/lock_delay.hpp"

#include <corolock/admin.hpp>
#include <corolock/config.hpp>

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <string>
#include <utility>

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

// The fields corolock writes into a lock hash: owner, fence, holder, delay
// and l:<level>. A hash holding any other field was not written by corolock (or
// was written into by someone else): the scripts answer WRONGTYPE naming the
// key and change nothing. The check costs an HKEYS only when the hash has
// more fields than a single level needs.
constexpr std::string_view foreign_lua = R"lua(
local function foreign(key)
  for _, f in ipairs(redis.call('HKEYS', key)) do
    if f ~= 'owner' and f ~= 'fence' and f ~= 'holder' and f ~= 'delay' and
       string.sub(f, 1, 2) ~= 'l:' then
      return redis.error_reply('WRONGTYPE ' .. key .. ' holds the field ' .. f ..
                               ', which corolock never writes; the key was left untouched')
    end
  end
  return nil
end
)lua";

// in_lock_delay(key, pttl): core/lock_delay.hpp's rule (delayed_for) in
// Lua, for a lock hash whose `delay` field holds the delay in ms and whose
// PTTL is `pttl`.
constexpr std::string_view in_lock_delay_lua = R"lua(
local function in_lock_delay(key, pttl)
  local delay = tonumber(redis.call('HGET', key, 'delay') or '0')
  return delay > 0 and pttl >= 0 and pttl <= delay
end
)lua";

// The next fencing token of counter `key` at server time `now` (µs), a
// hybrid logical clock: max(last + 1, now), stored back when the clock
// is ahead. Every script that grants anything mints its token here. Also
// returns the token as decimal digits, formatted once: '%d' (a C long on
// the 64-bit servers Redis runs on) rather than '%.0f', whose float
// conversion costs about twice as much.
constexpr std::string_view mint_token_lua = R"lua(
local function mint_token(key, now)
  local token = redis.call('INCR', key)
  if now > token then
    token = now
    local text = string.format('%d', token)
    redis.call('SET', key, text)
    return token, text
  end
  return token, string.format('%d', token)
end
)lua";

// The µs from now until the server's clock passes `key`'s expiry, and that
// expiry (unix ms): {left, at}, or {-1, -1} when the key has no TTL (or
// the server lacks PEXPIRETIME, Redis 7). Redis expires a key once its ms
// clock is past PEXPIRETIME, so the first instant it is gone is at + 1 ms;
// TIME reads the clock in µs. A waiter wakes then, not at PTTL + 1 ms, whose
// whole milliseconds overshoot by up to one (docs/election.md, "Failover").
constexpr std::string_view expiry_lua = R"lua(
local function expiry_of(key)
  local at = redis.pcall('PEXPIRETIME', key)
  if type(at) ~= 'number' or at < 0 then return -1, -1 end
  local t = redis.call('TIME')
  local left = (at + 1) * 1000 - (tonumber(t[1]) * 1000000 + tonumber(t[2]))
  if left < 0 then left = 0 end
  return left, at
end
)lua";

// The kinds whose owners' lease ends live in a sorted set beside the hash
// (score: lease end, server ms). A script drops at most PRUNE_LIMIT ended
// owners per call, so its work never grows with the number of holders; the
// set's TTL follows the hash's, and neither is ever shortened.
constexpr std::string_view lease_set_lib_lua = R"lua(
local PRUNE_LIMIT = 64
local function server_now()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end
-- A whole number as decimal digits. '%d' (a C long here) rather than
-- '%.0f': the float conversion of a µs timestamp costs about 1 µs, and a
-- script formats several.
local function num(n) return string.format('%d', n) end

local function wrong_type(key, what)
  return redis.error_reply('WRONGTYPE ' .. key .. ' holds ' .. what ..
                           '; the key was left untouched')
end

local function take_ended(leases, now)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', num(now), 'LIMIT', 0, PRUNE_LIMIT)
  if #dead > 0 then redis.call('ZREM', leases, unpack(dead)) end
  return dead
end

-- Extends the hash's TTL to at least `ms` and the set's to at least the
-- hash's. new_set: the set was just written and may be new (no TTL yet)
-- or left of an expired hash (only ended leases), so it gets the hash's
-- TTL. hash_only: the set holds no live lease (a semaphore's sole owner
-- keeps its lease end in the hash), so it is left alone.
local function extend(lock, leases, ms, new_set, hash_only)
  local ttl = redis.call('PTTL', lock)
  if ttl < ms then
    redis.call('PEXPIRE', lock, ms)
    ttl = ms
  end
  if hash_only then return end
  if new_set then
    redis.call('PEXPIRE', leases, ttl)
    return
  end
  local rttl = redis.call('PTTL', leases)  -- -2: no such key
  if rttl ~= -2 and rttl < ttl then redis.call('PEXPIRE', leases, ttl) end
end
)lua";

// The fields of a held lock that are not levels: owner, fence and, in a hash
// this version created, holder (older versions and hand-made hashes have no
// holder), and delay when the holder asked for lock-delay. Every script that
// counts levels from HLEN subtracts this. HGET rather than HEXISTS: the
// documented minimal ACL already allows it.
constexpr std::string_view base_fields_lua = R"lua(
local function base_fields(key)
  local n = 2
  if redis.call('HGET', key, 'holder') then n = 3 end
  if redis.call('HGET', key, 'delay') then n = n + 1 end
  return n
end
)lua";

// KEYS[1] lock hash, KEYS[2] fence counter
// ARGV[1] owner id, ARGV[2] what the server keeps in ms (the lease, plus the
// lock-delay), ARGV[3] level id (unique per owner),
// ARGV[4] "<pid> <host> <label>" (detail::holder_argument), written with the
// server time only when the grant creates the hash,
// ARGV[5] the lock-delay in ms, absent without one (core/lock_delay.hpp)
// Returns {1, token, levels, pttl, created} when acquired or re-entered
//         (created 1: the hash did not exist, this grant began a tenure),
//         {0, 0, levels, pttl, 0, left_us, at_ms} when another owner holds
//         it (pttl -1: no TTL; left_us and at_ms: expiry_of), or
//         {0, 0, levels, pttl, 0} when the name is in lock-delay, even for
//         its own owner.
// WRONGTYPE when the name's key holds a value that is not a corolock hash,
// and the server's own error when the fence counter is not an integer.
// The TTL is only ever extended, never shortened: every deadline a client
// derived from an earlier grant or renewal stays valid.
// The token is a hybrid logical clock: max(last + 1, server time in µs), so
// a counter lost with the data (a restart without persistence, a failover to
// a lagging replica) restarts above every token minted before, as long as
// the server's clock did not step back by more than the outage lasted.
constexpr std::string_view acquire_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
local fields = redis.call('HLEN', KEYS[1])
if owner and owner ~= ARGV[1] then
  -- Held by another kind of lock (a fair mutex's hash has `kind`): refused,
  -- not waited on. Checked only here, off the uncontended path; the
  -- owner's own hash is checked below.
  local kind = redis.call('HGET', KEYS[1], 'kind')
  if kind then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is held as a ' .. kind ..
                             ', not a mutex; the key was left untouched')
  end
  local left, at = expiry_of(KEYS[1])
  return {0, 0, fields - base_fields(KEYS[1]), redis.call('PTTL', KEYS[1]), 0, left, at}
end
if fields > 0 and not owner then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash without an owner, ' ..
                           'which corolock never writes; the key was left untouched')
end
local base = 0
if fields > 0 then
  base = base_fields(KEYS[1])
  if fields > base + 1 then
    local bad = foreign(KEYS[1])
    if bad then return bad end
  end
  local pttl = redis.call('PTTL', KEYS[1])
  -- A record with no level left is one whose holder found its tenure lost
  -- (release's "lost"): in lock-delay from then on, though its lease may
  -- not have ended on the server yet, so not even its owner re-enters it.
  if fields == base or in_lock_delay(KEYS[1], pttl) then return {0, 0, fields - base, pttl, 0} end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token, fence = mint_token(KEYS[2], now)
local lease = tonumber(ARGV[2])
local delay = tonumber(ARGV[5] or '0')
if fields == 0 then
  -- A new tenure: the key did not exist, so it has no TTL yet. The token
  -- is usually the time itself, already formatted.
  local since = fence
  if token ~= now then since = string.format('%d', now) end
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence, 'l:' .. ARGV[3], fence,
             'holder', since .. ' ' .. (ARGV[4] or ''))
  if delay > 0 then redis.call('HSET', KEYS[1], 'delay', ARGV[5]) end
  redis.call('PEXPIRE', KEYS[1], lease)
  return {1, token, 1, lease, 1}
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence, 'l:' .. ARGV[3], fence)
if delay > 0 then
  -- A re-entry keeps the longest delay any level asked for.
  local had = redis.call('HGET', KEYS[1], 'delay')
  if not had then base = base + 1 end
  if delay > tonumber(had or '0') then redis.call('HSET', KEYS[1], 'delay', ARGV[5]) end
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
  pttl = lease
end
return {1, token, redis.call('HLEN', KEYS[1]) - base, pttl, 0}
)lua";

// KEYS[1] lock hash, KEYS[2] unlock channel
// ARGV[1] owner id, ARGV[2] level id, or "*" for every level of the owner,
// ARGV[3] "lost" for the clean-up of a tenure its holder found lost: a hash
// with a lock-delay then keeps its record (and its TTL) with no level left,
// so the holder's own loss never shortens the delay.
// Returns {status, receivers}: status 1 released (lock deleted, unlock
// published to `receivers` subscribed connections), 2 level released but
// other levels (or the lock-delay's record) remain, 3 level was already gone
// (a retry), 0 no lock, -1 another owner holds it. Touches nothing unless
// the owner matches.
constexpr std::string_view release_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return {0, 0} end
if owner ~= ARGV[1] then return {-1, 0} end
local base = base_fields(KEYS[1])
if redis.call('HLEN', KEYS[1]) > base + 1 then
  local bad = foreign(KEYS[1])
  if bad then return bad end
end
if ARGV[2] ~= '*' then
  if redis.call('HDEL', KEYS[1], 'l:' .. ARGV[2]) == 0 then return {3, 0} end
  if redis.call('HLEN', KEYS[1]) > base then return {2, 0} end
end
if ARGV[3] == 'lost' and redis.call('HGET', KEYS[1], 'delay') then
  if ARGV[2] == '*' then
    for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
      if string.sub(f, 1, 2) == 'l:' then redis.call('HDEL', KEYS[1], f) end
    end
  end
  return {2, 0}
end
redis.call('DEL', KEYS[1])
return {1, redis.call('PUBLISH', KEYS[2], ARGV[1])}
)lua";

// KEYS[1] lock hash
// ARGV[1] owner id, ARGV[2] what the server keeps in ms, the lease plus the
// lock-delay (0: only check that the lock is still the owner's, as after a
// reconnect with the watchdog off)
// Returns 1 renewed (or confirmed), 0 no lock (or its lease ended: in
// lock-delay, core/lock_delay.hpp), -1 another owner holds it.
// Touches nothing unless the owner matches, and only ever extends the TTL.
constexpr std::string_view renew_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return 0 end
if owner ~= ARGV[1] then return -1 end
local pttl = redis.call('PTTL', KEYS[1])
if in_lock_delay(KEYS[1], pttl) then return 0 end
local lease = tonumber(ARGV[2])
if lease > 0 and pttl < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
)lua";

// The operator's view of a lock of any kind, shared by status and break.
// KEYS[1] lock hash, KEYS[2] fence counter, KEYS[3] a fair mutex's queue
// entries (one field per queued owner, as the queue has one member),
// KEYS[4] a shared mutex's or semaphore's lease ends.
// describe() returns {kind, held (0/1), owner or '', pttl, levels, last
// token, holder or '', server time in µs, queued, capacity, permits in use,
// holder count, owners, lock-delay in ms (0: none)}, read-only. kind: the hash's `kind` field, 'mutex'
// without one ('fair' when only a fair queue is left; 'semaphore' for a
// sole owner's semaphore, whose kind is sole_semaphore_kind). A semaphore reports
// its live owners only (lease end after the server's time): levels is their
// grants, pttl the longest lease left, and owners lists up to MAX_OWNERS
// {owner, grants, permits, lease left ms, holder or ''}, soonest lease end
// first. It reads every live owner's grants (the semaphore's own scripts
// never do): status is the operator's, not the hot path.
// A shared mutex reports its live writer as a mutex's owner (its levels,
// holder), its live readers in the holder count and up to MAX_OWNERS of
// them in owners {owner, levels, 0, lease left ms, ''}, soonest lease end
// first, and a live waiting writer's marker as 1 queued.
// Second value: a WRONGTYPE reply for a kind this version does not know.
constexpr std::string_view describe_lua = R"lua(
local MAX_OWNERS = MAX_LISTED_OWNERS
local function describe_semaphore(r, now_us, sole_kind)
  local now = math.floor(now_us / 1000)
  local f = redis.call('HMGET', KEYS[1], 'capacity', 'sole', 'next')
  r[10] = tonumber(f[1]) or 0
  r[4] = 0
  -- A sole owner's lease end is `next` (the semaphore scripts' rule: its
  -- kind and a `sole` field); from a second owner on, the set's.
  local live = {}
  if sole_kind and f[2] then
    if (tonumber(f[3]) or 0) > now then live = {f[2], f[3]} end
  else
    live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'WITHSCORES')
  end
  for i = 1, #live, 1000 do
    local fields = {}
    for j = i, math.min(i + 999, #live), 2 do
      fields[#fields + 1] = 'g:' .. live[j]
      fields[#fields + 1] = 'h:' .. live[j]
    end
    local v = redis.call('HMGET', KEYS[1], unpack(fields))
    for j = 1, #v, 2 do
      local o, left = live[i + j - 1], tonumber(live[i + j]) - now
      local permits = tonumber(string.match(v[j] or '', '^(%d+)'))
      if permits then
        local grants = 0
        for _ in string.gmatch(v[j], '/') do grants = grants + 1 end
        r[5], r[11], r[12] = r[5] + grants, r[11] + permits, r[12] + 1
        if left > r[4] then r[4] = left end
        if #r[13] < MAX_OWNERS then r[13][#r[13] + 1] = {o, grants, permits, left, v[j + 1] or ''} end
      end
    end
  end
  if r[12] > 0 then r[2] = 1 end
end
local function count_words(s)
  local n = 0
  for _ in string.gmatch(s or '', '%S+') do n = n + 1 end
  return n
end
local function describe_shared(r, now_us)
  local now = math.floor(now_us / 1000)
  local f = redis.call('HMGET', KEYS[1], 'writer', 'we', 'x', 'holder', 'ww')
  r[9] = 0
  if f[1] and (tonumber(f[2]) or 0) > now then
    r[2], r[3], r[5], r[7], r[12] = 1, f[1], count_words(f[3]), f[4] or '', 1
  end
  local readers = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
  if readers > 0 then r[2], r[12] = 1, r[12] + readers end
  local live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'WITHSCORES',
                          'LIMIT', 0, MAX_OWNERS)
  for i = 1, #live, 2 do
    local levels = count_words(redis.call('HGET', KEYS[1], 'r:' .. live[i]))
    r[13][#r[13] + 1] = {live[i], levels, 0, tonumber(live[i + 1]) - now, ''}
  end
  local marker_end = tonumber(string.match(f[5] or '', ' (%d+)$') or '0')
  if marker_end > now then r[9] = 1 end
end
local function describe()
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local kind = redis.call('HGET', KEYS[1], 'kind')
  local owner = redis.call('HGET', KEYS[1], 'owner') or ''
  local queued = redis.call('HLEN', KEYS[3])
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  local r = {kind or 'mutex', 0, owner, redis.call('PTTL', KEYS[1]), 0, last, '', now_us,
             queued, 0, 0, 0, {}, tonumber(redis.call('HGET', KEYS[1], 'delay') or '0')}
  if not kind and queued > 0 then r[1] = 'fair' end
  if kind == 'semaphore' or kind == SOLE_SEMAPHORE_KIND then
    r[1] = 'semaphore'
    describe_semaphore(r, now_us, kind == SOLE_SEMAPHORE_KIND)
  elseif not kind or kind == 'fair' then
    if owner ~= '' then
      r[2], r[12] = 1, 1
      r[5] = redis.call('HLEN', KEYS[1]) - base_fields(KEYS[1])
      if kind then r[5] = r[5] - 1 end
      r[7] = redis.call('HGET', KEYS[1], 'holder') or ''
    end
  elseif kind == 'shared' then
    describe_shared(r, now_us)
  else
    return nil, redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a lock of kind ' .. kind ..
                                  ', which this corolock does not know; the key was left untouched')
  end
  return r
end
)lua";

// KEYS[1] lock hash, KEYS[2] fence counter, KEYS[3] fair queue entries,
// KEYS[4] lease ends
// Returns describe()'s array.
constexpr std::string_view status_lua = R"lua(
local r, bad = describe()
return bad or r
)lua";

// KEYS as status. The sequencer check's read (async_check_token): only what
// its rule (core/admin.cpp) looks at, {held (0/1), the fence counter as
// stored ('0' when none)}, read-only. A mutex or fair mutex (no kind, or
// 'fair') is held when its hash has an owner, as describe() says: one GET
// and one HMGET. Any other kind (a semaphore's or shared mutex's live
// owners, an unknown kind's WRONGTYPE) is left to describe() itself.
constexpr std::string_view token_state_lua = R"lua(
local last = redis.call('GET', KEYS[2]) or '0'
local f = redis.call('HMGET', KEYS[1], 'kind', 'owner')
if not f[1] or f[1] == 'fair' then
  if f[2] and f[2] ~= '' then return {1, last} end
  return {0, last}
end
local r, bad = describe()
if bad then return bad end
return {r[2], last}
)lua";

// KEYS as status; ARGV[1] the unlock channel (a channel is no key, and a
// script has at most four: script_args::max_keys)
// Force-releases whatever holds the lock, of any kind, and wakes waiters.
// Returns describe()'s array as it was just before. A mutex's message is the
// owner id (wakes one waiter); the others' start with '*', which wakes every
// local waiter: a fair mutex's queue stays, so its head (awake now) takes
// the lock; a semaphore's says all its permits are free. A shared mutex's
// or semaphore's lease ends (KEYS[4]) go with its hash, and every waiter tries.
constexpr std::string_view break_lua = R"lua(
local r, bad = describe()
if bad then return bad end
if r[1] == 'mutex' or r[1] == 'fair' then
  if r[3] == '' then return r end
  redis.call('DEL', KEYS[1])
  local message = r[3]
  if r[1] == 'fair' then message = '*' end
  redis.call('PUBLISH', ARGV[1], message)
elseif redis.call('DEL', KEYS[1], KEYS[4]) > 0 then
  -- A shared mutex or semaphore: the hash and its lease ends.
  local message = '*'
  if r[1] == 'semaphore' then message = '*' .. string.format('%.0f', r[10]) end
  redis.call('PUBLISH', ARGV[1], message)
end
return r
)lua";

// KEYS[1] lock hash
// ARGV[1] owner id, ARGV[2] level id
// Returns 1 when the owner holds that level: the key's TTL was then set to
// itself (PEXPIRE key PTTL), a write that changes nothing but is
// replicated, so a WAIT behind it on the same connection counts replicas
// that have the grant (docs/safety.md, "Replica acknowledgement").
// 0 no lock, -1 another owner holds it, -2 the owner holds it without that
// level. Touches nothing unless owner and level match; never shortens the TTL.
constexpr std::string_view confirm_lua = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return 0 end
if owner ~= ARGV[1] then return -1 end
if not redis.call('HGET', KEYS[1], 'l:' .. ARGV[2]) then return -2 end
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 then
  redis.call('PEXPIRE', KEYS[1], pttl)
else
  redis.call('HSET', KEYS[1], 'owner', owner)
end
return 1
)lua";

// The source of a script that starts with the foreign-field check.
std::string checked(std::string_view body) {
    return std::string(foreign_lua).append(base_fields_lua).append(body);
}
// The source of a script that describes a lock (status, break): it counts
// levels but changes nothing it checks.
std::string describing(std::string_view body) {
    constexpr std::string_view placeholder = "MAX_LISTED_OWNERS";
    constexpr auto at = describe_lua.find(placeholder);
    static_assert(at != std::string_view::npos);
    return std::string(base_fields_lua)
        .append("local SOLE_SEMAPHORE_KIND = '")
        .append(sole_semaphore_kind)
        .append("'\n")
        .append(describe_lua.substr(0, at))
        .append(std::to_string(max_listed_lock_owners))
        .append(describe_lua.substr(at + placeholder.size()))
        .append(body);
}

// The same source announcing on the lock's shard channel: SPUBLISH reaches
// the subscribers of the slot's shard only, where PUBLISH on a cluster is
// broadcast to every node.
std::string sharded(std::string source) {
    constexpr std::string_view from = "redis.call('PUBLISH'";
    for (auto at = source.find(from); at != std::string::npos; at = source.find(from, at))
        source.replace(at, from.size(), "redis.call('SPUBLISH'");
    return source;
}

}  // namespace

script make_script(std::string_view name, std::string_view source) { return make(name, source); }
std::string sharded_publish(std::string source) { return sharded(std::move(source)); }
std::string_view token_minting_lua() noexcept { return mint_token_lua; }
std::string_view expiry_timing_lua() noexcept { return expiry_lua; }
std::string_view lease_set_lua() noexcept { return lease_set_lib_lua; }

const script& acquire_script() {
    static const std::string source =
        std::string(mint_token_lua)
            .append(expiry_lua)
            .append(in_lock_delay_lua)
            .append(checked(acquire_lua));
    static const script s = make("acquire", source);
    return s;
}
const script& release_script(bool shard) {
    static const std::string source = checked(release_lua);
    static const script s = make("release", source);
    static const std::string shard_source = sharded(source);
    static const script sharded_s = make("release", shard_source);
    return shard ? sharded_s : s;
}
const script& renew_script() {
    static const std::string source = std::string(in_lock_delay_lua).append(renew_lua);
    static const script s = make("renew", source);
    return s;
}
const script& status_script() {
    static const std::string source = describing(status_lua);
    static const script s = make("status", source);
    return s;
}
const script& token_state_script() {
    static const std::string source = describing(token_state_lua);
    static const script s = make("token_state", source);
    return s;
}
const script& confirm_script() {
    static const script s = make("confirm", confirm_lua);
    return s;
}
const script& break_script(bool shard) {
    static const std::string source = describing(break_lua);
    static const script s = make("break", source);
    static const std::string shard_source = sharded(source);
    static const script sharded_s = make("break", shard_source);
    return shard ? sharded_s : s;
}

}  // namespace corolock::detail
