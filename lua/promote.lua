-- EchoMQ v1 `promote` (PROTOCOL.md "Scripts"): move due delayed jobs to pending.
-- KEYS[1] delayed  emq:{q}:delayed
-- KEYS[2] pending  emq:{q}:pending
-- ARGV[1] prefix   job-key prefix emq:{q}:job: (must carry KEYS[1]'s hash tag)
-- ARGV[2] limit    positive integer, at most this many jobs per call
-- Reply: the number of due jobs moved to pending (priority 0); error EMQARG.
local tag = string.match(KEYS[1] or '', '^emq:(%b{}):delayed$')
if tag == nil or ARGV[1] ~= 'emq:' .. tag .. ':job:' then
  return redis.error_reply('EMQARG prefix must be emq:' .. (tag or '{?}') .. ':job: (same slot as KEYS[1])')
end
local limit = tonumber(ARGV[2])
if limit == nil or limit <= 0 or limit ~= math.floor(limit) or limit > 9007199254740991 then
  return redis.error_reply('EMQARG limit must be a positive integer')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
-- Only a row that really is delayed moves: a member without a row, or whose row says another
-- state, is left where it is (no row is invented, nothing finished is revived) for the checker.
local moved = 0
for _, id in ipairs(due) do
  if redis.call('HGET', ARGV[1] .. id, 'state') == 'delayed' then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HSET', ARGV[1] .. id, 'state', 'pending')
    redis.call('ZADD', KEYS[2], 0, id)
    moved = moved + 1
  end
end
return moved
