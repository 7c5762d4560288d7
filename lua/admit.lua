--[[ admit: count a saga in against its caller's limits, or say how long to wait, in one atomic step.

One pair of keys per counter of the saga (its caller's, and one per declared scope value), all under
the caller's hash tag, so the script touches one slot:
KEYS[2i-1]  <prefix>f{<tag>}<counter>   in flight: a sorted set, member = session id, score = the
                                        epoch ms at which the entry stops counting (a saga that never
                                        counts itself out: its worker's history terminated, say)
KEYS[2i]    <prefix>s{<tag>}<counter>   starts: a sorted set of the last second's admissions,
                                        member = <server µs>:<session id>, score = epoch ms
ARGV[1]     session id of the saga (validated by the caller)
ARGV[2]     how long its entries count at most, ms (positive integer)
ARGV[2i+1]  counter i's limit of sagas in flight (0: none)
ARGV[2i+2]  counter i's limit of starts per second (0: none)

Replies
  {'ADMITTED', 0}                    counted in now, in every counter
  {'ADMITTED', 1}                    the session counts already (a retry of a saga that runs):
                                     nothing changed
  {'LIMITED', retryAfterMs, 'IN_FLIGHT'|'RATE'}
                                     a limit is reached; nothing was counted (the longest wait, and
                                     the limit that asks for it)

Needs Redis >= 5 (effects replication: TIME before a write). ]]

-- serverNow: from lua/lib/tokens.lua, put in front of this script by src/rms/scripts.ts.

-- How long a caller refused for sagas in flight is told to wait: when one of them ends is unknown.
local IN_FLIGHT_RETRY_MS = 1000
local WINDOW_MS = 1000

local session, holdMs = ARGV[1], tonumber(ARGV[2])
local nowUs, nowMs = serverNow()
local counters = #KEYS / 2

local counted = redis.call('ZSCORE', KEYS[1], session)
if counted and tonumber(counted) > nowMs then
  return {'ADMITTED', 1}
end

--[[ The check and the count are one script. Split in two round trips they would let this happen
     (limit 1, one slot left):
       A: ZCARD -> 0        B: ZCARD -> 0        A: ZADD        B: ZADD       two sagas in flight ]]
local wait, limit = 0, nil
for i = 1, counters do
  local inFlight, starts = KEYS[2 * i - 1], KEYS[2 * i]
  local maxInFlight, maxPerSecond = tonumber(ARGV[2 * i + 1]), tonumber(ARGV[2 * i + 2])
  -- Entries past their end no longer count (their sagas were never counted out).
  redis.call('ZREMRANGEBYSCORE', inFlight, '-inf', nowMs)
  if maxInFlight > 0 and redis.call('ZCARD', inFlight) >= maxInFlight and IN_FLIGHT_RETRY_MS > wait then
    wait, limit = IN_FLIGHT_RETRY_MS, 'IN_FLIGHT'
  end
  if maxPerSecond > 0 then
    redis.call('ZREMRANGEBYSCORE', starts, '-inf', nowMs - WINDOW_MS)
    if redis.call('ZCARD', starts) >= maxPerSecond then
      -- A start is possible again once the oldest start of the window is a second old.
      local oldest = redis.call('ZRANGE', starts, 0, 0, 'WITHSCORES')
      local until_ = tonumber(oldest[2]) + WINDOW_MS - nowMs
      if until_ < 1 then until_ = 1 end
      if until_ > wait then wait, limit = until_, 'RATE' end
    end
  end
end
if limit then
  return {'LIMITED', wait, limit}
end

for i = 1, counters do
  local inFlight, starts = KEYS[2 * i - 1], KEYS[2 * i]
  redis.call('ZADD', inFlight, nowMs + holdMs, session)
  -- The set lives as long as its longest entry (invariant 9); a later admission lengthens it.
  if redis.call('PTTL', inFlight) < holdMs then redis.call('PEXPIRE', inFlight, holdMs) end
  if tonumber(ARGV[2 * i + 2]) > 0 then
    redis.call('ZADD', starts, nowMs, nowUs .. ':' .. session)
    redis.call('PEXPIRE', starts, WINDOW_MS)
  end
end
return {'ADMITTED', 0}
