-- EchoMQ v1.2 `promote` (docs/protocol.md "The scripts"): move due delayed jobs to pending.
-- KEYS[1] delayed  emq:{q}:delayed
-- KEYS[2] pending  emq:{q}:pending
-- ARGV[1] prefix   job-key prefix emq:{q}:job: (must carry KEYS[1]'s hash tag)
-- ARGV[2] limit    positive integer, at most this many jobs per call
-- Reply: the number of due jobs moved to pending (priority 0); error EMQARG. Orphans (a
--        member without a row, or whose row is not delayed) are removed from delayed and
--        not counted (v1.1), so they never block later calls.
-- v1.1 one slot: every key, and the prefix, carries KEYS[1]'s hash tag, and it is not empty.
local tag = string.match(KEYS[1] or '', '^emq:(%b{}):delayed$')
if tag == nil or tag == '{}' then
  return redis.error_reply('EMQARG KEYS[1] must be emq:{<queue>}:delayed with a non-empty hash tag')
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
-- Only a row that really is delayed moves. A member without a row, or whose row says another
-- state, is an orphan: it is dropped from delayed (no row is invented, nothing finished is
-- revived), else `limit` of them at the head would block every later call (v1.1).
local moved = 0
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  if redis.call('HGET', ARGV[1] .. id, 'state') == 'delayed' then
    redis.call('HSET', ARGV[1] .. id, 'state', 'pending')
    redis.call('ZADD', KEYS[2], 0, id)
    moved = moved + 1
  end
end
return moved
