-- EchoMQ v1.2 `clean` (docs/protocol.md "The scripts", `clean`): remove finished jobs past an age.
-- KEYS[1] finished  emq:{q}:completed or emq:{q}:failed
-- ARGV[1] prefix    job-key prefix emq:{q}:job: (must carry KEYS[1]'s hash tag)
-- ARGV[2] age_ms    canonical decimal >= 0: members finished at or before server TIME - age_ms go
-- ARGV[3] limit     canonical decimal >= 1: at most this many members taken, oldest first
-- Reply: the array of ids whose rows were deleted, oldest first; error EMQARG.
-- A member whose row is missing, or whose row's state is not the set's, leaves the set
-- uncounted and its row stays: it is the checker's evidence, as reap and promote treat orphans.
local tag, set = string.match(KEYS[1] or '', '^emq:(%b{}):(%a+)$')
if tag == nil or tag == '{}' or (set ~= 'completed' and set ~= 'failed') then
  return redis.error_reply('EMQARG KEYS[1] must be emq:{<queue>}:completed or emq:{<queue>}:failed')
end
if #KEYS ~= 1 then
  return redis.error_reply('EMQARG clean takes one key, the finished set')
end
if ARGV[1] ~= 'emq:' .. tag .. ':job:' then
  return redis.error_reply('EMQARG prefix must be emq:' .. tag .. ':job: (same slot as KEYS[1])')
end
local function canonical(v, min)
  if v == nil or #v > 16 or not (v == '0' or string.match(v, '^[1-9]%d*$')) then return nil end
  local n = tonumber(v)
  if n < min or n > 9007199254740991 then return nil end
  return n
end
local age = canonical(ARGV[2], 0)
if age == nil then
  return redis.error_reply('EMQARG age_ms must be the canonical decimal of an integer in 0..2^53-1')
end
local limit = canonical(ARGV[3], 1)
if limit == nil then
  return redis.error_reply('EMQARG limit must be the canonical decimal of an integer in 1..2^53-1')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - age, 'LIMIT', 0, limit)
local removed = {}
for _, id in ipairs(due) do
  local key = ARGV[1] .. id
  redis.call('ZREM', KEYS[1], id)
  if redis.call('HGET', key, 'state') == set then
    redis.call('DEL', key)
    removed[#removed + 1] = id
  end
end
return removed
