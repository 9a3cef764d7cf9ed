-- log.lua - sliding log on a sorted set (docs/DESIGN.md, "Sliding log");
-- part of the one sluice script, after window.lua.
--
-- Key: a sorted set, score = stamp x, member = "x:c:n" (c = cost, n =
-- entries already at score x, so members stay unique). A rule is a table s
-- with key, t (ms), c (cost), limit, period.
--   log_read(s)          phase 1, reads only: effective time u = max(t,
--                        newest stamp), s.gap = u - t, the live entries
--                        (x > u - P, oldest first), s.sum, s.never, s.admit
--   log_outputs(s, charged)
--                        remaining, retry, reset; both waits from u
--   log_charge(s, floor) add (u, c), remove stamps <= u - P, raise the TTL
--                        to gap + 2P
-- An entry charged at x stops counting at x + P. Times near 2^53 are only
-- compared or subtracted, never added to P: x + P - u is P - (u - x).

local function log_read(s)
    local p = s.period
    local u = s.t
    s.newest = nil
    local top = redis.call('ZREVRANGE', s.key, 0, 0, 'WITHSCORES')
    if top[2] then
        local m = tonumber(top[2])
        s.newest = m
        if m > u then
            u = m
        end
    end
    s.u, s.gap = u, u - s.t
    local live = redis.call('ZRANGEBYSCORE', s.key, '(' .. fmt(u - p),
        '+inf', 'WITHSCORES')
    local xs, cs, sum = {}, {}, 0
    for i = 1, #live, 2 do
        local cost = tonumber(string.match(live[i], '^[^:]*:([^:]*)')) or 0
        xs[#xs + 1] = tonumber(live[i + 1])
        cs[#cs + 1] = cost
        sum = sum + cost
    end
    s.xs, s.cs, s.sum = xs, cs, sum
    s.never = s.c > s.limit
    s.admit = not s.never and sum + s.c <= s.limit
end

local function log_outputs(s, charged)
    local p, u = s.period, s.u
    local sum = s.sum
    local xm = nil
    if charged then
        sum = sum + s.c
        xm = u
    elseif s.newest ~= nil and s.newest > u - p then
        xm = s.newest
    end
    local remaining = math.max(0, s.limit - sum)
    local reset = 0
    if xm ~= nil then
        reset = p - (u - xm)
    end
    local retry = -1
    if not s.admit and not s.never then
        -- Oldest first, until what is left plus c fits; c <= L, so the
        -- walk ends at the latest when nothing is left.
        local left = s.sum
        for i = 1, #s.xs do
            left = left - s.cs[i]
            if left + s.c <= s.limit then
                retry = p - (u - s.xs[i])
                break
            end
        end
    end
    return remaining, retry, reset
end

local function log_charge(s, floor)
    local u, stamp = s.u, fmt(s.u)
    local n = redis.call('ZCOUNT', s.key, stamp, stamp)
    redis.call('ZADD', s.key, stamp,
        stamp .. ':' .. fmt(s.c) .. ':' .. fmt(n))
    redis.call('ZREMRANGEBYSCORE', s.key, '-inf', fmt(u - s.period))
    -- The newest entry is this one, at u: the expiry it asks for never
    -- comes before the last one's, so no PTTL is needed.
    redis.call('PEXPIRE', s.key, fmt(math.max(s.gap + 2 * s.period, floor)))
end
