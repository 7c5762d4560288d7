--[[ count-out: a saga that ended stops counting against its caller's limits of sagas in flight.

KEYS[i]  <prefix>f{<tag>}<counter>   the in-flight sets the saga was counted in (see admit.lua), all
                                     under the caller's hash tag
ARGV[1]  session id of the saga

Replies
  {'COUNTED_OUT'}    the session was counted in at least one of them; it is in none now
  {'NOT_COUNTED'}    it was in none (a retry, an entry that ended by itself, a saga never counted in)

Starts per second are not given back: a saga that ended was started all the same. An emptied set is
deleted by Redis itself. ]]

local removed = 0
for i = 1, #KEYS do
  removed = removed + redis.call('ZREM', KEYS[i], ARGV[1])
end
if removed > 0 then
  return {'COUNTED_OUT'}
end
return {'NOT_COUNTED'}
