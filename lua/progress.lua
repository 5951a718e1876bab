-- EchoMQ v1 `progress` (PROTOCOL.md "Scripts", fenced verb): store a progress note.
-- KEYS[1] job row   emq:{q}:job:<id>
-- ARGV[1] id        JOB-namespaced id
-- ARGV[2] token     the fencing token the claim handed out
-- ARGV[3] progress  opaque bytes stored in the `progress` field
-- Replies: 1; errors EMQKIND, EMQARG, EMQNOJOB, EMQSTATE, EMQFENCE.
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local token = tonumber(ARGV[2])
if token == nil or token < 1 or token ~= math.floor(token) then
  return redis.error_reply('EMQARG token must be a positive integer')
end
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
