#include "redis/lock/semaphore_scripts.hpp"

#include <corolock/semaphore.hpp>

#include <string>

namespace corolock::detail {

namespace {

// Shared by the three scripts and defined before their fast paths (after
// lease_set_lua(): the server time, the prune, TTLs): argument checks, and
// the one read of the hash every script starts with.
constexpr std::string_view semaphore_head_lua = R"lua(
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

-- An owner's field g:<owner>, "<permits> <level>/<permits> ...": the
-- permits of all its grants first.
local function permits_of(grants)
  return tonumber(string.match(grants or '', '^(%d+)')) or 0
end

-- The hash's fields every script needs, in one read: {kind, capacity,
-- used, next, g:<me>, owner (a mutex's), sole}.
local function read(lock, me)
  return redis.call('HMGET', lock, 'kind', 'capacity', 'used', 'next', 'g:' .. me, 'owner',
                    'sole')
end
)lua";

// Shared by the three scripts, defined after their fast paths (which never
// call them): no script reads the whole hash or set. The permits held are
// the field `used` and an owner's grants its one field g:<owner>. Lease
// ends: while one owner holds grants (`sole` names it), its lease end is
// `next` and the set holds no live lease; from a second owner on, each
// owner's lease end is its score in the set. So every step is O(log n) in
// the holders (a refusal's wait cap reads at most as many lease ends as
// permits it is short of).
constexpr std::string_view semaphore_lib_lua = R"lua(
-- Drops `owners` (already out of the set) from the hash: their grants and
-- holder records, and their permits from s.used.
local function drop_owners(lock, s, owners)
  local fields = {}
  for i, o in ipairs(owners) do fields[i] = 'g:' .. o end
  for _, g in ipairs(redis.call('HMGET', lock, unpack(fields))) do
    s.used = s.used - permits_of(g)
  end
  for _, o in ipairs(owners) do fields[#fields + 1] = 'h:' .. o end
  redis.call('HDEL', lock, unpack(fields))
end

-- The semaphore in `lock` at server time `now` (ms), for owner `me`, from
-- read()'s `v`: {capacity, used, next, mine (my grants field), sole}, or
-- nil when nothing is granted (both keys are deleted then). `next` is at
-- most the soonest lease end: while it is in the future no lease has ended
-- and nothing is read from the set. Once it has passed, a sole owner's
-- lease has ended (the semaphore is deleted); else up to PRUNE_LIMIT ended
-- owners are dropped (s.more: some may remain) and `next` is read again.
-- Second value: a WRONGTYPE reply when the key is another kind's; nothing
-- is touched then.
local function load(lock, leases, now, me, v)
  if v[1] ~= 'semaphore' and v[1] ~= SOLE_KIND then
    if v[1] then return nil, wrong_type(lock, 'a corolock ' .. v[1] .. ', not a semaphore') end
    if v[6] then return nil, wrong_type(lock, 'a corolock mutex, not a semaphore') end
    if redis.call('HLEN', lock) > 0 then
      return nil, wrong_type(lock, 'a hash without kind semaphore, which corolock never writes')
    end
    return nil
  end
  local s = {capacity = tonumber(v[2]) or 0, used = tonumber(v[3]) or 0,
             next = tonumber(v[4]) or 0, mine = v[5], sole = v[1] == SOLE_KIND and v[7]}
  -- Grants of mine beside another sole owner: never written together.
  if s.sole and s.sole ~= me then s.mine = nil end
  if s.next > now then return s end
  if s.sole then
    -- The only owner's lease end (`next`) has passed: nothing is held.
    redis.call('DEL', lock, leases)
    return nil
  end
  local dead = take_ended(leases, now)
  s.more = #dead == PRUNE_LIMIT
  if s.mine and not tonumber(redis.call('ZSCORE', leases, me)) then
    -- Ended (and dropped from the set just now) or never in it.
    s.mine = nil
    local listed = false
    for _, o in ipairs(dead) do listed = listed or o == me end
    if not listed then dead[#dead + 1] = me end
  end
  if #dead > 0 then drop_owners(lock, s, dead) end
  if s.used <= 0 then
    redis.call('DEL', lock, leases)
    return nil
  end
  local first = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
  s.next = tonumber(first[2]) or now
  redis.call('HSET', lock, 'used', num(s.used), 'next', num(s.next))
  return s
end

-- My lease end (when load found my grants: I hold a live one).
local function my_end(leases, s, me)
  if s.sole then return s.next end
  return tonumber(redis.call('ZSCORE', leases, me))
end

-- When enough leases end for `need` more permits to be free, in ms from
-- `now`: the owners by lease end, soonest first, each holding at least one
-- permit, so at most `need` of them are read. 1 while ended owners remain
-- to be pruned (s.more: the next call prunes them), -1 if never. A sole
-- owner holds every permit in use, and need <= used: its lease end.
local function wait_cap(lock, leases, s, now, need)
  if s.more then return 1 end
  if s.sole then return math.max(s.next - now, 1) end
  local freed, from = 0, 0
  while freed < need do
    local n = math.min(need - freed, 1000)
    local r = redis.call('ZRANGE', leases, from, from + n - 1, 'WITHSCORES')
    if #r == 0 then return -1 end
    local fields = {}
    for i = 1, #r, 2 do fields[#fields + 1] = 'g:' .. r[i] end
    for i, g in ipairs(redis.call('HMGET', lock, unpack(fields))) do
      freed = freed + permits_of(g)
      if freed >= need then return math.max(tonumber(r[2 * i]) - now, 1) end
    end
    from = from + n
  end
  return -1
end
)lua";

// KEYS[1] lock hash, KEYS[2] leases zset, KEYS[3] fence counter
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
// The first part runs before semaphore_lib_lua is defined: a grant on a
// free name (the common case) returns from it.
constexpr std::string_view acquire_head_lua = R"lua(
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
local owner = ARGV[1] or ''
if owner == '' then return bad_input('the owner must not be empty', ARGV[1]) end
local grant = ' ' .. ARGV[3] .. '/' .. num(permits)
-- A new semaphore, this owner its only one: its lease end is `next`, and
-- no set is written (one left of an expired hash holds only ended leases).
local function create(now_us, now)
  local token = mint_token(KEYS[3], now_us)
  redis.call('HSET', KEYS[1], 'kind', SOLE_KIND, 'capacity', num(capacity),
             'used', num(permits), 'next', num(now + lease), 'sole', owner,
             'g:' .. owner, num(permits) .. grant,
             'h:' .. owner, num(now_us) .. ' ' .. (ARGV[6] or ''))
  redis.call('PEXPIRE', KEYS[1], lease)
  return {1, token, 1, lease, 1}
end
local v = read(KEYS[1], owner)
if not v[1] and not v[6] and redis.call('HLEN', KEYS[1]) == 0 then
  return create(server_now())
end
)lua";

constexpr std::string_view acquire_lua = R"lua(
local now_us, now = server_now()
local s, bad = load(KEYS[1], KEYS[2], now, owner, v)
if bad then return bad end
if not s then return create(now_us, now) end
if s.used + permits > capacity then
  local cap = wait_cap(KEYS[1], KEYS[2], s, now, s.used + permits - capacity)
  return {0, 0, math.max(capacity - s.used, 0), cap, 0}
end
local mine = s.mine
local ends = mine and my_end(KEYS[2], s, owner)
local token = mint_token(KEYS[3], now_us)
-- The owner's grants: its permits, then each grant "<level>/<permits>".
local grants, levels = num(permits) .. grant, 1
if mine then
  local held, rest = string.match(mine, '^(%d+)(.*)$')
  grants = num((tonumber(held) or 0) + permits) .. (rest or '') .. grant
  for _ in string.gmatch(rest or '', '/') do levels = levels + 1 end
end
-- The kind stays the sole owner's only while the grant is the sole owner's.
local kind = 'semaphore'
if s.sole and mine then kind = SOLE_KIND end
local fields = {'kind', kind, 'capacity', num(capacity), 'used', num(s.used + permits),
                'g:' .. owner, grants}
if not mine then
  fields[#fields + 1] = 'h:' .. owner
  fields[#fields + 1] = num(now_us) .. ' ' .. (ARGV[6] or '')
end
local moved = not ends or ends < now + lease
if moved then ends = now + lease end
if s.sole and not mine then
  -- A second owner: the first one's lease end moves into the set, and the
  -- kind becomes 'semaphore' (fields, above).
  redis.call('ZADD', KEYS[2], num(s.next), s.sole, num(ends), owner)
  redis.call('HDEL', KEYS[1], 'sole')
  if ends < s.next then
    fields[#fields + 1] = 'next'
    fields[#fields + 1] = num(ends)
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  extend(KEYS[1], KEYS[2], ends - now, true)
  return {1, token, 1, ends - now, 1}
end
-- `next` is the sole owner's lease end, or else at most every owner's.
if moved and (s.sole or ends < s.next) then
  fields[#fields + 1] = 'next'
  fields[#fields + 1] = num(ends)
end
redis.call('HSET', KEYS[1], unpack(fields))
if moved and not s.sole then redis.call('ZADD', KEYS[2], num(ends), owner) end
extend(KEYS[1], KEYS[2], ends - now, false, s.sole)
local created = 0
if not mine then created = 1 end
return {1, token, levels, ends - now, created}
)lua";

// KEYS[1] lock hash, KEYS[2] leases zset, KEYS[3] unlock channel
// ARGV[1] owner id, ARGV[2] level id, or "*" for every grant of the owner
// Returns {status, receivers}: 1 the owner's last grant released, 2 a grant
// released and the owner holds others, 3 that grant was gone already (a
// retry), 0 the owner holds nothing (its lease ended). Statuses 1 and 2
// publish "*<free permits>" and return its receivers; the others touch
// nothing but the prune.
// The first part runs before semaphore_lib_lua is defined: the sole
// owner's release of its only grant (the common case) returns from it.
constexpr std::string_view release_head_lua = R"lua(
local owner = ARGV[1] or ''
local v = read(KEYS[1], owner)
local _, now = server_now()
if v[1] == SOLE_KIND and v[7] == owner and (tonumber(v[4]) or 0) > now and v[2] then
  local level = string.match(v[5] or '', '^%d+ (%d+)/%d+$')
  if level and (ARGV[2] == '*' or level == ARGV[2]) then
    redis.call('DEL', KEYS[1], KEYS[2])
    return {1, redis.call('PUBLISH', KEYS[3], '*' .. v[2])}
  end
end
)lua";

constexpr std::string_view release_lua = R"lua(
local s, bad = load(KEYS[1], KEYS[2], now, owner, v)
if bad then return bad end
if not s or not s.mine then return {0, 0} end
local all, found, kept, freed = ARGV[2] == '*', false, {}, 0
for level, p in string.gmatch(s.mine, ' (%d+)/(%d+)') do
  if all or (not found and level == ARGV[2]) then
    found = true
    freed = freed + tonumber(p)
  else
    kept[#kept + 1] = level .. '/' .. p
  end
end
if not found then return {3, 0} end
local used = s.used - freed
local status = 2
if used <= 0 then
  status = 1
  redis.call('DEL', KEYS[1], KEYS[2])
elseif #kept == 0 then
  -- Others hold permits, so the set holds the lease ends (a sole owner's
  -- permits are all of `used`).
  status = 1
  redis.call('HDEL', KEYS[1], 'g:' .. owner, 'h:' .. owner)
  redis.call('HSET', KEYS[1], 'used', num(used))
  redis.call('ZREM', KEYS[2], owner)
else
  redis.call('HSET', KEYS[1], 'used', num(used), 'g:' .. owner,
             num(permits_of(s.mine) - freed) .. ' ' .. table.concat(kept, ' '))
end
local free = math.max(s.capacity - used, 0)
return {status, redis.call('PUBLISH', KEYS[3], '*' .. num(free))}
)lua";

// KEYS[1] lock hash, KEYS[2] leases zset
// ARGV[1] owner id, ARGV[2] lease (ms), or 0 to only check
// Returns 1 when the owner holds a grant (its lease end moved to at least
// now + lease, both keys' TTL to at least the lease), 0 when it holds none.
constexpr std::string_view renew_lua = R"lua(
local lease = whole(ARGV[2], 0, 1e13)
if not lease then return bad_input('the lease must be a whole number of ms', ARGV[2]) end
local owner = ARGV[1] or ''
local _, now = server_now()
local s, bad = load(KEYS[1], KEYS[2], now, owner, read(KEYS[1], owner))
if bad then return bad end
if not s or not s.mine then return 0 end
if lease > 0 then
  if (my_end(KEYS[2], s, owner) or 0) < now + lease then
    if s.sole then
      redis.call('HSET', KEYS[1], 'next', num(now + lease))
    else
      redis.call('ZADD', KEYS[2], num(now + lease), owner)
    end
  end
  extend(KEYS[1], KEYS[2], lease, false, s.sole)
end
return 1
)lua";

// The helpers each script's first part uses.
std::string head() {
    std::string lib(token_minting_lua());
    lib += lease_set_lua();
    lib += "local MAX_CAPACITY = ";
    lib += std::to_string(max_semaphore_capacity);
    lib += "\nlocal SOLE_KIND = '";
    lib += sole_semaphore_kind;
    lib += "'\n";
    lib += semaphore_head_lua;
    return lib;
}

// head(), the script's first part (a fast path, or nothing), the rest of
// the helpers, then the script's body.
std::string compose(std::string_view first, std::string_view body) {
    return head().append(first).append(semaphore_lib_lua).append(body);
}

}  // namespace

const script& semaphore_acquire_script() {
    static const std::string source = compose(acquire_head_lua, acquire_lua);
    static const script s = make_script("semaphore_acquire", source);
    return s;
}

const script& semaphore_release_script(bool shard) {
    static const std::string source = compose(release_head_lua, release_lua);
    static const script s = make_script("semaphore_release", source);
    static const std::string shard_source = sharded_publish(source);
    static const script sharded_s = make_script("semaphore_release", shard_source);
    return shard ? sharded_s : s;
}

const script& semaphore_renew_script() {
    static const std::string source = compose({}, renew_lua);
    static const script s = make_script("semaphore_renew", source);
    return s;
}

}  // namespace corolock::detail
