--[[ extend: lengthen the lease of its holder; never re-acquires a lease that has expired.

KEYS[1]  <prefix>p{<tag>}   processing
ARGV[1]  lock value <sessionId>:<token> of the caller
ARGV[2]  new lease in milliseconds, counted from now (positive integer)

Replies
  {'EXTENDED', expiresAtMs}   the caller holds the lease; it now ends leaseMs from the server's now
  {'LOST'}                    the lease expired or belongs to someone else; nothing changed ]]

local processing = KEYS[1]
local expected, leaseMs = ARGV[1], ARGV[2]

--[[ Compare and extend in one script. In two round trips:
       A: GET processing -> A:t1      (A's lease ends)      B: reserve -> B:t2
       A: PEXPIRE processing          A lengthens B's lease, B never notices ]]
if redis.call('GET', processing) ~= expected then
  return {'LOST'}
end
redis.call('PEXPIRE', processing, leaseMs)

local _, nowMs = serverNow() -- from lua/lib/tokens.lua
return {'EXTENDED', nowMs + tonumber(leaseMs)}
