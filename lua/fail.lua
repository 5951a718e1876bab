-- EchoMQ v1.2 `fail` (docs/protocol.md "The scripts", fenced verb).
-- KEYS[1] job row   emq:{q}:job:<id>
-- KEYS[2] active    emq:{q}:active
-- KEYS[3] pending   emq:{q}:pending
-- KEYS[4] delayed   emq:{q}:delayed
-- KEYS[5] failed    emq:{q}:failed
-- ARGV[1] id            JOB-namespaced id
-- ARGV[2] token         the fencing token the claim handed out
-- ARGV[3] error         text stored in `last_error`
-- ARGV[4] max_attempts  positive integer
-- ARGV[5] backoff_ms    non-negative integer; > 0 sends a retry to delayed, due after it
-- ARGV[6] priority      non-negative integer, the retry's pending score
-- ARGV[7] holder        optional (v1.2): the holder the claim was made with
-- Replies: 'retry' while attempts < max_attempts, else 'failed';
--          errors EMQKIND, EMQARG, EMQNOJOB, EMQSTATE, EMQFENCE (in that order of checks).
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
local function int(v, min)
  local n = tonumber(v)
  if n == nil or n < min or n ~= math.floor(n) or n > 9007199254740991 then return nil end
  return n
end
-- v1.1 canonical token: the decimal of an integer in 1..2^53-1, no sign, zero, space or exponent.
local token_arg = ARGV[2] or ''
if not string.match(token_arg, '^[1-9]%d*$') or #token_arg > 16 or tonumber(token_arg) > 9007199254740991 then
  return redis.error_reply('EMQARG token must be the canonical decimal of an integer in 1..2^53-1')
end
local token = tonumber(token_arg)
if ARGV[3] == nil then return redis.error_reply('EMQARG error text is missing') end
local max_attempts = int(ARGV[4], 1)
if max_attempts == nil then return redis.error_reply('EMQARG max_attempts must be a positive integer') end
local backoff = int(ARGV[5], 0)
if backoff == nil then return redis.error_reply('EMQARG backoff_ms must be a non-negative integer') end
local priority = int(ARGV[6], 0)
if priority == nil then return redis.error_reply('EMQARG priority must be a non-negative integer') end
-- v1.2 holder: optional; where both the call and the row carry one, the fence compares them.
local holder = ARGV[7]
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
local attempts = tonumber(row[2])
if attempts ~= token then
  return redis.error_reply('EMQFENCE token ' .. ARGV[2] .. ' is stale, current is ' .. tostring(row[2]))
end
if holder and row[3] and row[3] ~= holder then
  return redis.error_reply('EMQFENCE holder ' .. holder .. ' is stale, current is ' .. row[3])
end
redis.call('ZREM', KEYS[2], ARGV[1])
if attempts < max_attempts then
  if backoff > 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('HSET', KEYS[1], 'state', 'delayed', 'last_error', ARGV[3])
    redis.call('ZADD', KEYS[4], now + backoff, ARGV[1])
  else
    redis.call('HSET', KEYS[1], 'state', 'pending', 'last_error', ARGV[3])
    redis.call('ZADD', KEYS[3], priority, ARGV[1])
  end
  return 'retry'
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'state', 'failed', 'last_error', ARGV[3])
redis.call('ZADD', KEYS[5], now, ARGV[1])
return 'failed'
