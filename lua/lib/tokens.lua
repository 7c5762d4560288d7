--[[ tokens: the helpers the RMS scripts share to read the clock, issue and compare fencing tokens. src/rms/scripts.ts puts
this file in front of each script (Redis runs each script on its own: they cannot import). ]]

-- a > b for decimal strings without leading zeros (any length; no float, no locale).
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return false
end

-- s + 1 for a decimal string.
local function increment(s)
  local i = #s
  while i > 0 and string.byte(s, i) == 57 do i = i - 1 end -- 57 = '9'
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

-- The largest token: PostgreSQL's bigint.
local MAX_TOKEN = '9223372036854775807'

-- The server's clock: now in microseconds (a decimal string) and in milliseconds (a number).
local function serverNow()
  local time = redis.call('TIME')
  return time[1] .. string.format('%06d', tonumber(time[2])), tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- The token to issue at nowUs: nowUs itself, or floor + 1 when floor (a token or nil) is not below it.
local function tokenAbove(nowUs, floor)
  if floor and not greater(nowUs, floor) then return increment(floor) end
  return nowUs
end
