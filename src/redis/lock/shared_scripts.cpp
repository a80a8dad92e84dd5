#include "redis/lock/shared_scripts.hpp"

#include <string>

namespace corolock::detail {

namespace {

// Shared by the three scripts (after lease_set_lua(): the server time, the
// prune, TTLs): level lists, and the lock as it stands once what ended is
// dropped. Every step is O(log n) in the readers (the prune takes at most
// 64 ended readers per call).
constexpr std::string_view shared_lib_lua = R"lua(
local function bad_input(what, v)
  return redis.error_reply('ERR corolock shared mutex: ' .. what .. ', got "' ..
                           tostring(v) .. '"')
end

-- A level list without `level` ("*": without any). Second value: whether
-- the level (any, for "*") was in it.
local function drop_level(list, level)
  if not list or list == '' then return '', false end
  if level == '*' then return '', true end
  local kept, found = {}, false
  for w in string.gmatch(list, '%S+') do
    if w == level and not found then found = true else kept[#kept + 1] = w end
  end
  return table.concat(kept, ' '), found
end

local function count_levels(list)
  local n = 0
  for _ in string.gmatch(list or '', '%S+') do n = n + 1 end
  return n
end

-- The lock at server time `now` (ms), for owner `me`, with what ended
-- dropped: {writer, wend, x (its levels), wait_owner, wait_end, mine (my
-- reader levels), rend (my reader lease end)}; live_readers(s) counts the
-- live readers when a decision needs them (a reader's grant does not).
-- Second value: a WRONGTYPE reply when the key is another kind's; nothing
-- is touched then.
local function load(lock, readers, now, me)
  local v = redis.call('HMGET', lock, 'kind', 'writer', 'we', 'x', 'ww', 'r:' .. me, 'owner')
  local s = {key = readers, now = now}
  if v[1] ~= 'shared' then
    if v[1] then return nil, wrong_type(lock, 'a corolock ' .. v[1] .. ', not a shared mutex') end
    if v[7] then return nil, wrong_type(lock, 'a corolock mutex, not a shared mutex') end
    if redis.call('HLEN', lock) > 0 then
      return nil, wrong_type(lock, 'a hash without kind shared, which corolock never writes')
    end
    -- No lock: readers left of a lock that is gone are no readers.
    redis.call('DEL', readers)
    s.readers = 0
    return s
  end
  if v[2] then
    local we = tonumber(v[3]) or 0
    if we > now then
      s.writer, s.wend, s.x = v[2], we, v[4] or ''
    else
      redis.call('HDEL', lock, 'writer', 'holder', 'we', 'x')
    end
  end
  if v[5] then
    local o, e = string.match(v[5], '^(.+) (%d+)$')
    e = tonumber(e)
    if e and e > now then s.wait_owner, s.wait_end = o, e else redis.call('HDEL', lock, 'ww') end
  end
  local dead = take_ended(readers, now)
  if #dead > 0 then
    local fields = {}
    for i, o in ipairs(dead) do fields[i] = 'r:' .. o end
    redis.call('HDEL', lock, unpack(fields))
  end
  if v[6] then
    local e = tonumber(redis.call('ZSCORE', readers, me))
    if e and e > now then
      s.mine, s.rend = v[6], e
    else
      redis.call('HDEL', lock, 'r:' .. me)
      redis.call('ZREM', readers, me)
    end
  end
  return s
end

local function live_readers(s)
  if not s.readers then s.readers = redis.call('ZCOUNT', s.key, '(' .. num(s.now), '+inf') end
  return s.readers
end

local function is_free(s)
  return not s.writer and not s.wait_owner and live_readers(s) == 0
end
)lua";

// KEYS[1] lock hash, KEYS[2] leases zset (the readers'), KEYS[3] fence counter
// ARGV[1] owner id, ARGV[2] lease (ms), ARGV[3] level id (digits),
// ARGV[4] "<pid> <host> <label>", ARGV[5] the level: "s" shared, held back
// by a waiting writer's marker (writer preference), "r" shared, not held
// back, "x" exclusive; ARGV[6] the marker's lease (ms) a refused writer
// sets or renews, 0: none (a try, or no writer preference)
// Returns {1, token, the owner's levels, ms left of its lease, created}
//         (created 1: the owner held nothing, this grant began a tenure),
//         {0, 0, live readers, wait cap ms, 0} when refused: the cap is the
//         blocking lease's end (for a marked writer at most a third of its
//         marker's lease, so that it renews the marker in time),
//         {-1, 0, 0, -2, 0}: an upgrade, refused (the owner holds only
//         shared levels and asks for the exclusive one).
// A reader is refused while another owner writes, or (with writer
// preference) while another owner's marker is live; an owner that already
// holds a level of either kind always gets a shared one (re-entry, and the
// first half of a downgrade). A writer is refused while another owner
// writes or any reader holds.
constexpr std::string_view acquire_lua = R"lua(
local lease = tonumber(ARGV[2])
if not lease or lease < 1 or lease ~= math.floor(lease) then
  return bad_input('the lease must be a whole number of ms, at least 1', ARGV[2])
end
if not string.match(ARGV[3] or '', '^%d+$') then
  return bad_input('the level must be a decimal number', ARGV[3])
end
local me = ARGV[1] or ''
if me == '' or string.find(me, ' ', 1, true) then
  return bad_input('the owner must be non-empty, without spaces', me)
end
local now_us, now = server_now()
local s, bad = load(KEYS[1], KEYS[2], now, me)
if bad then return bad end
local writing = s.writer == me
local my_x = nil
if writing then my_x = s.x end
local shared = ARGV[5] == 's' or ARGV[5] == 'r'
if not shared and ARGV[5] ~= 'x' then
  return bad_input('the level must be s, r or x', ARGV[5])
end
local mark = tonumber(ARGV[6])
if not mark or mark < 0 or mark ~= math.floor(mark) then
  return bad_input('the marker lease must be a whole number of ms', ARGV[6])
end
if shared then
  if not writing and not s.mine then
    if s.writer then return {0, 0, live_readers(s), s.wend - now, 0} end
    if ARGV[5] == 's' and s.wait_owner and s.wait_owner ~= me then
      return {0, 0, live_readers(s), s.wait_end - now, 0}
    end
  end
else
  if s.mine and not writing then return {-1, 0, 0, -2, 0} end
  if not writing and (s.writer or live_readers(s) > 0) then
    local cap
    if s.writer then
      cap = s.wend - now
    else
      local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
      cap = tonumber(last[2]) - now
    end
    if mark > 0 and (not s.wait_owner or s.wait_owner == me) then
      redis.call('HSET', KEYS[1], 'ww', me .. ' ' .. num(now + mark))
      extend(KEYS[1], KEYS[2], mark)
      cap = math.min(cap, math.max(math.floor(mark / 3), 1))
    end
    return {0, 0, live_readers(s), cap, 0}
  end
end
local created = 0
if not writing and not s.mine then created = 1 end
local ends = now + lease
if writing then ends = math.max(ends, s.wend) end
if s.mine then ends = math.max(ends, s.rend) end
local token = mint_token(KEYS[3], now_us)
local fields = {'kind', 'shared'}
local levels
if shared then
  local mine = ARGV[3]
  if s.mine and s.mine ~= '' then mine = s.mine .. ' ' .. ARGV[3] end
  fields[#fields + 1] = 'r:' .. me
  fields[#fields + 1] = mine
  levels = count_levels(mine) + count_levels(my_x)
  redis.call('ZADD', KEYS[2], num(ends), me)
  if writing then
    fields[#fields + 1] = 'we'
    fields[#fields + 1] = num(ends)
  end
else
  local x = ARGV[3]
  if my_x and my_x ~= '' then x = my_x .. ' ' .. ARGV[3] end
  fields[#fields + 1] = 'writer'
  fields[#fields + 1] = me
  fields[#fields + 1] = 'we'
  fields[#fields + 1] = num(ends)
  fields[#fields + 1] = 'x'
  fields[#fields + 1] = x
  if not writing then
    fields[#fields + 1] = 'holder'
    fields[#fields + 1] = num(now_us) .. ' ' .. (ARGV[4] or '')
  end
  if s.wait_owner == me then redis.call('HDEL', KEYS[1], 'ww') end
  -- One lease end per owner: a downgrading writer's share moves with it.
  if s.mine then redis.call('ZADD', KEYS[2], num(ends), me) end
  levels = count_levels(x) + count_levels(s.mine)
end
redis.call('HSET', KEYS[1], unpack(fields))
extend(KEYS[1], KEYS[2], ends - now)
return {1, token, levels, ends - now, created}
)lua";

// KEYS[1] lock hash, KEYS[2] leases zset (the readers'), KEYS[3] unlock channel
// ARGV[1] owner id, ARGV[2] level id, or "*" for every level of the owner
// Returns {status, receivers}: 1 the owner's last level released, 2 a level
// released and the owner holds others, 3 that level was gone already (a
// retry), 0 the owner holds nothing (its lease ended). The owner's waiting
// marker goes in every case (a writer that gave up). A message is
// published, and its receivers returned, when that may let others in: the
// writer's last level went, the last reader left, or the marker went (a
// waiting writer may then take it); not while a writer still holds, unless
// the marker went. It is "*w<ms>" when readers that yield to waiting
// writers cannot get in for <ms> more (another owner's marker lives, or a
// writer holds): those need not try before then, the others wake. Else "*".
constexpr std::string_view release_lua = R"lua(
local me = ARGV[1] or ''
local _, now = server_now()
local s, bad = load(KEYS[1], KEYS[2], now, me)
if bad then return bad end
local wake, unmarked = false, false
if s.wait_owner == me then
  redis.call('HDEL', KEYS[1], 'ww')
  s.wait_owner = nil
  wake, unmarked = true, true
end
local status = 0
if s.writer == me or s.mine then
  local my_x = nil
  if s.writer == me then my_x = s.x end
  local x, in_x = drop_level(my_x, ARGV[2])
  local r, in_r = drop_level(s.mine, ARGV[2])
  if ARGV[2] ~= '*' and in_x then r, in_r = s.mine or '', false end
  if not in_x and not in_r then return {3, 0} end
  if in_x then
    if x == '' then
      redis.call('HDEL', KEYS[1], 'writer', 'holder', 'we', 'x')
      s.writer = nil
      wake = true
    else
      redis.call('HSET', KEYS[1], 'x', x)
    end
  end
  if in_r then
    if r == '' then
      redis.call('HDEL', KEYS[1], 'r:' .. me)
      redis.call('ZREM', KEYS[2], me)
      s.readers = nil
      if live_readers(s) == 0 then wake = true end
    else
      redis.call('HSET', KEYS[1], 'r:' .. me, r)
    end
  end
  status = 2
  if x == '' and r == '' then status = 1 end
end
if is_free(s) then redis.call('DEL', KEYS[1], KEYS[2]) end
if not wake then return {status, 0} end
local message = '*'
if s.writer then
  -- Nobody gets in while a writer holds, but a waiting writer may take the
  -- marker just given up: writers wake, readers need not try before the
  -- writer's lease end.
  if not unmarked then return {status, 0} end
  message = '*w' .. num(s.wend - now)
elseif s.wait_owner then
  message = '*w' .. num(s.wait_end - now)
end
return {status, redis.call('PUBLISH', KEYS[3], message)}
)lua";

// KEYS[1] lock hash, KEYS[2] leases zset (the readers')
// ARGV[1] owner id, ARGV[2] lease (ms), or 0 to only check
// Returns 1 when the owner holds a level (its lease end moved to at least
// now + lease, both keys' TTL to at least the lease), 0 when it holds none.
constexpr std::string_view renew_lua = R"lua(
local lease = tonumber(ARGV[2])
if not lease or lease < 0 or lease ~= math.floor(lease) then
  return bad_input('the lease must be a whole number of ms', ARGV[2])
end
local me = ARGV[1] or ''
local _, now = server_now()
local s, bad = load(KEYS[1], KEYS[2], now, me)
if bad then return bad end
if s.writer ~= me and not s.mine then return 0 end
if lease > 0 then
  local ends = now + lease
  if s.writer == me and s.wend < ends then redis.call('HSET', KEYS[1], 'we', num(ends)) end
  if s.mine and s.rend < ends then redis.call('ZADD', KEYS[2], num(ends), me) end
  extend(KEYS[1], KEYS[2], lease)
end
return 1
)lua";

std::string with_library(std::string_view body) {
    return std::string(token_minting_lua())
        .append(lease_set_lua())
        .append(shared_lib_lua)
        .append(body);
}

}  // namespace

const script& shared_acquire_script() {
    static const std::string source = with_library(acquire_lua);
    static const script s = make_script("shared_acquire", source);
    return s;
}

const script& shared_release_script(bool shard) {
    static const std::string source = with_library(release_lua);
    static const script s = make_script("shared_release", source);
    static const std::string shard_source = sharded_publish(source);
    static const script sharded_s = make_script("shared_release", shard_source);
    return shard ? sharded_s : s;
}

const script& shared_renew_script() {
    static const std::string source = with_library(renew_lua);
    static const script s = make_script("shared_renew", source);
    return s;
}

}  // namespace corolock::detail
