-- EchoMQ v1.2 `enqueue` (docs/protocol.md "The scripts": the seed document's script).
-- KEYS[1] job row   emq:{q}:job:<id>
-- KEYS[2] pending   emq:{q}:pending
-- ARGV[1] id        JOB + 26-char lowercase ULID (only the JOB prefix is checked here)
-- ARGV[2] payload   the caller's bytes, stored verbatim
-- ARGV[3] priority  optional non-negative integer, 0 = highest (default 0)
-- Replies: 1 enqueued; 0 duplicate (row untouched);
--          error EMQKIND (id not JOB-namespaced), EMQARG (missing payload, bad priority).
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
-- The branded-id gate: the id must be JOB-namespaced, else refused at the wire.
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
if ARGV[2] == nil then
  return redis.error_reply('EMQARG payload is missing')
end
local priority = 0
if ARGV[3] ~= nil then
  priority = tonumber(ARGV[3])
  if priority == nil or priority < 0 or priority ~= math.floor(priority) or priority > 9007199254740991 then
    return redis.error_reply('EMQARG priority must be a non-negative integer')
  end
end
-- Idempotent: a row that already exists is a no-op (a duplicate enqueue).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
-- The field set: one HSET, three named fields.
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[2])
-- The pending set: the id is the member, so equal priorities order by mint order.
redis.call('ZADD', KEYS[2], priority, ARGV[1])
return 1
