-- EchoMQ v1.2 `extend` (docs/protocol.md "The scripts", fenced verb): renew a lease.
-- KEYS[1] job row   emq:{q}:job:<id>
-- KEYS[2] active    emq:{q}:active
-- ARGV[1] id        JOB-namespaced id
-- ARGV[2] token     the fencing token the claim handed out
-- ARGV[3] lease_ms  positive integer; the new deadline is server TIME + lease_ms
-- ARGV[4] holder    optional (v1.2): the holder the claim was made with
-- Replies: 1; errors EMQKIND, EMQARG, EMQNOJOB, EMQSTATE, EMQFENCE.
-- v1.1 one slot: every key carries KEYS[1]'s hash tag, and it is not empty.
local tag = string.match(KEYS[1] or '', '^emq:(%b{}):')
if tag == nil or tag == '{}' then
  return redis.error_reply('EMQARG KEYS[1] must be emq:{<queue>}:... with a non-empty hash tag')
end
for i = 2, #KEYS do
  if string.match(KEYS[i], '^emq:(%b{}):') ~= tag then
    return redis.error_reply('EMQARG KEYS[' .. i .. '] must carry hash tag ' .. tag .. ' (one slot)')
  end
end
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
-- v1.1 canonical token: the decimal of an integer in 1..2^53-1, no sign, zero, space or exponent.
local token_arg = ARGV[2] or ''
if not string.match(token_arg, '^[1-9]%d*$') or #token_arg > 16 or tonumber(token_arg) > 9007199254740991 then
  return redis.error_reply('EMQARG token must be the canonical decimal of an integer in 1..2^53-1')
end
local token = tonumber(token_arg)
local lease = tonumber(ARGV[3])
if lease == nil or lease <= 0 or lease ~= math.floor(lease) or lease > 9007199254740991 then
  return redis.error_reply('EMQARG lease_ms must be a positive integer')
end
-- v1.2 holder: optional; where both the call and the row carry one, the fence compares them.
local holder = ARGV[4]
if holder ~= nil and (#holder > 64 or not string.match(holder, '^[A-Za-z0-9_.:%-]+$')) then
  return redis.error_reply('EMQARG holder must be 1-64 bytes of [A-Za-z0-9_.:-]')
end
local row = redis.call('HMGET', KEYS[1], 'state', 'attempts', 'holder')
if row[1] == false then
  return redis.error_reply('EMQNOJOB no such job')
end
if row[1] ~= 'active' then
  return redis.error_reply('EMQSTATE job is ' .. row[1] .. ', not active')
end
if tonumber(row[2]) ~= token then
  return redis.error_reply('EMQFENCE token ' .. ARGV[2] .. ' is stale, current is ' .. tostring(row[2]))
end
if holder and row[3] and row[3] ~= holder then
  return redis.error_reply('EMQFENCE holder ' .. holder .. ' is stale, current is ' .. row[3])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], 'XX', now + lease, ARGV[1])
return 1
