--[[ free: remove the "entity exists" marker, only when it records the caller's token (compensation).

KEYS[1]  <prefix>entity_exists:{<intent>}
ARGV[1]  the caller's token

Replies
  {'FREED'}       entity_exists recorded this token (as <sessionId>:<token>, or bare) and is deleted
  {'NOT_OWNER'}   entity_exists is absent or records another token; left intact ]]

local exists = KEYS[1]

--[[ Compare and delete in one script. In two round trips:
       A: GET entity_exists -> t1     (a retry of A's free deletes it; B reserves, finalizes: t2)
       A: DEL entity_exists           A deletes B's marker: a third saga can create a duplicate ]]
-- Tokens are unique per intent, so the token alone names the owner. The marker is
-- <sessionId>:<token>, or a bare token written before owners were kept.
local marker = redis.call('GET', exists)
local token = marker and (string.match(marker, '^([1-9]%d*)$') or string.match(marker, ':([1-9]%d*)$'))
if token ~= ARGV[1] then
  return {'NOT_OWNER'}
end
redis.call('DEL', exists)
return {'FREED'}
