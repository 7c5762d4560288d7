--[[ remember-ended: restore the sessions whose sagas ended holding their key's answer, from
PostgreSQL's record (src/db/ended-sessions.ts), after Redis lost them (a flush, a failover).

KEYS[1]  <prefix>d{<tag>}   ended: a set of session tags (see reserve.lua)
ARGV[1]  how long ended lives from now, in milliseconds
ARGV[2..] the session tags to add

Reply
  {'REMEMBERED', n}   ended holds the tags given (and any it held); n = its size now ]]

local ended = KEYS[1]
for i = 2, #ARGV do
  redis.call('SADD', ended, ARGV[i])
end
redis.call('PEXPIRE', ended, ARGV[1])
return {'REMEMBERED', redis.call('SCARD', ended)}
