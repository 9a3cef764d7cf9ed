-- The shapes most requests have, one rule acquired on the client's clock,
-- each on its shortest path (the general path below costs about half as
-- much again). Both decide by the same comparisons, and the client checks
-- every reply of either against src/algo.c.
-- Reads    n, op, t, c, tag, the first rule's numbers (algo1, l1, p1, x1,
--          y1, z1), KEYS[1] (and KEYS[2], a sliding window's previous
--          one), ARGV[2]; window_ttl, reset_ttl, fdiv.
-- Returns  the general path's reply for OP_ACQUIRE of one rule on the
--          client's clock without a block (ARGV[3] nil), but for a bucket
--          whose key holds what the script did not write: that goes on to
--          the general path, which says what.
if n == 1 and op == OP_ACQUIRE and t >= 0 and ARGV[3] == nil then
    if algo1 <= 2 then
        -- A window: INCRBY charges at once; a denial takes it back.
        local now = redis.call('INCRBY', KEYS[1], ARGV[2])
        local cur, prev, admit = now - c, 0, now <= l1
        if algo1 == 2 then
            prev = tonumber(redis.call('GET', KEYS[2])) or 0
            admit = prev * y1 + now * p1 <= l1 * p1
        end
        if not admit then
            if cur == 0 then
                redis.call('DEL', KEYS[1])
            else
                redis.call('DECRBY', KEYS[1], ARGV[2])
            end
            if algo1 == 1 then
                return struct.pack('<i8i8', -1 - cur, tag)
            end
            return struct.pack('<i8i8i8', -1 - cur, prev, tag)
        end
        if cur == 0 then
            redis.call('PEXPIRE', KEYS[1], window_ttl(y1, p1, algo1, z1))
        end
        if algo1 == 1 then
            return struct.pack('<i8i8', cur, tag)
        end
        return struct.pack('<i8i8i8', cur, prev, tag)
    elseif algo1 >= 4 then
        -- A bucket: read, decide, write back with the TTL in one SET.
        local v = redis.call('GET', KEYS[1])
        local x, d, keep, has = t, 0, 0, false
        if v and #v == 24 then
            x, d, keep = struct.unpack('<i8i8i8', v)
            has = true
        end
        if v == false or has then
            local u = t
            if x > u then
                u = x
            end
            local du = 0
            if (u - x) * l1 < d then
                du = d - (u - x) * l1
            end
            local vx, vd = -1, -1
            if has then
                vx, vd = x, d
            end
            if c > x1 or du > (x1 - c) * p1 then
                return struct.pack('<i8i8i8i8', 0, vx, vd, tag)
            end
            -- Stored at u with backlog dd (request*ms); its reset: drained.
            local dd = du + c * p1
            local ttl, kept = reset_ttl(t, u - fdiv(-dd, l1), keep, p1,
                y1)
            redis.call('SET', KEYS[1], struct.pack('<i8i8i8', u, dd, kept),
                'PX', ttl)
            return struct.pack('<i8i8i8i8', 1, vx, vd, tag)
        end
        -- Anything else under the key: the general path says what.
    end
end
