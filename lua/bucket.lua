-- bucket.lua - token bucket and GCRA, one arithmetic (docs/DESIGN.md,
-- "Token bucket and GCRA"); part of the one sluice script, after log.lua.
--
-- Key: a hash, x = time of the last charge (ms), d = backlog D at x in
-- request*ms (D = backlog in requests * P; for gcra tat = x + D / L).
-- A rule is a table s with key, t (ms), c (cost), limit, period, burst.
--   bucket_read(s)       phase 1, reads only: effective time u = max(t, x),
--                        s.gap = u - t, the drained backlog s.du at u,
--                        s.never, s.admit (iff Du <= (B - c) * P)
--   bucket_outputs(s, charged)
--                        remaining, retry, reset; both waits from u
--   bucket_charge(s, floor)
--                        store x = u, d = Du + c * P; raise the TTL to
--                        gap + ceil(D' / L) + P
-- Token and gcra keep different keys but decide alike on every schedule.
-- All products stay below the capacity * period bound: Du <= D, which the
-- rule that stored it kept within its own B * P.

local function bucket_read(s)
    local v = redis.call('HMGET', s.key, 'x', 'd')
    local x, d = tonumber(v[1]), tonumber(v[2])
    if x == nil or d == nil then
        x, d = s.t, 0
    end
    local u = math.max(s.t, x)
    s.u, s.gap = u, u - s.t
    -- Fully drained once u - x >= ceil(D / L): the product (u - x) * L is
    -- only formed below that, where it is at most D + L - 1.
    local du = 0
    if u - x < cdiv(d, s.limit) then
        du = d - (u - x) * s.limit
    end
    s.du = du
    s.never = s.c > s.burst
    s.admit = not s.never and du <= (s.burst - s.c) * s.period
end

local function bucket_after(s, charged)
    if charged then
        return s.du + s.c * s.period
    end
    return s.du
end

local function bucket_outputs(s, charged)
    local dd = bucket_after(s, charged)
    local remaining = math.max(0, s.burst - cdiv(dd, s.period))
    local reset = cdiv(dd, s.limit)
    local retry = -1
    if not s.admit and not s.never then
        retry = cdiv(s.du - (s.burst - s.c) * s.period, s.limit)
    end
    return remaining, retry, reset
end

local function bucket_charge(s, floor)
    local dd = bucket_after(s, true)
    redis.call('HSET', s.key, 'x', fmt(s.u), 'd', fmt(dd))
    -- keep_for, not a bare PEXPIRE: a limit raised at run time drains the
    -- backlog faster and would ask for less than the last charge's rule.
    keep_for(s.key, s.gap + cdiv(dd, s.limit) + s.period, floor)
end
