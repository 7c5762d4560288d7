--[[ reserve: take the lease of an intent, or say why not, in one atomic step.

KEYS[1]  <prefix>p{<tag>}   processing: the lease, value <sessionId>:<token>, TTL = lease
KEYS[2]  <prefix>e{<tag>}   entity_exists: set once the entity exists: <sessionId>:<token> of its saga
                            (a bare <token> when it was written before owners were kept);
                            {freed}:<token> once its saga freed it, which is no entity
KEYS[3]  <prefix>d{<tag>}   ended: a set of the session tags of sagas that ended holding their key's
                            answer without holding the marker or the lease (see release.lua)
ARGV[1]  session id (validated by the caller: no ':', braces or whitespace)
ARGV[2]  lease in milliseconds (positive integer)
ARGV[3]  the session's tag to look up in ended, or '' not to look (the saga's own reservation)

Replies
  {'ENDED'}                           the session's saga ended here: its key is answered from that
                                      saga, whoever holds the intent now; nothing changed
  {'DUPLICATE', marker}               entity_exists is set; marker is its value, so a caller can tell
                                      its own saga's entity (a retry of the same request) from another's;
                                      a lease the session still held is deleted
  {'CONFLICT', retryAfterMs}          another session holds the lease; retryAfterMs = its PTTL
  {'SUCCESS', token, expiresAtMs, 0, n}
                                      lease taken with a new token; n = how many sessions ended
                                      holds (the gate compares it with PostgreSQL's record)
  {'SUCCESS', token, expiresAtMs, 1, n}
                                      this session already holds it (a retry of the same saga): the
                                      same token and the current expiry, the lease is not lengthened
                                      (extending is extend's job)
  error 'RMS_CORRUPT ...'             entity_exists holds a tombstone that names no token
  error 'RMS_FENCE_EXHAUSTED ...'     the next token would not fit a PostgreSQL bigint

Token = max(server time in microseconds, tombstone + 1), as a decimal string throughout so no double
ever rounds it. No key keeps the last token for ever (invariant 9): while a lease lives, its value
holds the token; while a marker or tombstone lives, it does. Between them the server clock keeps
tokens rising: a new lease starts at least one round trip after the previous one ended, and the
previous one ended at least its lease after its token was taken. That holds after Redis loses its
data too, and across a failover, as long as no server's clock is behind the one that issued the
earlier token by more than a lease. The gate checks PostgreSQL (src/gate.ts): a row that already
holds a token at or above the new one gets it raised (raise.lua), so a clock that stepped back can
never make a writer lose to a row it should take over.
Needs Redis >= 5 (effects replication: TIME before a write). ]]

-- greater, increment, MAX_TOKEN, serverNow, tokenAbove: from lua/lib/tokens.lua, put in front of this
-- script by src/rms/scripts.ts.

local processing, exists, ended = KEYS[1], KEYS[2], KEYS[3]
local session, leaseMs, ownTag = ARGV[1], ARGV[2], ARGV[3]

--[[ First the key's own saga: once it ended, its retry is answered from it, not from whoever took
     the intent since (another request's entity or lease would answer DUPLICATE or CONFLICT):
       K1: reserve, compensate, free       K2: reserve, create the entity
       K1 again: DUPLICATE                 (a lie: K1's saga ran, and ended COMPENSATED) ]]
if ownTag ~= '' and redis.call('SISMEMBER', ended, ownTag) == 1 then
  return {'ENDED'}
end

local marker = redis.call('GET', exists)
-- A tombstone ({freed}:<token>, see free.lua) is no entity, but its token is the last one issued.
local freed = nil
if marker then
  if string.sub(marker, 1, 7) ~= '{freed}' then
    --[[ A lease this session still holds can no longer lead to an entity: give it back, or it would
         stand, unused, for the rest of its (pickup) lease:
           A: reserve (pickup lease)            B: late finalise marks B's entity (its row won)
           A's saga confirms: DUPLICATE         A's lease held, unused, for minutes ]]
    local held = redis.call('GET', processing)
    if held and string.match(held, '^([^:]+):') == session then
      redis.call('DEL', processing)
    end
    return {'DUPLICATE', marker}
  end
  freed = string.match(marker, '^{freed}:([1-9]%d*)$')
  if not freed then
    return redis.error_reply('RMS_CORRUPT entity_exists holds a tombstone that names no token')
  end
end

local nowUs, nowMs = serverNow()

--[[ The check and the take are one script. Split in two round trips they would let this happen:
       A: GET processing -> nil        B: GET processing -> nil
       A: SET processing A:t1          B: SET processing B:t2      two holders of one intent ]]
local holder = redis.call('GET', processing)
if holder then
  local remaining = redis.call('PTTL', processing)
  if remaining < 0 then remaining = 0 end -- never stored without a TTL; don't report a negative wait
  local holderSession, holderToken = string.match(holder, '^([^:]+):(%d+)$')
  if holderSession == session then
    return {'SUCCESS', holderToken, nowMs + remaining, 1, redis.call('SCARD', ended)}
  end
  return {'CONFLICT', remaining}
end

local token = tokenAbove(nowUs, freed)
if greater(token, MAX_TOKEN) then
  return redis.error_reply('RMS_FENCE_EXHAUSTED the next token would exceed ' .. MAX_TOKEN)
end

redis.call('SET', processing, session .. ':' .. token, 'PX', leaseMs)
return {'SUCCESS', token, nowMs + tonumber(leaseMs), 0, redis.call('SCARD', ended)}
