-- EchoMQ v1 `complete` (PROTOCOL.md "Scripts", fenced verb).
-- KEYS[1] job row    emq:{q}:job:<id>
-- KEYS[2] active     emq:{q}:active
-- KEYS[3] completed  emq:{q}:completed
-- ARGV[1] id         JOB-namespaced id
-- ARGV[2] token      the fencing token the claim handed out
-- Replies: 1 completed; 0 already completed with this same token (a retried call after
--          a lost reply is safe); errors EMQKIND, EMQARG (bad token), EMQNOJOB (no row),
--          EMQSTATE (not active), EMQFENCE (token is not the current attempts).
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local token = tonumber(ARGV[2])
if token == nil or token < 1 or token ~= math.floor(token) then
  return redis.error_reply('EMQARG token must be a positive integer')
end
local row = redis.call('HMGET', KEYS[1], 'state', 'attempts')
if row[1] == false then
  return redis.error_reply('EMQNOJOB no such job')
end
local attempts = tonumber(row[2])
-- The safe retry is checked before the state test (PROTOCOL.md).
if row[1] == 'completed' and attempts == token then
  return 0
end
if row[1] ~= 'active' then
  return redis.error_reply('EMQSTATE job is ' .. row[1] .. ', not active')
end
if attempts ~= token then
  return redis.error_reply('EMQFENCE token ' .. ARGV[2] .. ' is stale, current is ' .. tostring(row[2]))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'state', 'completed')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now, ARGV[1])
return 1
