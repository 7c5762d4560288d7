--[[ raise: give the holder of a lease a new token above a floor, keeping the lease's end.

KEYS[1]  <prefix>p{<tag>}   processing
ARGV[1]  lock value <sessionId>:<token> of the caller
ARGV[2]  floor: a token PostgreSQL already holds for the intent (a decimal string)

Replies
  {'RAISED', token}               the caller held the lease; it now holds it as <sessionId>:<token>,
                                  token = max(server time in µs, floor + 1, its own + 1),
                                  same expiry
  {'LOST'}                        the lease expired or belongs to someone else; nothing changed
  error 'RMS_FENCE_EXHAUSTED ...' the token would not fit a PostgreSQL bigint

The gate's truth check calls it when PostgreSQL's row of the intent holds a token at or above the
one reserve just issued: only when no Redis key kept the earlier token and the clock issuing the new
one is behind the one that issued the earlier (a step back, a failover to a server whose clock is
behind). Without it the new holder's fenced write would lose to a row it should take over. ]]

-- greater, increment, MAX_TOKEN, serverNow, tokenAbove: from lua/lib/tokens.lua, put in front of this
-- script by src/rms/scripts.ts.

local processing = KEYS[1]
local expected, floor = ARGV[1], ARGV[2]

--[[ Compare and replace in one script. In two round trips:
       A: GET processing -> A:t1      (A's lease ends)      B: reserve -> B:t2
       A: SET processing A:t3         A takes B's lease ]]
if redis.call('GET', processing) ~= expected then
  return {'LOST'}
end
local session, held = string.match(expected, '^([^:]+):([1-9]%d*)$')
if greater(held, floor) then floor = held end -- never below the caller's own token
local nowUs = serverNow()
local token = tokenAbove(nowUs, floor)
if greater(token, MAX_TOKEN) then
  return redis.error_reply('RMS_FENCE_EXHAUSTED the next token would exceed ' .. MAX_TOKEN)
end
redis.call('SET', processing, session .. ':' .. token, 'KEEPTTL')
return {'RAISED', token}
