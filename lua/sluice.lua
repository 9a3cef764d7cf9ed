-- sluice.lua - the one script of the Lua backend: reads every rule's state,
-- decides admission, charges all rules or none, and returns the state it
-- read. The client (src/backends/evalsha.c) computes every output from
-- that state with the arithmetic every backend shares (src/algo.c), and
-- checks that it reaches the same admissions as the script.
--
-- Written for Redis's CPU, which is what a decision costs under load
-- (counted with callgrind, instructions per call; see docs/DESIGN.md):
--   - the chunk defines four small functions (window_ttl, reset_ttl,
--     fdiv, and window_locate on the server's clock), each created only
--     for the decisions that call it: Redis keeps no state between calls,
--     so a function defined here is created again on every call (see "The
--     storage rules" below for what that costs);
--   - the numbers come packed in one argument and are read by one
--     struct.unpack per rule: every argument costs Redis an object and a
--     Lua string, and tonumber goes through strtod;
--   - the cost comes ready-made in decimal for the commands that need it;
--   - a window is charged by INCRBY at once and the charge taken back on
--     a denial: fewer instructions than reading first, though it writes;
--   - the reply is a few integers, and the client does the rest.
-- docs/DESIGN.md, "The Lua script contract", has the layout of every key;
-- every backend shares it.
--
-- ARGV[1]   little-endian int64s: t (the request's time in ms, or -1: the
--           server's TIME), op (1 acquire: charge when every rule admits,
--           0 peek, 2 reset: server's clock only, the client deletes on
--           its own, 3 acquire at most cost, 4 refund cost, 11 a forced
--           charge of cost: a settle's excess), cost, tag
--           (echoed last), then for each rule: algo
--           (1 fixed, 2 sliding, 3 log, 4 token, 5 gcra), limit, period,
--           and three more:
--             fixed, sliding  tz offset, te (ms to the window's end; -1 on
--                             the server's clock), TTL floor
--             log             TTL floor, 0, 0
--             token, gcra     capacity, TTL floor, 0
-- ARGV[2]   the cost in decimal
-- ARGV[3]   only for a ruleset with a block (ops 0, 1, 2 and 3): each
--           rule's block in ms as a little-endian int64 (0: none,
--           negative: with extend=1); the key's block is then the last
--           key, and the reply has two values more before the tag
-- KEYS      in rule order: fixed one key, sliding two (t's window and the
--           one before), log and buckets one. On the server's clock a
--           window rule has one key, the rule's, and the script appends
--           ':' .. k for window k (the same hash tag, so the same slot).
-- return    in rule order: fixed: s (admitted: cur, else -1 - cur, with
--           cur the count before the request); sliding: s, prev; log: s
--           over m (the newest stamp, -1 none: admitted m + 1, else
--           -2 - m), sum (the live cost at u = max(t, m)), xfit, cum (a
--           fitting denial: the stamp whose leaving lets it fit and the
--           live cost up to it; else -1, 0); token, gcra: admitted (1/0),
--           x and D read (-1, -1: none). Then, on the server's clock, t.
--           Then, for op 3, the amount granted. Last the tag. A refund
--           (op 4) or a forced charge (op 11) is made first and then
--           answered as a peek of cost 1,
--           and an acquire at most reads as a peek of cost 1 (the state
--           and admissions it reports are those), then charges what it
--           grants. With ARGV[3], the block's end before and after the
--           decision (-1: none). All as little-endian int64s in one string.
-- Numbers are below 2^53 (SEMANTICS.md, "Accepted ranges"), so doubles
-- hold them exactly; products are formed only where they stay below 2^53.

local t, op, c, tag, algo1, l1, p1, x1, y1, z1 = struct.unpack(
    '<i8i8i8i8i8i8i8i8i8i8', ARGV[1])
local n = (#ARGV[1] - 32) / 48

-- A named limiter's overrides (op 12 set, 13 delete, 14 a page of the
-- list) in the hash KEYS[2], beside the rules KEYS[1] (the same hash tag):
-- ARGV[2] the client id (12, 13) or the cursor (14), ARGV[3] the override
-- (12). A set stores only while the rules exist, and gives the hash the
-- rules' TTL. Reply: 12: stored (0/1), 13: removed (0/1), then the tag; 14:
-- records of an int64 length and its bytes (the next cursor, then each
-- client and its override), then their count and the tag.
if op >= 12 then
    local key = KEYS[2]
    if op == 13 then
        return struct.pack('<i8i8', redis.call('HDEL', key, ARGV[2]), tag)
    end
    if op == 12 then
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

-- Leases (op 9 take one, 10 release one) on KEYS[1], a sorted set of
-- lease ids scored by the time each ends: c is the most holders, algo1
-- (the first number after the tag) the lease time, l1 the TTL floor,
-- ARGV[2] the lease's id. Reply: admitted (0/1), the leases live before it
-- (ending after t), the first and the last of their ends (-1: none), t, and
-- the tag; a release: removed (0/1) and the tag.
if op == 9 or op == 10 then
    local key = KEYS[1]
    if op == 10 then
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

-- A named limiter's stored rules (ops 5 read, 6 store unless present, 7
-- store, 8 delete) under KEYS[1]; ARGV[2] is the value to store, c its
-- keep-alive in ms (0: none), ARGV[1] padded to 80 bytes. The value starts
-- "sluice-limiter 1\n<keep-alive>\n": a read starts the keep-alive again.
-- KEYS[2], the overrides hash, is deleted with the rules and given each
-- keep-alive they are; a read with ARGV[3] also reads the override of that
-- client. Reply: the value read (none: empty), the override read (with
-- ARGV[3]), then found (0/1), the override's length (with ARGV[3]; -1:
-- none), the count of overrides (not for op 8: HLEN, so that a client can
-- know a name has none) and the tag.
if op >= 5 and op <= 8 then
    local key = KEYS[1]
    if op == 8 then
        local d = redis.call('DEL', key)
        redis.call('DEL', KEYS[2])
        return struct.pack('<i8i8', d, tag)
    end
    if op == 6 or op == 7 then
        local args = {'SET', key, ARGV[2]}
        if c > 0 then
            args[4], args[5] = 'PX', string.format('%.0f', c)
        end
        if op == 6 then
            args[#args + 1] = 'NX'
        end
        redis.call(unpack(args))
        if op == 7 then
            if c > 0 then
                redis.call('PEXPIRE', KEYS[2], string.format('%.0f', c))
            else
                redis.call('PERSIST', KEYS[2])
            end
            return ARGV[2] .. struct.pack('<i8i8i8', 1,
                redis.call('HLEN', KEYS[2]), tag)
        end
    end
    local v = redis.call('GET', key)
    if not v then
        if ARGV[3] then
            return struct.pack('<i8i8i8i8', 0, -1, 0, tag)
        end
        return struct.pack('<i8i8i8', 0, 0, tag)
    end
    local ka = tonumber(string.match(v, '^sluice%-limiter 1\n(%d+)\n'))
    if ka and ka > 0 then
        redis.call('PEXPIRE', key, string.format('%.0f', ka))
        redis.call('PEXPIRE', KEYS[2], string.format('%.0f', ka))
    end
    local count = redis.call('HLEN', KEYS[2])
    if ARGV[3] then
        local o = redis.call('HGET', KEYS[2], ARGV[3])
        if not o then
            return v .. struct.pack('<i8i8i8i8', 1, -1, count, tag)
        end
        return v .. o .. struct.pack('<i8i8i8i8', 1, #o, count, tag)
    end
    return v .. struct.pack('<i8i8i8', 1, count, tag)
end

-- The storage rules of src/store.h, under the same names. A rule's family
-- is window (algo 1 fixed, 2 sliding), log (3) or bucket (4 token, 5
-- gcra); a window rule reads `windows` windows, its algo (fixed t's,
-- sliding t's and the one before). How long a charged key lives, never
-- less than the TTL floor, each rule in one function, as in C:
--   SL_TTL_WINDOW_END  window_ttl (sl_store_window_ttl): a window's key
--                      lives until its end (te ms away) and a period more
--                      for each window that still counts it;
--   SL_TTL_RESET       reset_ttl (sl_store_ttl): a log's or a bucket's key
--                      lives until its reset after the charge and a period
--                      (a log: when its newest entry leaves; a bucket: when
--                      its backlog has drained), and never ends before a
--                      previous charge asked (keep: a raised limit drains
--                      faster than the rule that charged before), as
--                      bucket_write in src/backends/plain_ops.c.
-- fdiv is sl_fdiv, the exact floor of a / b (a ceiling is -fdiv(-a, b), as
-- sl_cdiv): both below 2^53, the double quotient is off by one at most.
-- A decision creates only the functions its rules call, and none takes an
-- upvalue (t is an argument): counted with callgrind, creating a function
-- costs 0.3k instructions a call, 0.35k more if it captures a local, and
-- each call 0.5k, where a one-rule decision costs 27k to 41k. Against
-- two functions made for every decision before (window_ttl, bucket_store),
-- a decision on new keys costs -0.7 % (fixed), -0.4 % (sliding), +0.2 %
-- (token, gcra), +0.7 % (log), +0.4 % (fixed + token); on the server's
-- clock (window_locate) +1.2 % (fixed), +0.8 % (sliding). Two runs of one
-- build differ by up to 1 % on new keys (a hot key: more). What is
-- left written out: a bucket's drain to u (the fast path, the refund and
-- phase 1), where a function would cost 0.8k on every bucket decision.
local window_ttl, reset_ttl, fdiv
if n > 1 or algo1 <= 2 then
    window_ttl = function(te, p, windows, floor)
        local ttl = te + windows * p
        if ttl < floor then
            ttl = floor
        end
        return ttl
    end
end
if n > 1 or algo1 >= 3 then
    -- reset: the time of the state's reset after a charge at t; keep: the
    -- latest time a charge asked the key to live until (0: none). Returns
    -- the TTL and the new keep.
    reset_ttl = function(t, reset, keep, p, floor)
        if reset + p > keep then
            keep = reset + p
        end
        local ttl = keep - t
        if ttl < floor then
            ttl = floor
        end
        return ttl, keep
    end
end
if n > 1 or algo1 >= 4 or op == 3 or op == 11 then
    fdiv = function(a, b)
        local q = math.floor(a / b)
        if q * b > a then
            q = q - 1
        elseif (q + 1) * b <= a then
            q = q + 1
        end
        return q
    end
end

-- The shapes most requests have, one rule acquired on the client's clock,
-- each on its shortest path (the general path below costs about half as
-- much again). Both decide by the same comparisons, and the client checks
-- every reply of either against src/algo.c.
if n == 1 and op == 1 and t >= 0 and ARGV[3] == nil then
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

local pos = 33
local server = t == -1
-- The error for data the script did not write under a key.
local unexpected = 'sluice script: unexpected data under '
local foreign = '; is another program using the key prefix?'
local window_locate
if server then
    local tm = redis.call('TIME')
    t = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
    -- sl_window_locate: the index of the window of t (shifted by the
    -- rule's offset) and the ms from t to its end. TIME plus an offset is
    -- far below 2^52, where fmod and the quotient are exact.
    window_locate = function(t, off, p)
        local sh = t + off
        local e = math.fmod(sh, p)
        return (sh - e) / p, p - e
    end
end

if op == 2 then
    -- A reset on the server's clock: the rule's key, and windows k - 2 ..
    -- k + 1 around now.
    for i = 1, n do
        local algo, l, p, off
        algo, l, p, off, pos = struct.unpack('<i8i8i8i8i8i8', ARGV[1], pos)
        redis.call('DEL', KEYS[i])
        if algo <= 2 then
            local k = window_locate(t, off, p)
            for d = -2, 1 do
                redis.call('DEL', KEYS[i] .. ':' .. string.format('%.0f',
                    k + d))
            end
        end
    end
    if ARGV[3] then
        redis.call('DEL', KEYS[#KEYS])
    end
    return struct.pack('<i8i8', t, tag)
end

-- A refund (SEMANTICS.md, "refund") gives back up to c of what each rule
-- counts, then the script answers as a peek of cost 1. Rare: it reads
-- what it needs plainly. A refund of 0 changes nothing (no rule is
-- visited): no window written, no log entry dropped, no bucket re-stamped.
if op == 4 then
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
    op, c = 0, 1
end

-- A forced charge (SEMANTICS.md, "settle") charges c to every rule
-- unjudged, past the limit, up to the rule's ceiling max(capacity,
-- floor((2^50 - 1) / P)) in use, then the script answers as a peek of
-- cost 1. Rare: it reads what it needs plainly.
if op == 11 then
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
    op, c = 0, 1
end

-- An acquire at most reads as a peek of cost 1; g is what it grants: the
-- least room over the rules, where room is the largest cost a rule admits.
local g = c
if op == 3 then
    c = 1
end

-- Phase 1: each rule's state and admission; only windows write (see
-- below). What phase 2 needs goes into
-- st, in rule order (sized for one rule at once: growing a table costs).
local st = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
local all = true
local blk, adm = ARGV[3], nil
if blk then
    adm = {}
end
local kx, o = 1, 1
for i = 1, n do
    local algo, l, p, a3, a4, a5
    algo, l, p, a3, a4, a5, pos = struct.unpack('<i8i8i8i8i8i8', ARGV[1],
        pos)
    local admit
    if algo <= 2 then
        local wk, pk, te = KEYS[kx], KEYS[kx + 1], a4
        if server then
            local k
            k, te = window_locate(t, a3, p)
            wk = KEYS[kx] .. ':' .. string.format('%.0f', k)
            pk = KEYS[kx] .. ':' .. string.format('%.0f', k - 1)
            kx = kx + 1
        elseif algo == 2 then
            kx = kx + 2
        else
            kx = kx + 1
        end
        -- An acquire charges at once (INCRBY answers the count in the
        -- same call) and phase 2 takes the charge back on a denial:
        -- counted with callgrind, that is cheaper than reading first.
        local now, prev = 0, 0
        if op == 1 then
            now = redis.call('INCRBY', wk, ARGV[2])
        else
            now = (tonumber(redis.call('GET', wk)) or 0) + c
        end
        if algo == 1 then
            admit = now <= l
        else
            -- prev * (P - e) + (cur + c) * P <= L * P; each product stays
            -- below 2^53, or passes it only where the sum is surely above
            -- L * P, where the double's rounding cannot change the answer.
            prev = tonumber(redis.call('GET', pk)) or 0
            admit = prev * te + now * p <= l * p
        end
        local cur = now - c
        if op == 3 then
            -- fixed: L - cur; sliding: floor((L*P - prev*(P - e)) / P) -
            -- cur, each product below 2^53 (one correction step).
            local room = l - cur
            if algo == 2 then
                room = fdiv(l * p - prev * te, p) - cur
            end
            if room < g then
                g = room
            end
        end
        st[o], st[o + 1], st[o + 2], st[o + 3] = algo, p, a5, cur
        st[o + 4], st[o + 5], st[o + 6] = prev, wk, te
        o = o + 7
    elseif algo == 3 then
        -- A log: a sorted set scored by stamp, members 'x:c:rest' (every
        -- backend reads x and c so). The script's own members are links
        -- of a chain: 'x:c:~' and 32 bytes, q, S, x and c as big-endian
        -- int64, where q counts the script's entries on the key and S
        -- their costs (mod 2^50), both up to and with this one (binary:
        -- one struct.unpack reads them, where Lua's patterns and strtod
        -- cost a third of the decision; links of one stamp and cost sort
        -- by q). When the newest and the oldest member are links and the
        -- set holds exactly the q's between them, the live cost is an S
        -- difference: a few commands that read one member each, however
        -- many entries live. Anything else (members written by the plain
        -- backends; links of one stamp with different costs, which sort
        -- by cost) is read whole, as before.
        local key = KEYS[kx]
        kx = kx + 1
        local top = redis.call('ZRANGE', key, '-1', '-1')
        local m, u, sum, xfit, cum, sq, ss, dead = -1, t, 0, -1, 0, 0, 0, 0
        local lo, nl, fast, r0
        local v = top[1]
        if v then
            local q, s
            if string.byte(v, -33) == 126 then
                q, s, m = struct.unpack('>i8>i8>i8', v, #v - 31)
            else
                m = tonumber(string.match(v, '^(%d+):%d+:'))
                if m == nil then
                    return redis.error_reply(unexpected .. key .. foreign)
                end
            end
            if m > u then
                u = m
            end
            lo = '(' .. string.format('%.0f', u - p)
            dead = 1 -- unknown: an admission prunes
            local qf, sf, xf, cf
            if q then
                v = redis.call('ZRANGE', key, '0', '0')[1]
                if string.byte(v, -33) == 126 then
                    qf, sf, xf, cf = struct.unpack('>i8>i8>i8>i8', v,
                        #v - 31)
                end
            end
            if qf and q - qf + 1 == redis.call('ZCARD', key) then
                -- Every member a link: the first live one is the oldest,
                -- or the first after the dead ones, which must then be
                -- the next q (else its stamp has links of other costs).
                local qo = qf
                dead = 0
                if xf <= u - p then
                    dead = redis.call('ZCOUNT', key, '-inf',
                        string.format('%.0f', u - p))
                    v = redis.call('ZRANGEBYSCORE', key, lo, '+inf',
                        'LIMIT', '0', '1')[1]
                    qf = false
                    if v == nil then
                        fast, nl = true, 0 -- nothing lives: a new chain
                    elseif string.byte(v, -33) == 126 then
                        qf, sf, xf, cf = struct.unpack('>i8>i8>i8>i8', v,
                            #v - 31)
                    end
                end
                if qf == qo + dead then
                    fast, r0, sq, ss = true, dead, q, s
                    nl = q - qf + 1
                    sum = (s - sf + cf) % 1125899906842624
                end
            end
        end
        if fast then
            admit = sum + c <= l
            if not admit and c <= l and sum == nl then
                -- Every live cost is 1: the entry whose leaving lets the
                -- request fit is the (nl + c - l)-th oldest, read by rank.
                cum = nl + c - l
                local e = redis.call('ZRANGE', key, r0 + cum - 1,
                    r0 + cum - 1)
                xfit = tonumber(string.match(e[1], '^(%d+):'))
            end
        end
        if (not fast and top[1]) or (fast and not admit and c <= l and
                xfit == -1) then
            -- Read whole: the sum, the chain's newest link (if any link
            -- lives), and for a denial that can fit, the oldest-first
            -- walk to the entry whose leaving lets it fit.
            local live = redis.call('ZRANGEBYSCORE', key, lo, '+inf')
            if not fast then
                sum, sq, ss = 0, 0, 0
                for j = 1, #live do
                    local w, s, q = string.match(live[j],
                        '^%d+:(%d+):(.*)$')
                    if w == nil then
                        return redis.error_reply(unexpected .. key .. foreign)
                    end
                    sum = sum + tonumber(w)
                    if string.byte(s, -33) == 126 then
                        local q, sv = struct.unpack('>i8>i8', s, #s - 31)
                        if q > sq then
                            sq, ss = q, sv
                        end
                    end
                end
                admit = sum + c <= l
            end
            if not admit and c <= l then
                -- Oldest first, until what is left plus c fits; c <= L,
                -- so the walk ends at the latest when nothing is left.
                for j = 1, #live do
                    local x, w = string.match(live[j], '^(%d+):(%d+):')
                    cum = cum + tonumber(w)
                    if sum - cum + c <= l then
                        xfit = tonumber(x)
                        break
                    end
                end
            end
        elseif not top[1] then
            admit = c <= l
        end
        if op == 3 and l - sum < g then
            g = l - sum
        end
        st[o], st[o + 1], st[o + 2], st[o + 3] = algo, p, a3, m
        st[o + 4], st[o + 5], st[o + 6] = sum, xfit, cum
        st[o + 7], st[o + 8], st[o + 9], st[o + 10] = u, key, sq, ss
        st[o + 11] = dead
        o = o + 12
    else
        -- token, gcra: x (the last charge), D (the backlog in request*ms
        -- at x) and keep (the time until which the state must live, so
        -- that its TTL only grows): three little-endian int64.
        local key = KEYS[kx]
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
        -- Drained at L request*ms a ms: (u - x) * L < D tells whether
        -- anything is left; past 2^53 the product is inexact but still
        -- above D, so the comparison holds.
        local du = 0
        if (u - x) * l < d then
            du = d - (u - x) * l
        end
        admit = c <= a3 and du <= (a3 - c) * p
        if op == 3 then
            -- B - ceil(du / P).
            local room = a3 + fdiv(-du, p)
            if room < g then
                g = room
            end
        end
        st[o], st[o + 1], st[o + 2], st[o + 3] = algo, p, a4, v or false
        st[o + 4], st[o + 5], st[o + 6], st[o + 7] = u, du, keep, key
        st[o + 8], st[o + 9], st[o + 10] = l, x, d
        o = o + 11
    end
    if not admit then
        all = false
    end
    st[o] = admit
    o = o + 1
    if blk then
        adm[i] = admit
    end
end

-- A block (SEMANTICS.md, "Penalties"), when ARGV[3] holds each rule's
-- block in ms (0: none; negative: with extend=1) and the last key is the
-- key's block, a sorted set whose member 'e' is scored by the block's end.
-- Blocked (t before the end): denied, what phase 1 charged taken back,
-- and a rule with extend starts it again; else a rule with a block that
-- denies, and whose cost could fit, starts it. A peek only reports.
local e0, e1
if blk then
    local bk = KEYS[#KEYS]
    e0 = tonumber(redis.call('ZSCORE', bk, 'e')) or -1
    e1 = e0
    local q, qb, bmax, blocked = 33, 1, 0, e0 > t
    for i = 1, n do
        local algo, l, p, a3, b
        algo, l, p, a3, q = struct.unpack('<i8i8i8i8', ARGV[1], q)
        q = q + 16
        b, qb = struct.unpack('<i8', blk, qb)
        local cap = l
        if algo >= 4 then
            cap = a3
        end
        if b < 0 and blocked then
            b = -b
            if t + b > e1 then
                e1 = t + b
            end
        elseif b < 0 then
            b = -b
        end
        if b > bmax then
            bmax = b
        end
        if not blocked and not adm[i] and c <= cap and b > 0 and
                t + b > e1 then
            e1 = t + b
        end
    end
    if blocked then
        all = false
        if op == 3 then
            g = 0
        end
    end
    -- A time is below 2^53 (SEMANTICS.md): so is a block's end.
    if e1 > 9007199254740991 then
        e1 = 9007199254740991
    end
    if e1 ~= e0 and (op == 1 or op == 3) then
        redis.call('ZADD', bk, string.format('%.0f', e1), 'e')
        -- Never below the TTL floor, the handle's one value that phase 1
        -- kept with each rule (st[3]: the first rule's).
        local ttl = e1 - t + bmax
        if ttl < st[3] then
            ttl = st[3]
        end
        redis.call('PEXPIRE', bk, string.format('%.0f', ttl))
    end
end

-- Phase 2: charge every rule, or take back the windows' charges; the
-- reply goes into the slots of st as they are read. An acquire at most
-- charges what it grants.
local cs = ARGV[2]
if op == 3 then
    if g < 0 then
        g = 0
    end
    if g >= 1 then
        c, cs = g, string.format('%.0f', g)
    end
end
local charge = all and (op == 1 or op == 3)
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
            if op == 3 then
                redis.call('INCRBY', wk, cs)
            end
            if cur == 0 then
                redis.call('PEXPIRE', wk, window_ttl(te, p, algo, floor))
            end
        elseif op == 1 then
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

-- The reply: the first r - 1 slots of st, then t on the server's clock,
-- then the tag, packed as little-endian int64s in one string: a table
-- reply costs Redis a look-up of every special field ('err', 'ok', ...)
-- on top of each element.
if server then
    st[r] = t
    r = r + 1
end
if op == 3 then
    st[r] = g
    r = r + 1
end
if blk then
    st[r], st[r + 1] = e0, e1
    r = r + 2
end
st[r] = tag
return struct.pack(string.sub(
    '<i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8' ..
    'i8i8i8',
    1, 1 + 2 * r),
    unpack(st, 1, r))
