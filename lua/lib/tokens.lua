--[[ tokens: the helpers every RMS script that compares fencing tokens shares. src/rms/scripts.ts puts
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
