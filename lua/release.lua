--[[ release: give a lease back, only when the caller holds it.

KEYS[1]  <prefix>p{<tag>}   processing
KEYS[2]  <prefix>d{<tag>}   ended: the session tags of sagas that ended holding their key's answer
ARGV[1]  lock value <sessionId>:<token> of the caller
ARGV[2]  the caller's session tag to add to ended (its saga ends: see reserve.lua), or '' for none;
         added whether or not the caller still holds the lease (a retry after RELEASED adds it too)
ARGV[3]  how long ended lives from now, in milliseconds (with ARGV[2]; its earlier members too)

Replies
  {'RELEASED'}    the caller held the lease; processing deleted
  {'NOT_OWNER'}   the lease expired or belongs to someone else; left intact ]]

local processing, ended = KEYS[1], KEYS[2]

--[[ Recorded before the lease goes: in two steps another request could take the intent in between,
     and a retry of the ending saga's key would be answered from that request's lease. ]]
if ARGV[2] ~= '' then
  redis.call('SADD', ended, ARGV[2])
  redis.call('PEXPIRE', ended, ARGV[3])
end

--[[ Compare and delete in one script. In two round trips:
       A: GET processing -> A:t1      (A's lease ends)      B: reserve -> B:t2
       A: DEL processing              A deletes B's lease; C can now reserve beside B ]]
if redis.call('GET', processing) ~= ARGV[1] then
  return {'NOT_OWNER'}
end
redis.call('DEL', processing)
return {'RELEASED'}
