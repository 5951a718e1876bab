-- EchoMQ v1.2 `enqueue_delayed` (docs/protocol.md "The scripts").
-- KEYS[1] job row   emq:{q}:job:<id>
-- KEYS[2] delayed   emq:{q}:delayed
-- ARGV[1] id        JOB-namespaced id
-- ARGV[2] payload   the caller's bytes, stored verbatim
-- ARGV[3] delay_ms  non-negative integer; the job is due at server TIME + delay_ms
-- Replies: 1 enqueued; 0 duplicate (row untouched);
--          error EMQKIND (id not JOB-namespaced), EMQARG (missing payload, bad delay_ms).
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
if ARGV[2] == nil then
  return redis.error_reply('EMQARG payload is missing')
end
local delay = tonumber(ARGV[3])
if delay == nil or delay < 0 or delay ~= math.floor(delay) or delay > 9007199254740991 then
  return redis.error_reply('EMQARG delay_ms must be a non-negative integer')
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Born with the same three fields as `enqueue`; only the state and the location differ.
redis.call('HSET', KEYS[1], 'state', 'delayed', 'attempts', '0', 'payload', ARGV[2])
redis.call('ZADD', KEYS[2], now + delay, ARGV[1])
return 1
