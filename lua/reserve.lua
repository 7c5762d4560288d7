--[[ reserve: take the lease of an intent, or say why not, in one atomic step.

KEYS[1]  <prefix>processing:{<intent>}     lease, value <sessionId>:<token>, TTL = lease
KEYS[2]  <prefix>entity_exists:{<intent>}  set once the entity exists: <sessionId>:<token> of its saga
                                           (a bare <token> when it was written before owners were kept);
                                           {freed}:<token> once its saga freed it, which is no entity
KEYS[3]  <prefix>fence:{<intent>}          last token issued for the intent (no TTL)
ARGV[1]  session id (validated by the caller: no ':', braces or whitespace)
ARGV[2]  lease in milliseconds (positive integer)

Replies
  {'DUPLICATE', marker}               entity_exists is set; marker is its value, so a caller can tell
                                      its own saga's entity (a retry of the same request) from another's
  {'CONFLICT', retryAfterMs}          another session holds the lease; retryAfterMs = its PTTL
  {'SUCCESS', token, expiresAtMs, 0}  lease taken with a new token
  {'SUCCESS', token, expiresAtMs, 1}  this session already holds it (a retry of the same saga): the
                                      same token and the current expiry, the lease is not lengthened
                                      (extending is extend's job)
  error 'RMS_CORRUPT ...'             the fence key holds something that is not a token
  error 'RMS_FENCE_EXHAUSTED ...'     the next token would not fit a PostgreSQL bigint

Token = max(fence + 1, server time in microseconds), handled as a decimal string throughout so no
double ever rounds it. The time term keeps tokens rising after Redis loses its data; the fence term
keeps them rising within one microsecond and across a server clock that steps back.
Needs Redis >= 5 (effects replication: TIME before a write). ]]

local MAX_TOKEN = '9223372036854775807'

-- greater(a, b): from lua/lib/tokens.lua, put in front of this script by src/rms/scripts.ts.

-- s + 1 for a decimal string.
local function increment(s)
  local i = #s
  while i > 0 and string.byte(s, i) == 57 do i = i - 1 end -- 57 = '9'
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

local processing, exists, fence = KEYS[1], KEYS[2], KEYS[3]
local session, leaseMs = ARGV[1], ARGV[2]

local marker = redis.call('GET', exists)
-- A tombstone ({freed}:<token>, see free.lua) is no entity.
if marker and string.sub(marker, 1, 7) ~= '{freed}' then
  return {'DUPLICATE', marker}
end

local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

--[[ The check and the take are one script. Split in two round trips they would let this happen:
       A: GET processing -> nil        B: GET processing -> nil
       A: SET processing A:t1          B: SET processing B:t2      two holders of one intent ]]
local holder = redis.call('GET', processing)
if holder then
  local remaining = redis.call('PTTL', processing)
  if remaining < 0 then remaining = 0 end -- never stored without a TTL; don't report a negative wait
  local holderSession, holderToken = string.match(holder, '^([^:]+):(%d+)$')
  if holderSession == session then
    return {'SUCCESS', holderToken, nowMs + remaining, 1}
  end
  return {'CONFLICT', remaining}
end

local token = time[1] .. string.format('%06d', tonumber(time[2]))
local last = redis.call('GET', fence)
if last then
  if not string.match(last, '^[1-9]%d*$') then
    return redis.error_reply('RMS_CORRUPT fence key holds a value that is not a token')
  end
  local afterLast = increment(last)
  if greater(afterLast, token) then token = afterLast end
end
if greater(token, MAX_TOKEN) then
  return redis.error_reply('RMS_FENCE_EXHAUSTED the next token would exceed ' .. MAX_TOKEN)
end

redis.call('SET', processing, session .. ':' .. token, 'PX', leaseMs)
redis.call('SET', fence, token)
return {'SUCCESS', token, nowMs + tonumber(leaseMs), 0}
