--[[ release: give a lease back, only when the caller holds it.

KEYS[1]  <prefix>p{<tag>}   processing
ARGV[1]  lock value <sessionId>:<token> of the caller

Replies
  {'RELEASED'}    the caller held the lease; processing deleted
  {'NOT_OWNER'}   the lease expired or belongs to someone else; left intact ]]

local processing = KEYS[1]

--[[ Compare and delete in one script. In two round trips:
       A: GET processing -> A:t1      (A's lease ends)      B: reserve -> B:t2
       A: DEL processing              A deletes B's lease; C can now reserve beside B ]]
if redis.call('GET', processing) ~= ARGV[1] then
  return {'NOT_OWNER'}
end
redis.call('DEL', processing)
return {'RELEASED'}
