-- Phase 2: charge every rule, or take back the windows' charges; the
-- reply goes into the slots of st as they are read. An acquire at most
-- charges what it grants.
-- Reads    op, all, g, c, t, st (phase 1's), ARGV[2]; window_ttl,
--          reset_ttl, fdiv.
-- Sets     c to what OP_AT_MOST grants; st's first r - 1 slots to the
--          reply's per-rule values (the contract above), r.
local cs = ARGV[2]
if op == OP_AT_MOST then
    if g < 0 then
        g = 0
    end
    if g >= 1 then
        c, cs = g, string.format('%.0f', g)
    end
end
local charge = all and (op == OP_ACQUIRE or op == OP_AT_MOST)
local r = 1
o = 1
for i = 1, n do
    local algo, p, floor = st[o], st[o + 1], st[o + 2]
    if algo <= 2 then
        local cur, prev, wk, te, admit = st[o + 3], st[o + 4], st[o + 5],
            st[o + 6], st[o + 7]
        o = o + 8
        if charge then
            -- The window's first charge sets its TTL: its end, and so the
            -- TTL it needs, is the same for every later charge in it.
            if op == OP_AT_MOST then
                redis.call('INCRBY', wk, cs)
            end
            if cur == 0 then
                redis.call('PEXPIRE', wk, window_ttl(te, p, algo, floor))
            end
        elseif op == OP_ACQUIRE then
            -- Denied: take the charge back; a window this request created
            -- goes, so that no key is left without a TTL.
            if cur == 0 then
                redis.call('DEL', wk)
            else
                redis.call('DECRBY', wk, ARGV[2])
            end
        end
        if admit then
            st[r] = cur
        else
            st[r] = -1 - cur
        end
        r = r + 1
        if algo == 2 then
            st[r] = prev
            r = r + 1
        end
    elseif algo == 3 then
        local m, sum, xfit, cum, u, key, sq, ss, dead, admit = st[o + 3],
            st[o + 4], st[o + 5], st[o + 6], st[o + 7], st[o + 8],
            st[o + 9], st[o + 10], st[o + 11], st[o + 12]
        o = o + 13
        if charge then
            -- The next link of the chain (the first, if no link lives).
            local stamp = string.format('%.0f', u)
            redis.call('ZADD', key, stamp, stamp .. ':' .. cs ..
                ':~' .. struct.pack('>i8>i8>i8>i8', sq + 1, (ss + c) %
                1125899906842624, u, c))
            if dead ~= 0 then
                redis.call('ZREMRANGEBYSCORE', key, '-inf',
                    string.format('%.0f', u - p))
            end
            -- The newest entry is this one, at u: the log's reset is when
            -- it leaves, never before the last one's.
            redis.call('PEXPIRE', key, string.format('%.0f',
                (reset_ttl(t, u + p, 0, p, floor))))
        end
        if admit then
            st[r] = m + 1
        else
            st[r] = -2 - m
        end
        st[r + 1], st[r + 2], st[r + 3] = sum, xfit, cum
        r = r + 4
    else
        local v, u, du, keep, key, l, vx, vd, admit = st[o + 3], st[o + 4],
            st[o + 5], st[o + 6], st[o + 7], st[o + 8], st[o + 9],
            st[o + 10], st[o + 11]
        o = o + 12
        if charge then
            local dd = du + c * p
            local ttl, kept = reset_ttl(t, u - fdiv(-dd, l), keep, p,
                floor)
            redis.call('SET', key, struct.pack('<i8i8i8', u, dd, kept), 'PX',
                ttl)
        end
        -- admitted (1/0), then the state read: x and D, or -1, -1 (none).
        if admit then
            st[r] = 1
        else
            st[r] = 0
        end
        if v then
            st[r + 1], st[r + 2] = vx, vd
        else
            st[r + 1], st[r + 2] = -1, -1
        end
        r = r + 3
    end
end
