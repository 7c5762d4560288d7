--[[ free: end the "entity exists" marker, only when it records the caller's token (compensation).

KEYS[1]  <prefix>e{<tag>}   entity_exists
KEYS[2]  <prefix>d{<tag>}   ended: the session tags of sagas that ended holding their key's answer
ARGV[1]  the caller's token
ARGV[2]  TTL in milliseconds of a tombstone written where no marker of this token was, or '0' for none
ARGV[3]  the caller's session tag to add to ended (its saga ends undone: see reserve.lua), or ''
ARGV[4]  how long ended lives from now, in milliseconds (with ARGV[3])

Replies
  {'FREED'}       entity_exists recorded this token (as <sessionId>:<token>, or bare); it now holds the
                  tombstone {freed}:<token>, with the marker's TTL, which reserve treats as absent
  {'NOT_OWNER'}   entity_exists is a tombstone of this token or a newer one, or records another
                  token, left intact; or it is absent or the tombstone of an older token, and now
                  holds the tombstone of this token (TTL ARGV[2])
Needs Redis >= 6.0 (KEEPTTL). ]]

-- greater(a, b): from lua/lib/tokens.lua, put in front of this script by src/rms/scripts.ts.

local exists, ended, tombstoneTtlMs = KEYS[1], KEYS[2], ARGV[2]

--[[ Recorded before the marker goes, in the same step: freed first, another request could create the
     entity before the tag is added, and a retry of this saga's key would be answered DUPLICATE. ]]
if ARGV[3] ~= '' then
  redis.call('SADD', ended, ARGV[3])
  redis.call('PEXPIRE', ended, ARGV[4])
end

-- Writes the tombstone of `token` with the configured retention (none when '0').
local function tombstone(token)
  if tombstoneTtlMs ~= '0' then
    redis.call('SET', exists, '{freed}:' .. token, 'PX', tombstoneTtlMs)
  else
    redis.call('SET', exists, '{freed}:' .. token)
  end
end

--[[ Compare and delete in one script. In two round trips:
       A: GET entity_exists -> t1     (a retry of A's free deletes it; B reserves, finalizes: t2)
       A: DEL entity_exists           A deletes B's marker: a third saga can create a duplicate ]]
-- Tokens are unique per intent, so the token alone names the owner. The marker is
-- <sessionId>:<token>, or a bare token written before owners were kept.
local marker = redis.call('GET', exists)
if not marker then
  -- Nothing to free (Redis lost it, or the saga never got as far), but a late read-repair of this
  -- token could still come: leave the tombstone that refuses it.
  tombstone(ARGV[1])
  return {'NOT_OWNER'}
end
--[[ An older saga's tombstone counts as absent (reserve treats it so): replace it with ours, or a
     late finalize or repair of our token would find nothing to stop it (found by rms-model.test.ts):
       A: created, freed: {freed}:tA          B: reserve tB; finalize given up; undo frees tB
       B: late finalize, lease still held     sets entity_exists = tB: DUPLICATE with no entity ]]
local olderFreed = string.match(marker, '^{freed}:([1-9]%d*)$')
if olderFreed then
  if greater(ARGV[1], olderFreed) then tombstone(ARGV[1]) end
  return {'NOT_OWNER'}
end
local token = string.match(marker, '^([1-9]%d*)$') or string.match(marker, '^[^{:]+:([1-9]%d*)$')
if token ~= ARGV[1] then
  return {'NOT_OWNER'}
end
--[[ A tombstone, not a delete. A read-repair is a read of PostgreSQL and then a write here:
       R: reads row (REGISTERED, t1)        A: row COMPENSATED, free t1 (DEL)
       R: mark-exists t1                    the marker is back: DUPLICATE for an entity that is gone
     mark-exists keeps a tombstone of the same or a newer token. ]]
redis.call('SET', exists, '{freed}:' .. token, 'KEEPTTL')
return {'FREED'}
