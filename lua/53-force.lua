-- A forced charge (SEMANTICS.md, "settle") charges c to every rule
-- unjudged, past the limit, up to the rule's ceiling max(capacity,
-- floor((2^50 - 1) / P)) in use, then the script answers as a peek of
-- cost 1. Rare: it reads what it needs plainly.
-- Reads    op, c, n, t, server, window_locate, window_ttl, reset_ttl,
--          fdiv, ARGV[1], KEYS; unexpected and foreign.
-- Leaves   for OP_FORCE, op = OP_PEEK and c = 1, as the refund does.
--          Returns only an error.
if op == OP_FORCE then
    local q, kx = 33, 1
    for i = 1, n do
        local algo, l, p, a3, a4, a5
        algo, l, p, a3, a4, a5, q = struct.unpack('<i8i8i8i8i8i8', ARGV[1],
            q)
        local key = KEYS[kx]
        local top = fdiv(1125899906842623, p)
        if algo >= 4 and a3 > top then
            top = a3
        elseif algo < 4 and l > top then
            top = l
        end
        if algo <= 2 then
            local wk, te = key, a4
            if server then
                local k
                k, te = window_locate(t, a3, p)
                wk = key .. ':' .. string.format('%.0f', k)
                kx = kx + 1
            elseif algo == 2 then
                kx = kx + 2
            else
                kx = kx + 1
            end
            -- The window of t grows by c, up to the ceiling; its first
            -- charge sets its TTL, as an admission's does.
            local cur = tonumber(redis.call('GET', wk)) or 0
            local add = math.min(c, top - cur)
            if add > 0 then
                redis.call('INCRBY', wk, string.format('%.0f', add))
                if cur == 0 then
                    redis.call('PEXPIRE', wk, window_ttl(te, p, algo, a5))
                end
            end
        elseif algo == 3 then
            kx = kx + 1
            -- An entry of cost c at u = max(t, newest), as an admission's,
            -- the next link of the chain (the newest link's q + 1).
            local all = redis.call('ZRANGE', key, '0', '-1', 'WITHSCORES')
            local u, sum, sq, ss = t, 0, 0, 0
            if all[1] and tonumber(all[#all]) > u then
                u = tonumber(all[#all])
            end
            for j = 1, #all, 2 do
                local w, rest = string.match(all[j], '^%d+:(%d+):(.*)$')
                if w == nil then
                    return redis.error_reply(unexpected .. key .. foreign)
                end
                if tonumber(all[j + 1]) > u - p then
                    sum = sum + tonumber(w)
                end
                if #rest >= 33 and string.byte(rest, -33) == 126 then
                    local lq, lv = struct.unpack('>i8>i8', rest, #rest - 31)
                    if lq > sq then
                        sq, ss = lq, lv
                    end
                end
            end
            local add = math.min(c, top - sum)
            if add > 0 then
                local stamp, as = string.format('%.0f', u),
                    string.format('%.0f', add)
                redis.call('ZADD', key, stamp, stamp .. ':' .. as .. ':~' ..
                    struct.pack('>i8>i8>i8>i8', sq + 1, (ss + add) %
                    1125899906842624, u, add))
                redis.call('ZREMRANGEBYSCORE', key, '-inf',
                    string.format('%.0f', u - p))
                redis.call('PEXPIRE', key, string.format('%.0f',
                    (reset_ttl(t, u + p, 0, p, a3))))
            end
        else
            kx = kx + 1
            local v = redis.call('GET', key)
            local x, d, keep = t, 0, 0
            if v then
                if #v ~= 24 then
                    return redis.error_reply(unexpected .. key .. foreign)
                end
                x, d, keep = struct.unpack('<i8i8i8', v)
            end
            local u = t
            if x > u then
                u = x
            end
            local du = 0
            if (u - x) * l < d then
                du = d - (u - x) * l
            end
            -- The backlog drained to u plus c * P, at most top * P (below
            -- 2^53); c * P itself may pass 2^53, so compare in requests.
            local tp = top * p
            local nd = du
            if du < tp then
                nd = tp
                if c < -fdiv(du - tp, p) then
                    nd = du + c * p
                end
            end
            local ttl, kept = reset_ttl(t, u - fdiv(-nd, l), keep, p, a4)
            redis.call('SET', key, struct.pack('<i8i8i8', u, nd, kept), 'PX',
                string.format('%.0f', ttl))
        end
    end
    -- Charged: the decision's sections answer a peek of cost 1.
    op, c = OP_PEEK, 1
end
