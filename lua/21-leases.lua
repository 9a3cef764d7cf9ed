-- Leases (OP_LEASE_ACQUIRE takes one, OP_LEASE_RELEASE releases one) on
-- KEYS[1], a sorted set of lease ids scored by the time each ends.
-- Reads    op, t (-1: the server's TIME), c the most holders, algo1 (the
--          first number after the tag) the lease time, l1 the TTL floor,
--          tag; ARGV[2] the lease's id.
-- Returns  always, for these ops: admitted (0/1), the leases live before
--          it (ending after t), the first and the last of their ends (-1:
--          none), t, and the tag; a release: removed (0/1) and the tag.
if op == OP_LEASE_ACQUIRE or op == OP_LEASE_RELEASE then
    local key = KEYS[1]
    if op == OP_LEASE_RELEASE then
        return struct.pack('<i8i8', redis.call('ZREM', key, ARGV[2]), tag)
    end
    if t == -1 then
        local tm = redis.call('TIME')
        t = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', t))
    local live, first, last, admit = redis.call('ZCARD', key), -1, -1, 0
    if live > 0 then
        first = tonumber(redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')[2])
        last = tonumber(redis.call('ZRANGE', key, '-1', '-1',
            'WITHSCORES')[2])
    end
    if live < c then
        -- The key lives until its last lease ends, and a lease time more.
        local e, keep = t + algo1, t + algo1
        admit = 1
        redis.call('ZADD', key, string.format('%.0f', e), ARGV[2])
        if last > keep then
            keep = last
        end
        local ttl = keep - t + algo1
        if ttl < l1 then
            ttl = l1
        end
        redis.call('PEXPIRE', key, string.format('%.0f', ttl))
    end
    return struct.pack('<i8i8i8i8i8i8', admit, live, first, last, t, tag)
end
