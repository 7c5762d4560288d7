--[[ mark-exists: read-repair when PostgreSQL proves the entity exists but Redis forgot it.

KEYS[1]  <prefix>e{<tag>}   entity_exists
ARGV[1]  the token PostgreSQL recorded for the entity
ARGV[2]  TTL of entity_exists in milliseconds, or '0' for none
ARGV[3]  the tag of the session PostgreSQL recorded with it (src/rms/keys.ts), or '' when unknown (the
         marker is then the bare token)

Replies
  {'MARKED'}                  entity_exists records this token (or a newer one, which is kept: the
                              newest token owns the marker, so only its saga's compensation frees it);
                              while the marker lives reserve answers DUPLICATE, and once it is freed
                              its tombstone keeps later tokens above it
  {'FREED'}                   entity_exists is the tombstone of this token or a newer one: its saga
                              was undone after the caller read PostgreSQL; nothing is marked ]]

-- greater(a, b): from lua/lib/tokens.lua, put in front of this script by src/rms/scripts.ts.

local exists = KEYS[1]
local token, existsTtlMs, session = ARGV[1], ARGV[2], ARGV[3]
local value = token
if session and session ~= '' then value = session .. ':' .. token end

--[[ Keep a newer marker. A read-repair can be slow:
       A: reads row (token t1) from PostgreSQL     saga 1 compensates, frees t1
       B: reserve -> t2, finalize: entity_exists = t2
       A: mark-exists t1                           overwriting would strand t2's marker: B's
                                                   compensation could then never free it ]]
local current = redis.call('GET', exists)
--[[ Keep a tombstone of the same or a newer token (see free.lua): the repair read a row that has
     since been undone, or one older than it. ]]
local freedToken = current and string.match(current, '^{freed}:([1-9]%d*)$')
if freedToken and not greater(token, freedToken) then
  return {'FREED'}
end
-- The marker is <sessionId>:<token>, or a bare token written before owners were kept.
local currentToken = current and not freedToken and (string.match(current, '^([1-9]%d*)$') or string.match(current, ':([1-9]%d*)$'))
if not (currentToken and greater(currentToken, token)) then
  if existsTtlMs ~= '0' then
    redis.call('SET', exists, value, 'PX', existsTtlMs)
  else
    redis.call('SET', exists, value)
  end
end
return {'MARKED'}
