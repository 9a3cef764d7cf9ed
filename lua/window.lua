-- window.lua - fixed and sliding window counters (docs/DESIGN.md, "Window
-- counters"); part of the one sluice script, after common.lua.
--
-- Key: a hash, field = window index k in decimal, value = amount charged in
-- window k. A rule is a table s with key, t (ms), c (cost), limit, period,
-- off (tz offset in ms), algo (1 fixed, 2 sliding).
--   window_read(s)          phase 1, reads only: sets s.khi, s.klo (the
--                           window index k), s.e, s.te,
--                           s.cur, s.prev, s.never, s.admit
--   fixed_outputs(s, charged), sliding_outputs(s, charged)
--                           remaining, retry (-1 unless denying and
--                           fitting), reset; charged says whether the
--                           composite charges this request
--   window_charge(s, floor) HINCRBY window k, drop fields no longer needed,
--                           raise the TTL (te + P fixed, te + 2P sliding)
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

-- hi, lo of a field written by wfield, or nil for anything else.
local function wparse(f)
    if #f > 8 and string.match(f, '^[1-9]%d*$') then
        return tonumber(string.sub(f, 1, -9)), tonumber(string.sub(f, -8))
    end
    local v = tonumber(f)
    if v == nil or v ~= math.floor(v) then
        return nil
    end
    return wstep(0, 0, v)
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

local function window_read(s)
    local shifted = s.t + s.off
    if shifted >= 0 and shifted < 4503599627370496 then
        -- The common case: t + off is exact (below 2^52), and so are e,
        -- k and k - 1 as plain numbers.
        local e = math.fmod(shifted, s.period)
        local k = (shifted - e) / s.period
        s.k, s.e, s.te = k, e, s.period - e
        s.field = fmt(k)
    else
        local hi, lo, e = window_locate(s.t, s.period, s.off)
        s.khi, s.klo, s.e, s.te = hi, lo, e, s.period - e
        s.field = wfield(hi, lo)
    end
    if s.algo == 1 then
        s.cur = tonumber(redis.call('HGET', s.key, s.field)) or 0
        s.prev = 0
    else
        local pfield
        if s.k then
            pfield = fmt(s.k - 1)
        else
            pfield = wfield(wstep(s.khi, s.klo, -1))
        end
        local v = redis.call('HMGET', s.key, s.field, pfield)
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
    local n = redis.call('HINCRBY', s.key, s.field, fmt(s.c))
    -- Only the first charge of a window needs the rest: the window's end,
    -- and so the TTL it needs, is the same for every later charge in it
    -- (TTLs only grow, and keep_for raises them from the first).
    if n ~= s.c then
        return
    end
    -- fixed needs window k only, sliding k and k - 1; keep one more window
    -- for late requests that still fall in it. Later windows stay.
    local back, ttl = -1, s.te + s.period
    if s.algo == 2 then
        back, ttl = -2, s.te + 2 * s.period
    end
    if s.k then
        s.khi, s.klo = wstep(0, 0, s.k)
    end
    local ohi, olo = wstep(s.khi, s.klo, back)
    local fields = redis.call('HKEYS', s.key)
    for _, f in ipairs(fields) do
        local hi, lo = wparse(f)
        if hi ~= nil and (hi < ohi or (hi == ohi and lo < olo)) then
            redis.call('HDEL', s.key, f)
        end
    end
    keep_for(s.key, ttl, floor)
end
