#include "redis/semaphore_scripts.hpp"

#include <corolock/semaphore.hpp>

#include <string>

namespace corolock::detail {

namespace {

// Shared by the three scripts: the server time, argument checks, and the
// semaphore as it stands once the grants whose lease ended are dropped.
// Redis 7.0 has no per-field TTL, so each owner's lease end is a field
// (e:<owner>, server time in ms) and every script prunes before it counts.
// The key's own TTL covers the longest lease and is only ever extended, so
// the key never vanishes under a live grant.
constexpr std::string_view semaphore_lib_lua = R"lua(
local function server_now()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- A whole number in [lo, hi], or nil.
local function whole(v, lo, hi)
  local n = tonumber(v)
  if not n or n ~= math.floor(n) or n < lo or n > hi then return nil end
  return n
end

local function bad_input(what, v)
  return redis.error_reply('ERR corolock semaphore: ' .. what .. ', got "' ..
                           tostring(v) .. '"')
end

local function hdel_all(key, fields)
  for i = 1, #fields, 500 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 499, #fields)))
  end
end

-- The semaphore in `key` at server time `now` (ms), pruned:
-- {used, capacity, ends = owner -> lease end, levels = owner -> grants,
--  grants = {{owner, field, permits}}}, or nil when nothing is granted
-- (an emptied key is deleted). Second value: an error reply when the key
-- is not a semaphore; nothing is touched then.
local function load(key, now)
  local all = redis.call('HGETALL', key)
  if #all == 0 then return nil end
  local s = {used = 0, capacity = 0, ends = {}, levels = {}, grants = {}}
  local kind, has_owner, foreign = nil, false, nil
  local holders, lessees = {}, {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local p = string.sub(f, 1, 2)
    if p == 'g:' then
      local owner = string.match(f, '^g:(.+):%d+$')
      local permits = string.match(v, '^(%d+) %d+$')
      if owner and permits then
        s.grants[#s.grants + 1] = {owner, f, tonumber(permits)}
      else
        foreign = foreign or f
      end
    elseif p == 'e:' then
      lessees[#lessees + 1] = string.sub(f, 3)
      s.ends[lessees[#lessees]] = tonumber(v) or 0
    elseif p == 'h:' then
      holders[#holders + 1] = string.sub(f, 3)
    elseif f == 'kind' then
      kind = v
    elseif f == 'capacity' then
      s.capacity = tonumber(v) or 0
    else
      if f == 'owner' then has_owner = true end
      foreign = foreign or f
    end
  end
  if kind ~= 'semaphore' then
    local what = 'a hash without kind semaphore, which corolock never writes'
    if kind then what = 'a corolock ' .. kind .. ', not a semaphore'
    elseif has_owner then what = 'a corolock mutex, not a semaphore' end
    return nil, redis.error_reply('WRONGTYPE ' .. key .. ' holds ' .. what ..
                                  '; the key was left untouched')
  end
  if foreign then
    return nil, redis.error_reply('WRONGTYPE ' .. key .. ' holds the field ' .. foreign ..
                                  ', which a corolock semaphore never writes; ' ..
                                  'the key was left untouched')
  end
  local dead, live = {}, {}
  for _, g in ipairs(s.grants) do
    local e = s.ends[g[1]]
    if e and e > now then
      live[#live + 1] = g
      s.used = s.used + g[3]
      s.levels[g[1]] = (s.levels[g[1]] or 0) + 1
    else
      dead[#dead + 1] = g[2]
    end
  end
  s.grants = live
  if s.used == 0 then
    redis.call('DEL', key)
    return nil
  end
  for _, owner in ipairs(lessees) do
    if not s.levels[owner] then
      s.ends[owner] = nil
      dead[#dead + 1] = 'e:' .. owner
    end
  end
  for _, owner in ipairs(holders) do
    if not s.levels[owner] then dead[#dead + 1] = 'h:' .. owner end
  end
  if #dead > 0 then hdel_all(key, dead) end
  return s
end
)lua";

// KEYS[1] lock hash, KEYS[2] fence counter
// ARGV[1] owner id, ARGV[2] lease (ms), ARGV[3] level id (digits),
// ARGV[4] permits, ARGV[5] capacity, ARGV[6] "<pid> <host> <label>"
// Returns {1, token, the owner's grants, ms left of its lease, created}
//         (created 1: the owner held nothing, this grant began a tenure),
//         {0, 0, free permits, wait cap ms, 0} when the permits do not fit:
//         the wait cap is when enough leases end for them to fit.
// Bad input (permits outside [1, capacity], ...): an ERR naming it.
// The capacity checked is this call's; it is stored (the latest wins) but
// never revokes a grant: while grants made under a larger capacity live,
// new grants wait until the total fits the new one.
constexpr std::string_view acquire_lua = R"lua(
local capacity = whole(ARGV[5], 1, MAX_CAPACITY)
if not capacity then
  return bad_input('the capacity must be a whole number from 1 to ' .. MAX_CAPACITY, ARGV[5])
end
local permits = whole(ARGV[4], 1, capacity)
if not permits then
  return bad_input('permits must be a whole number from 1 to the capacity ' .. capacity, ARGV[4])
end
local lease = whole(ARGV[2], 1, 1e13)
if not lease then return bad_input('the lease must be a whole number of ms, at least 1', ARGV[2]) end
if not string.match(ARGV[3] or '', '^%d+$') then
  return bad_input('the level must be a decimal number', ARGV[3])
end
if (ARGV[1] or '') == '' then return bad_input('the owner must not be empty', ARGV[1]) end
local now_us, now = server_now()
local s, bad = load(KEYS[1], now)
if bad then return bad end
local used = 0
if s then used = s.used end
if used + permits > capacity then
  -- Sort the leases by end; the cap is the end that frees enough permits.
  local need, freed, order = used + permits - capacity, 0, {}
  for _, g in ipairs(s.grants) do order[#order + 1] = {s.ends[g[1]], g[3]} end
  table.sort(order, function(a, b) return a[1] < b[1] end)
  local cap = -1
  for _, o in ipairs(order) do
    freed = freed + o[2]
    if freed >= need then
      cap = math.max(o[1] - now, 1)
      break
    end
  end
  return {0, 0, math.max(capacity - used, 0), cap, 0}
end
local owner = ARGV[1]
local ends = s and s.ends[owner]
local levels = 1
if s and s.levels[owner] then levels = s.levels[owner] + 1 end
local token = mint_token(KEYS[2], now_us)
local fence = string.format('%.0f', token)
local fields = {'kind', 'semaphore', 'capacity', string.format('%.0f', capacity),
                'g:' .. owner .. ':' .. ARGV[3], string.format('%.0f', permits) .. ' ' .. fence}
local created = 0
if not ends then
  created = 1
  fields[#fields + 1] = 'h:' .. owner
  fields[#fields + 1] = string.format('%.0f', now_us) .. ' ' .. (ARGV[6] or '')
end
if not ends or ends < now + lease then
  ends = now + lease
  fields[#fields + 1] = 'e:' .. owner
  fields[#fields + 1] = string.format('%.0f', ends)
end
redis.call('HSET', KEYS[1], unpack(fields))
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return {1, token, levels, ends - now, created}
)lua";

// KEYS[1] lock hash, KEYS[2] unlock channel
// ARGV[1] owner id, ARGV[2] level id, or "*" for every grant of the owner
// Returns {status, receivers}: 1 the owner's last grant released, 2 a grant
// released and the owner holds others, 3 that grant was gone already (a
// retry), 0 the owner holds nothing (its lease ended). Statuses 1 and 2
// publish "*<free permits>" and return its receivers; the others touch nothing.
constexpr std::string_view release_lua = R"lua(
local _, now = server_now()
local s, bad = load(KEYS[1], now)
if bad then return bad end
local owner = ARGV[1]
if not s or not s.ends[owner] then return {0, 0} end
local field = 'g:' .. owner .. ':' .. (ARGV[2] or '')
local gone, freed = {}, 0
for _, g in ipairs(s.grants) do
  if g[1] == owner and (ARGV[2] == '*' or g[2] == field) then
    gone[#gone + 1] = g[2]
    freed = freed + g[3]
  end
end
if #gone == 0 then return {3, 0} end
local status = 2
if #gone == s.levels[owner] then
  status = 1
  gone[#gone + 1] = 'e:' .. owner
  gone[#gone + 1] = 'h:' .. owner
end
if freed == s.used then
  redis.call('DEL', KEYS[1])
else
  hdel_all(KEYS[1], gone)
end
local free = math.max(s.capacity - (s.used - freed), 0)
return {status, redis.call('PUBLISH', KEYS[2], '*' .. string.format('%.0f', free))}
)lua";

// KEYS[1] lock hash
// ARGV[1] owner id, ARGV[2] lease (ms), or 0 to only check
// Returns 1 when the owner holds a grant (its lease end moved to at least
// now + lease, the key's TTL to at least the lease), 0 when it holds none.
constexpr std::string_view renew_lua = R"lua(
local lease = whole(ARGV[2], 0, 1e13)
if not lease then return bad_input('the lease must be a whole number of ms', ARGV[2]) end
local _, now = server_now()
local s, bad = load(KEYS[1], now)
if bad then return bad end
local ends = s and s.ends[ARGV[1]]
if not ends then return 0 end
if lease > 0 then
  if ends < now + lease then
    redis.call('HSET', KEYS[1], 'e:' .. ARGV[1], string.format('%.0f', now + lease))
  end
  if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
end
return 1
)lua";

std::string library() {
    std::string lib(token_minting_lua());
    lib += "local MAX_CAPACITY = ";
    lib += std::to_string(max_semaphore_capacity);
    lib += '\n';
    lib += semaphore_lib_lua;
    return lib;
}

std::string with_library(std::string_view body) { return library().append(body); }

}  // namespace

const script& semaphore_acquire_script() {
    static const std::string source = with_library(acquire_lua);
    static const script s = make_script("semaphore_acquire", source);
    return s;
}

const script& semaphore_release_script(bool shard) {
    static const std::string source = with_library(release_lua);
    static const script s = make_script("semaphore_release", source);
    static const std::string shard_source = sharded_publish(source);
    static const script sharded_s = make_script("semaphore_release", shard_source);
    return shard ? sharded_s : s;
}

const script& semaphore_renew_script() {
    static const std::string source = with_library(renew_lua);
    static const script s = make_script("semaphore_renew", source);
    return s;
}

}  // namespace corolock::detail
