-- EchoMQ v1.1 `progress` (PROTOCOL.md "Scripts", fenced verb): store a progress note.
-- KEYS[1] job row   emq:{q}:job:<id>
-- ARGV[1] id        JOB-namespaced id
-- ARGV[2] token     the fencing token the claim handed out
-- ARGV[3] progress  opaque bytes stored in the `progress` field
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
if ARGV[3] == nil then
  return redis.error_reply('EMQARG progress is missing')
end
local row = redis.call('HMGET', KEYS[1], 'state', 'attempts')
if row[1] == false then
  return redis.error_reply('EMQNOJOB no such job')
end
if row[1] ~= 'active' then
  return redis.error_reply('EMQSTATE job is ' .. row[1] .. ', not active')
end
if tonumber(row[2]) ~= token then
  return redis.error_reply('EMQFENCE token ' .. ARGV[2] .. ' is stale, current is ' .. tostring(row[2]))
end
redis.call('HSET', KEYS[1], 'progress', ARGV[3])
return 1
