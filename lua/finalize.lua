--[[ finalize: promote a held lease to "the entity exists", atomically.

KEYS[1]  <prefix>p{<tag>}   processing
KEYS[2]  <prefix>e{<tag>}   entity_exists
ARGV[1]  lock value <sessionId>:<token> of the caller
ARGV[2]  the caller's token
ARGV[3]  TTL of entity_exists in milliseconds, or '0' for none
ARGV[4]  the marker to write: <session tag>:<token> (src/rms/keys.ts: the session id's first characters)

Replies
  {'FINALIZED'}   the caller held the lease: entity_exists = ARGV[4] (the owner, so a retry of the
                  same request can tell its own entity from another's), processing deleted; or a retry
                  after that (entity_exists already records this owner, as ARGV[4], as the whole lock
                  value or as this bare token, as earlier versions wrote it)
  {'LOST'}        the caller does not hold the lease and the entity is not recorded as its own;
                  nothing written
  {'FREED'}       entity_exists is the tombstone of the caller's token or a newer one (see free.lua):
                  the caller's saga was undone, this is a late attempt; nothing written ]]

-- greater(a, b): from lua/lib/tokens.lua, put in front of this script by src/rms/scripts.ts.

local processing, exists = KEYS[1], KEYS[2]
local expected, token, existsTtlMs, owner = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

--[[ Never over a tombstone of our token or a newer one. The lease alone is not enough:
       A: finalize attempt 1 (slow; given up)    the saga compensates: row COMPENSATED, free t1
       A: finalize attempt 1 runs, lease still held (the release comes after the free)
     marking now would bring the freed marker back: DUPLICATE for ever, with no entity. ]]
local marker = redis.call('GET', exists)
local freedToken = marker and string.match(marker, '^{freed}:([1-9]%d*)$')
if freedToken and not greater(token, freedToken) then
  return {'FREED'}
end

--[[ Check and write in one script. In two round trips a stale holder could mark the entity:
       A: GET processing -> A:t1      (A's lease ends)      B: reserve -> B:t2
       A: SET entity_exists t1        the entity is marked with a token PostgreSQL has fenced out ]]
if redis.call('GET', processing) == expected then
  if existsTtlMs ~= '0' then
    redis.call('SET', exists, owner, 'PX', existsTtlMs)
  else
    redis.call('SET', exists, owner)
  end
  redis.call('DEL', processing)
  return {'FINALIZED'}
end

-- An activity retry after a finalize whose reply was lost: the marker is already ours.
if marker == owner or marker == expected or marker == token then
  return {'FINALIZED'}
end
return {'LOST'}
