-- EchoMQ v1.2 `reap` (docs/protocol.md "The scripts"): return expired leases to pending.
-- KEYS[1] active   emq:{q}:active
-- KEYS[2] pending  emq:{q}:pending
-- KEYS[3] failed   optional emq:{q}:failed (v1.1 poison jobs; needs ARGV[3])
-- ARGV[1] prefix   job-key prefix emq:{q}:job: (must carry KEYS[1]'s hash tag)
-- ARGV[2] limit    positive integer, at most this many expired members looked at per call
-- ARGV[3] max_attempts  optional non-negative integer; with KEYS[3] and > 0, an expired lease
--                  whose attempts >= max_attempts goes to failed (last_error = stalled)
-- Reply: the number of expired leases moved back to pending (attempts unchanged, so the
--        stale holder's token is fenced off by the next claim; priority 0) or to failed;
--        error EMQARG. Orphans (a member without a row, or whose row is not active) are
--        removed from active and not counted (v1.1), so they never block later calls.
-- v1.1 one slot: every key, and the prefix, carries KEYS[1]'s hash tag, and it is not empty.
local tag = string.match(KEYS[1] or '', '^emq:(%b{}):active$')
if tag == nil or tag == '{}' then
  return redis.error_reply('EMQARG KEYS[1] must be emq:{<queue>}:active with a non-empty hash tag')
end
for i = 2, #KEYS do
  if string.match(KEYS[i], '^emq:(%b{}):') ~= tag then
    return redis.error_reply('EMQARG KEYS[' .. i .. '] must carry hash tag ' .. tag .. ' (one slot)')
  end
end
if ARGV[1] ~= 'emq:' .. tag .. ':job:' then
  return redis.error_reply('EMQARG prefix must be emq:' .. tag .. ':job: (same slot as KEYS[1])')
end
local limit = tonumber(ARGV[2])
if limit == nil or limit <= 0 or limit ~= math.floor(limit) or limit > 9007199254740991 then
  return redis.error_reply('EMQARG limit must be a positive integer')
end
local max_attempts = 0
if ARGV[3] ~= nil then
  max_attempts = tonumber(ARGV[3])
  if max_attempts == nil or max_attempts < 0 or max_attempts ~= math.floor(max_attempts)
      or max_attempts > 9007199254740991 then
    return redis.error_reply('EMQARG max_attempts must be a non-negative integer')
  end
end
if (KEYS[3] ~= nil) ~= (ARGV[3] ~= nil) then
  return redis.error_reply('EMQARG the failed key and max_attempts come together')
end
if KEYS[3] ~= nil and KEYS[3] ~= 'emq:' .. tag .. ':failed' then
  return redis.error_reply('EMQARG KEYS[3] must be emq:' .. tag .. ':failed')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A lease is expired once its deadline has passed; a deadline equal to now is still held.
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now, 'LIMIT', 0, limit)
-- Only a row that really is active moves. A member without a row, or whose row says another
-- state, is an orphan: it is dropped from active (no row is invented, nothing finished is
-- revived), else `limit` of them at the head would block every later call (v1.1).
local moved = 0
for _, id in ipairs(expired) do
  local row = redis.call('HMGET', ARGV[1] .. id, 'state', 'attempts')
  redis.call('ZREM', KEYS[1], id)
  if row[1] == 'active' then
    if max_attempts > 0 and (tonumber(row[2]) or 0) >= max_attempts then
      -- A poison job: every attempt it was given ended in a stalled lease (v1.1).
      redis.call('HSET', ARGV[1] .. id, 'state', 'failed', 'last_error', 'stalled')
      redis.call('ZADD', KEYS[3], now, id)
    else
      redis.call('HSET', ARGV[1] .. id, 'state', 'pending')
      redis.call('ZADD', KEYS[2], 0, id)
    end
    moved = moved + 1
  end
end
return moved
