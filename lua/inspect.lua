--[[ inspect: read everything the RMS knows about one intent, at one instant.

KEYS[1]  <prefix>p{<tag>}   processing
KEYS[2]  <prefix>e{<tag>}   entity_exists

Reply
  {processing value or nil, processing PTTL (-2 when absent), entity_exists value or nil,
   entity_exists PTTL (-1 without a TTL, -2 when absent)} ]]

return {
  redis.call('GET', KEYS[1]),
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('PTTL', KEYS[2]),
}
