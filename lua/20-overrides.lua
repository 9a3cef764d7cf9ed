-- A named limiter's overrides (OP_OVER_SET, OP_OVER_DEL, OP_OVER_LIST a
-- page of the list) in the hash KEYS[2], beside the rules KEYS[1] (the
-- same hash tag).
-- Reads    op, tag; ARGV[2] the client id (set, delete) or the cursor
--          (list), ARGV[3] the override (set).
-- Returns  always, for these ops. A set stores only while the rules
--          exist, and gives the hash the rules' TTL. Reply: set: stored
--          (0/1), delete: removed (0/1), then the tag; list: records of an
--          int64 length and its bytes (the next cursor, then each client
--          and its override), then their count and the tag.
-- The OP_OVER_* codes are the last: one comparison sends every other op
-- on.
if op >= OP_OVER_SET then
    local key = KEYS[2]
    if op == OP_OVER_DEL then
        return struct.pack('<i8i8', redis.call('HDEL', key, ARGV[2]), tag)
    end
    if op == OP_OVER_SET then
        local pt = redis.call('PTTL', KEYS[1])
        if pt == -2 then
            return struct.pack('<i8i8', 0, tag)
        end
        redis.call('HSET', key, ARGV[2], ARGV[3])
        if pt > 0 then
            redis.call('PEXPIRE', key, string.format('%.0f', pt))
        else
            redis.call('PERSIST', key)
        end
        return struct.pack('<i8i8', 1, tag)
    end
    local r = redis.call('HSCAN', key, ARGV[2], 'COUNT', 100)
    local out = {struct.pack('<i8', #r[1]), r[1]}
    for _, s in ipairs(r[2]) do
        out[#out + 1] = struct.pack('<i8', #s)
        out[#out + 1] = s
    end
    out[#out + 1] = struct.pack('<i8i8', #r[2] / 2, tag)
    return table.concat(out)
end
