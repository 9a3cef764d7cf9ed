-- sluice.lua - the one script of the Lua backend: reads every rule's state,
-- decides admission, charges all rules or none, and returns the state it
-- read. The client (src/backends/evalsha.c) computes every output from
-- that state with the arithmetic every backend shares (src/algo.c), and
-- checks that it reaches the same admissions as the script.
--
-- Written for Redis's CPU, which is what a decision costs under load
-- (measured with callgrind, instructions per call): the chunk defines no
-- function (Redis keeps no state between calls, so a function defined here
-- would be created again on every call), converts only the arguments it
-- uses (tonumber goes through strtod), passes argument strings on to
-- Redis as they came, returns few values, and gets the window keys and
-- their TTLs ready-made from the client. docs/DESIGN.md, "The Lua script
-- contract", has the layout of every key; every backend shares it.
--
-- ARGV[1]   t, the request's time in ms, or -1: the server's TIME
-- ARGV[2]   1 acquire (charge when every rule admits), 0 peek, 2 reset
--           (server's clock only: on the client's, the client deletes)
-- ARGV[3]   cost
-- ARGV[4]   the request's tag, echoed last
-- ARGV[5 + 6(i-1) ..] rule i: algo (1 fixed, 2 sliding, 3 log, 4 token,
--           5 gcra), then
--             fixed, sliding  limit, period, tz offset, te, ttl
--             log             limit, period, TTL floor, -, -
--             token, gcra     limit, period, capacity, TTL floor, -
--           te (ms to the window's end) and ttl (the window's TTL): on the
--           server's clock te is '' and ttl the TTL floor, and the script
--           works them out.
-- KEYS      in rule order: fixed one key, sliding two (t's window and the
--           one before), log and buckets one. On the server's clock a
--           window rule has one key, the rule's, and the script appends
--           ':' .. k for window k (the same hash tag, so the same slot).
-- return    in rule order: fixed: s (admitted: cur, else -1 - cur, with
--           cur the count before the request); sliding: s, prev; log: s
--           over m (the newest stamp, -1 none: admitted m + 1, else
--           -2 - m),
--           sum (the live cost at u = max(t, m)), xfit, cum (a fitting
--           denial: the stamp whose leaving lets it fit and the live cost
--           up to it; else -1, 0); token, gcra: admitted (1/0) and the
--           state string (nil: none). Then, on the server's clock, t.
--           Last the tag.
-- Numbers are below 2^53 (SEMANTICS.md, "Accepted ranges"), so doubles
-- hold them exactly; products are formed only where they stay below 2^53.

local op = ARGV[2]
local c = tonumber(ARGV[3])
local n = (#ARGV - 4) / 6
-- t stays -1 until a rule needs it: windows on the client's clock get
-- everything ready-made, and tonumber costs a strtod.
local t = -1
local server = ARGV[1] == '-1'
if server then
    local tm = redis.call('TIME')
    t = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
end

if op == '2' then
    -- A reset on the server's clock: the rule's key, and windows k - 2 ..
    -- k + 1 around now (TIME plus an offset is far below 2^52, where fmod
    -- and the quotient are exact).
    for i = 1, n do
        local b = 5 + 6 * (i - 1)
        redis.call('DEL', KEYS[i])
        if ARGV[b] == '1' or ARGV[b] == '2' then
            local p = tonumber(ARGV[b + 2])
            local sh = t + tonumber(ARGV[b + 3])
            local k = (sh - math.fmod(sh, p)) / p
            for d = -2, 1 do
                redis.call('DEL', KEYS[i] .. ':' .. string.format('%.0f',
                    k + d))
            end
        end
    end
    return {t, ARGV[4]}
end


-- Phase 1: each rule's state and admission, in out[]. Windows are charged
-- at once on an acquire (INCRBY answers the count in the same call) and
-- taken back in phase 2 if the request is denied.
local out = {}
local all = true
local kx = 1
for i = 1, n do
    local b = 5 + 6 * (i - 1)
    local algo = ARGV[b]
    local admit
    if algo == '1' or algo == '2' then
        local wk, pk, te = KEYS[kx], KEYS[kx + 1], nil
        local p = tonumber(ARGV[b + 2])
        if server then
            local sh = t + tonumber(ARGV[b + 3])
            local e = math.fmod(sh, p)
            local k = (sh - e) / p
            te = p - e
            wk = KEYS[kx] .. ':' .. string.format('%.0f', k)
            pk = KEYS[kx] .. ':' .. string.format('%.0f', k - 1)
            kx = kx + 1
        elseif algo == '2' then
            te = tonumber(ARGV[b + 4])
            kx = kx + 2
        else
            kx = kx + 1
        end
        local l = tonumber(ARGV[b + 1])
        local now
        if op == '1' then
            now = redis.call('INCRBY', wk, ARGV[3])
        else
            now = (tonumber(redis.call('GET', wk)) or 0) + c
        end
        local cur = now - c
        if algo == '1' then
            admit = now <= l
            out[#out + 1] = cur
        else
            -- prev * (P - e) + (cur + c) * P <= L * P; each product stays
            -- below 2^53, or passes it only where the sum is surely above
            -- L * P, where the double's rounding cannot change the answer.
            local prev = tonumber(redis.call('GET', pk)) or 0
            admit = prev * te + now * p <= l * p
            out[#out + 1] = cur
            out[#out + 1] = prev
        end
        -- Kept for phase 2: the key, and whether the window was empty.
        out[#out + 1] = wk
        out[#out + 1] = te or 0
    elseif algo == '3' then
        local key = KEYS[kx]
        kx = kx + 1
        if t == -1 then
            t = tonumber(ARGV[1])
        end
        local l, p = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
        local top = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
        local m, u = -1, t
        if top[2] then
            m = tonumber(top[2])
            if m > u then
                u = m
            end
        end
        local live = redis.call('ZRANGEBYSCORE', key,
            '(' .. string.format('%.0f', u - p), '+inf', 'WITHSCORES')
        local sum = 0
        for j = 1, #live, 2 do
            sum = sum + tonumber(string.match(live[j], '^[^:]*:(%d+)'))
        end
        admit = sum + c <= l
        local xfit, cum = -1, 0
        if not admit and c <= l then
            -- Oldest first, until what is left plus c fits; c <= L, so
            -- the walk ends at the latest when nothing is left.
            for j = 1, #live, 2 do
                cum = cum + tonumber(string.match(live[j], '^[^:]*:(%d+)'))
                if sum - cum + c <= l then
                    xfit = tonumber(live[j + 1])
                    break
                end
            end
        end
        out[#out + 1] = m
        out[#out + 1] = sum
        out[#out + 1] = xfit
        out[#out + 1] = cum
        out[#out + 1] = u
        out[#out + 1] = key
    else
        -- token, gcra: x (the last charge), D (the backlog in request*ms
        -- at x) and keep (the time until which the state must live, so
        -- that its TTL only grows): three little-endian int64.
        local key = KEYS[kx]
        kx = kx + 1
        if t == -1 then
            t = tonumber(ARGV[1])
        end
        local v = redis.call('GET', key)
        local x, d, keep = t, 0, 0
        if v then
            if #v ~= 24 then
                return redis.error_reply('sluice script: unexpected data ' ..
                    'under ' .. key .. '; is another program using the ' ..
                    'key prefix?')
            end
            x, d, keep = struct.unpack('<i8i8i8', v)
        end
        local l, p = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
        local cap = tonumber(ARGV[b + 3])
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
        admit = c <= cap and du <= (cap - c) * p
        out[#out + 1] = v or false
        out[#out + 1] = u
        out[#out + 1] = du
        out[#out + 1] = keep
        out[#out + 1] = key
    end
    if not admit then
        all = false
    end
    out[#out + 1] = admit
end

-- Phase 2: charge every rule, or take back the windows' charges; then the
-- reply replaces what phase 1 kept.
local res = {}
local o = 1
for i = 1, n do
    local b = 5 + 6 * (i - 1)
    local algo = ARGV[b]
    if algo == '1' or algo == '2' then
        local cur, prev, wk, te, admit
        if algo == '1' then
            cur, wk, te, admit = out[o], out[o + 1], out[o + 2], out[o + 3]
            o = o + 4
        else
            cur, prev, wk, te, admit = out[o], out[o + 1], out[o + 2],
                out[o + 3], out[o + 4]
            o = o + 5
        end
        if op == '1' and all then
            -- The window's first charge sets its TTL: its end, and so the
            -- TTL it needs, is the same for every later charge in it.
            if cur == 0 then
                local ttl = ARGV[b + 5]
                if server then
                    -- ARGV[b + 5] holds the TTL floor here.
                    local p = tonumber(ARGV[b + 2])
                    local floor = tonumber(ttl)
                    ttl = te + p
                    if algo == '2' then
                        ttl = ttl + p
                    end
                    if ttl < floor then
                        ttl = floor
                    end
                    ttl = string.format('%.0f', ttl)
                end
                redis.call('PEXPIRE', wk, ttl)
            end
        elseif op == '1' then
            -- Denied: take the charge back; a window this request created
            -- goes, so that no key is left without a TTL.
            if cur == 0 then
                redis.call('DEL', wk)
            else
                redis.call('DECRBY', wk, ARGV[3])
            end
        end
        if admit then
            res[#res + 1] = cur
        else
            res[#res + 1] = -1 - cur
        end
        if algo == '2' then
            res[#res + 1] = prev
        end
    elseif algo == '3' then
        local m, sum, xfit, cum, u, key, admit = out[o], out[o + 1],
            out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6]
        o = o + 7
        if op == '1' and all then
            local p = tonumber(ARGV[b + 2])
            local stamp = string.format('%.0f', u)
            local same = redis.call('ZCOUNT', key, stamp, stamp)
            redis.call('ZADD', key, stamp, stamp .. ':' .. ARGV[3] .. ':' ..
                same)
            redis.call('ZREMRANGEBYSCORE', key, '-inf',
                string.format('%.0f', u - p))
            -- The newest entry is this one, at u: the expiry it asks for
            -- never comes before the last one's.
            local ttl = u - t + 2 * p
            local floor = tonumber(ARGV[b + 3])
            if ttl < floor then
                ttl = floor
            end
            redis.call('PEXPIRE', key, string.format('%.0f', ttl))
        end
        if admit then
            res[#res + 1] = m + 1
        else
            res[#res + 1] = -2 - m
        end
        res[#res + 1] = sum
        res[#res + 1] = xfit
        res[#res + 1] = cum
    else
        local v, u, du, keep, key, admit = out[o], out[o + 1], out[o + 2],
            out[o + 3], out[o + 4], out[o + 5]
        o = o + 6
        if op == '1' and all then
            local l, p = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
            local dd = du + c * p
            -- ceil(dd / L), exact: one correction step each way.
            local q = math.floor(dd / l)
            if q * l > dd then
                q = q - 1
            elseif (q + 1) * l <= dd then
                q = q + 1
            end
            if q * l < dd then
                q = q + 1
            end
            -- Until the backlog has drained, plus a period of grace; never
            -- earlier than a previous charge asked (a raised limit drains
            -- faster than the rule that charged before).
            if u + q + p > keep then
                keep = u + q + p
            end
            local ttl = keep - t
            local floor = tonumber(ARGV[b + 4])
            if ttl < floor then
                ttl = floor
            end
            redis.call('SET', key, struct.pack('<i8i8i8', u, dd, keep), 'PX',
                ttl)
        end
        if admit then
            res[#res + 1] = 1
        else
            res[#res + 1] = 0
        end
        res[#res + 1] = v
    end
end

if server then
    res[#res + 1] = t
end
res[#res + 1] = ARGV[4]
return res
