--[[ inspect: read everything the RMS knows about one intent, at one instant.

KEYS[1]  <prefix>processing:{<intent>}
KEYS[2]  <prefix>entity_exists:{<intent>}
KEYS[3]  <prefix>fence:{<intent>}

Reply
  {processing value or nil, processing PTTL (-2 when absent), entity_exists value or nil, fence value or nil} ]]

return {
  redis.call('GET', KEYS[1]),
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('GET', KEYS[3]),
}
