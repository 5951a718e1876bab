-- EchoMQ v1.2 `claim` (docs/protocol.md "The scripts").
-- KEYS[1] pending   emq:{q}:pending
-- KEYS[2] active    emq:{q}:active
-- ARGV[1] prefix    job-key prefix emq:{q}:job: (must carry KEYS[1]'s hash tag)
-- ARGV[2] lease_ms  positive integer; the lease deadline is server TIME + lease_ms
-- ARGV[3] count     optional positive integer, at most 1000 (default 1)
-- ARGV[4] holder    optional (v1.2): the caller's value for this claim call, 1-64 bytes of
--                   [A-Za-z0-9_.:-]; stored as the row's `holder`, or the field is deleted
-- Reply: an array with one entry per claimed job, each [id, payload, token, priority],
--        empty when nothing is pending; error EMQARG (bad prefix, lease_ms, count or holder).
-- Each claim increments `attempts` and hands the new value out as the fencing token.
-- v1.1 one slot: every key, and the prefix, carries KEYS[1]'s hash tag, and it is not empty.
local tag = string.match(KEYS[1] or '', '^emq:(%b{}):pending$')
if tag == nil or tag == '{}' then
  return redis.error_reply('EMQARG KEYS[1] must be emq:{<queue>}:pending with a non-empty hash tag')
end
for i = 2, #KEYS do
  if string.match(KEYS[i], '^emq:(%b{}):') ~= tag then
    return redis.error_reply('EMQARG KEYS[' .. i .. '] must carry hash tag ' .. tag .. ' (one slot)')
  end
end
if ARGV[1] ~= 'emq:' .. tag .. ':job:' then
  return redis.error_reply('EMQARG prefix must be emq:' .. tag .. ':job: (same slot as KEYS[1])')
end
local lease = tonumber(ARGV[2])
if lease == nil or lease <= 0 or lease ~= math.floor(lease) or lease > 9007199254740991 then
  return redis.error_reply('EMQARG lease_ms must be a positive integer')
end
local count = 1
if ARGV[3] ~= nil then
  count = tonumber(ARGV[3])
  if count == nil or count <= 0 or count ~= math.floor(count) or count > 1000 then
    return redis.error_reply('EMQARG count must be an integer in 1..1000')
  end
end
-- v1.2 holder: the fence compares it beside the token, so a token a failover hands out again
-- still tells the two claims apart. Without one, a stale holder of an earlier claim is removed.
local holder = ARGV[4]
if holder ~= nil and (#holder > 64 or not string.match(holder, '^[A-Za-z0-9_.:%-]+$')) then
  return redis.error_reply('EMQARG holder must be 1-64 bytes of [A-Za-z0-9_.:-]')
end
local popped = redis.call('ZPOPMIN', KEYS[1], count)
if #popped == 0 then
  return {}
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + lease
local out = {}
for i = 1, #popped, 2 do
  local id = popped[i]
  local key = ARGV[1] .. id
  -- A member whose row is gone or not pending is not handed out: claiming it would
  -- invent a row (HINCRBY) or resurrect a finished job. The checker reports such state.
  local row = redis.call('HMGET', key, 'state', 'payload')
  if row[1] == 'pending' then
    local token = redis.call('HINCRBY', key, 'attempts', 1)
    if holder then
      redis.call('HSET', key, 'state', 'active', 'holder', holder)
    else
      redis.call('HSET', key, 'state', 'active')
      redis.call('HDEL', key, 'holder')
    end
    redis.call('ZADD', KEYS[2], deadline, id)
    out[#out + 1] = {id, row[2], token, tonumber(popped[i + 1])}
  end
end
return out
