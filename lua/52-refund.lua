-- A refund (SEMANTICS.md, "refund") gives back up to c of what each rule
-- counts, then the script answers as a peek of cost 1. Rare: it reads
-- what it needs plainly. A refund of 0 changes nothing (no rule is
-- visited): no window written, no log entry dropped, no bucket re-stamped.
-- Reads    op, c, n, t, server, window_locate, ARGV[1], KEYS; unexpected
--          and foreign for data the script did not write.
-- Leaves   for OP_REFUND, op = OP_PEEK and c = 1: the sections after it
--          answer the peek. Returns only an error.
if op == OP_REFUND then
    local q, kx = 33, 1
    for i = 1, c > 0 and n or 0 do
        local algo, l, p, a3, a4, a5
        algo, l, p, a3, a4, a5, q = struct.unpack('<i8i8i8i8i8i8', ARGV[1],
            q)
        local key = KEYS[kx]
        if algo <= 2 then
            local wk, pk = KEYS[kx], KEYS[kx + 1]
            if server then
                local k = window_locate(t, a3, p)
                wk = key .. ':' .. string.format('%.0f', k)
                pk = key .. ':' .. string.format('%.0f', k - 1)
                kx = kx + 1
            elseif algo == 2 then
                kx = kx + 2
            else
                kx = kx + 1
            end
            -- The window of t first, then (sliding) the one before it.
            local left = c
            local cur = tonumber(redis.call('GET', wk)) or 0
            if cur > 0 then
                local take = math.min(left, cur)
                redis.call('DECRBY', wk, string.format('%.0f', take))
                left = left - take
            end
            if algo == 2 and left > 0 then
                local prev = tonumber(redis.call('GET', pk)) or 0
                if prev > 0 then
                    redis.call('DECRBY', pk, string.format('%.0f',
                        math.min(left, prev)))
                end
            end
        elseif algo == 3 then
            kx = kx + 1
            local top = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
            if top[1] then
                -- What stays may be written anew into a key emptied on the
                -- way: it gets back the TTL it had.
                local pttl = redis.call('PTTL', key)
                local u = tonumber(top[2])
                if t > u then
                    u = t
                end
                redis.call('ZREMRANGEBYSCORE', key, '-inf',
                    string.format('%.0f', u - p))
                -- Newest first, stamp by stamp: the stamps above x go
                -- whole, x keeps r of its cost.
                local live = redis.call('ZREVRANGE', key, '0', '-1',
                    'WITHSCORES')
                local left, x, r, j = c, nil, 0, 1
                while j <= #live and left > 0 do
                    local sx, at = 0, live[j + 1]
                    while j <= #live and live[j + 1] == at do
                        local w = string.match(live[j], '^%d+:(%d+):')
                        if w == nil then
                            return redis.error_reply(unexpected .. key ..
                                foreign)
                        end
                        sx = sx + tonumber(w)
                        j = j + 2
                    end
                    x = tonumber(at)
                    if sx > left then
                        r, left = sx - left, 0
                    else
                        left = left - sx
                    end
                end
                if x then
                    local xs = string.format('%.0f', x)
                    redis.call('ZREMRANGEBYSCORE', key, xs, '+inf')
                    if r > 0 then
                        -- The rest at x, as the next link after the
                        -- newest link left (see the log in phase 1).
                        local sq, ss = 0, 0
                        local all = redis.call('ZRANGE', key, '0', '-1')
                        for m = 1, #all do
                            local e = all[m]
                            if string.byte(e, -33) == 126 then
                                local eq, es = struct.unpack('>i8>i8', e,
                                    #e - 31)
                                if eq > sq then
                                    sq, ss = eq, es
                                end
                            end
                        end
                        local rs = string.format('%.0f', r)
                        redis.call('ZADD', key, xs, xs .. ':' .. rs .. ':~' ..
                            struct.pack('>i8>i8>i8>i8', sq + 1, (ss + r) %
                            1125899906842624, x, r))
                        if pttl > 0 then
                            redis.call('PEXPIRE', key, pttl)
                        end
                    end
                end
            end
        else
            kx = kx + 1
            local v = redis.call('GET', key)
            if v then
                if #v ~= 24 then
                    return redis.error_reply(unexpected .. key .. foreign)
                end
                local x, d, keep = struct.unpack('<i8i8i8', v)
                local u = t
                if x > u then
                    u = x
                end
                local du = 0
                if (u - x) * l < d then
                    du = d - (u - x) * l
                end
                -- c * p may pass 2^53 only where it is surely above du.
                local nd = 0
                if c * p < du then
                    nd = du - c * p
                end
                redis.call('SET', key, struct.pack('<i8i8i8', u, nd, keep),
                    'KEEPTTL')
            end
        end
    end
    -- Given back: the decision's sections answer a peek of cost 1.
    op, c = OP_PEEK, 1
end
