-- window.lua - fixed and sliding window counters (docs/DESIGN.md, "Window
-- counters"); part of the one sluice script, after common.lua.
--
-- Keys: one string key per window, KEYS[i] .. ':' .. k (k = the window
-- index in decimal), holding the amount charged in window k: the layout of
-- the plain backends, so that every backend counts in the same keys. The
-- window keys share the hash tag of KEYS[i], so they live in its slot.
-- A rule is a table s with key, t (ms), c (cost), limit, period,
-- off (tz offset in ms), algo (1 fixed, 2 sliding).
--   window_read(s)          phase 1, reads only: sets s.k (or s.khi,
--                           s.klo), s.e, s.te, s.wkey (t's window),
--                           s.cur, s.prev, s.never, s.admit
--   fixed_outputs(s, charged), sliding_outputs(s, charged)
--                           remaining, retry (-1 unless denying and
--                           fitting), reset; charged says whether the
--                           composite charges this request
--   window_charge(s, floor) INCRBY the window's key; its first charge sets
--                           the TTL (te + P fixed, te + 2P sliding)
--   window_reset(s)         DEL of windows k - 2 .. k + 1, as the plain
--                           backends do
-- Late requests count in the window their own t falls in; gap is always 0.

-- A window index k is kept as two base-1e8 digits (hi, lo), k = hi * 1e8 +
-- lo, 0 <= lo < 1e8: k passes 2^53 when P = 1 ms and off > 0 near the top
-- of the t range, where a double could not tell k from k - 1.
local wbase = 100000000

local function wstep(hi, lo, d)
    lo = lo + d
    local carry = fdiv(lo, wbase)
    return hi + carry, lo - carry * wbase
end

-- The decimal text of k, exactly as the C side prints it.
local function wfield(hi, lo)
    if hi <= 0 then
        return fmt(hi * wbase + lo)
    end
    return fmt(hi) .. string.format('%08.0f', lo)
end

-- t + off can pass 2^53, so k and e are derived from fmod(t, P), which is
-- exact, and never from t + off itself: k = (t - fmod(t, P)) / P +
-- floor((fmod(t, P) + off) / P).
local function window_locate(t, p, off)
    local tm = math.fmod(t, p)
    local e = math.fmod(tm + math.fmod(off, p) + p, p)
    local q = (t - tm) / p
    local qhi = fdiv(q, wbase)
    local hi, lo = wstep(qhi, q - qhi * wbase, fdiv(tm + off, p))
    return hi, lo, e
end

-- Sets s.k (or s.khi, s.klo), s.e and s.te for t's window.
local function window_locate_rule(s)
    local shifted = s.t + s.off
    if shifted >= 0 and shifted < 4503599627370496 then
        -- The common case: t + off is exact (below 2^52), and so are e,
        -- k and k - 1 as plain numbers.
        local e = math.fmod(shifted, s.period)
        s.k, s.e, s.te = (shifted - e) / s.period, e, s.period - e
    else
        local hi, lo, e = window_locate(s.t, s.period, s.off)
        s.k, s.khi, s.klo, s.e, s.te = false, hi, lo, e, s.period - e
    end
end

-- The key of window k + d.
local function window_key(s, d)
    if s.k then
        return s.key .. ':' .. fmt(s.k + d)
    end
    return s.key .. ':' .. wfield(wstep(s.khi, s.klo, d))
end

local function window_read(s)
    window_locate_rule(s)
    s.wkey = window_key(s, 0)
    if s.algo == 1 then
        s.cur = tonumber(redis.call('GET', s.wkey)) or 0
        s.prev = 0
    else
        local v = redis.call('MGET', s.wkey, window_key(s, -1))
        s.cur = tonumber(v[1]) or 0
        s.prev = tonumber(v[2]) or 0
    end
    -- A never-fit cost is decided before any product: c * P may not be
    -- exact.
    s.never = s.c > s.limit
    if s.never or s.cur + s.c > s.limit then
        s.admit = false
    elseif s.algo == 1 then
        s.admit = true
    else
        -- prev * (P - e) + (cur + c) * P <= L * P, with cur + c <= L
        -- checked first so that (L - cur - c) * P stays in range.
        s.admit = s.prev * (s.period - s.e)
            <= (s.limit - s.cur - s.c) * s.period
    end
end

local function fixed_outputs(s, charged)
    local cur = s.cur
    if charged then
        cur = cur + s.c
    end
    local remaining = math.max(0, s.limit - cur)
    local reset = 0
    if cur > 0 then
        reset = s.te
    end
    local retry = -1
    if not s.admit and not s.never then
        retry = s.te
    end
    return remaining, retry, reset
end

local function sliding_outputs(s, charged)
    local p, l, c, cur, prev = s.period, s.limit, s.c, s.cur, s.prev
    local curd = cur
    if charged then
        curd = cur + c
    end
    local remaining = math.max(0,
        fdiv(l * p - prev * (p - s.e), p) - curd)
    local reset = 0
    if curd > 0 then
        reset = s.te + p
    elseif prev > 0 then
        reset = s.te
    end
    local retry = -1
    if not s.admit and not s.never then
        if cur + c <= l then
            -- Denied by the previous window's weight (so prev > 0): wait
            -- inside this window until prev * (P - e') fits.
            retry = s.te - fdiv((l - cur - c) * p, prev)
        else
            -- This window is full (cur > 0): wait into the next one, where
            -- cur becomes the weighted previous count.
            retry = s.te + math.max(0, p - fdiv((l - c) * p, cur))
        end
    end
    return remaining, retry, reset
end

local function window_charge(s, floor)
    local n = redis.call('INCRBY', s.wkey, fmt(s.c))
    -- Only the first charge of a window sets its TTL: the window's end,
    -- and so the TTL it needs, is the same for every later charge in it.
    -- fixed needs window k until its end, sliding also while it weighs as
    -- the previous window; one more period of grace for late requests.
    -- A plain PEXPIRE: the key is new, or was left at 0 by a plain
    -- backend's taken-back charge with a TTL of the same formula.
    if n == s.c then
        local ttl = s.te + s.period
        if s.algo == 2 then
            ttl = ttl + s.period
        end
        redis.call('PEXPIRE', s.wkey, fmt(math.max(ttl, floor)))
    end
end

local function window_reset(s)
    window_locate_rule(s)
    redis.call('DEL', window_key(s, -2), window_key(s, -1), window_key(s, 0),
        window_key(s, 1))
end
