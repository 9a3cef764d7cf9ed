-- common.lua - helpers shared by the sluice script; concatenated first.
--
-- The build concatenates common, window, log, bucket and main (in that
-- order) into one chunk run by EVALSHA; the script's contract (KEYS, ARGV,
-- return) is stated at the top of main.lua and in docs/DESIGN.md.
-- Every definition here is a local function of that one chunk: Redis
-- forbids creating globals.
--
-- Contract of the helpers:
--   fdiv(a, b)     floor(a / b) exactly, for integers |a| < 2^53, b >= 1
--   cdiv(a, b)     ceil(a / b) exactly, same ranges
--   fmt(x)         the decimal text of the integer x (|x| <= 2^53), no
--                  exponent, never "-0"; used for every number sent to Redis
--   now_ms(arg)    arg as a number, or the server's TIME in ms if arg is -1
--   keep_for(key, ms, floor)
--                  make key live at least max(ms, floor) ms from now:
--                  PEXPIRE only when PTTL is smaller (TTLs only grow)

-- Lua 5.1 numbers are doubles: a / b is rounded, so math.floor(a / b) can
-- be one off where the quotient rounds across an integer. One correction
-- step each way is enough for |a| < 2^53, and the products q * b stay
-- within one step of a, so the comparisons are exact.
local function fdiv(a, b)
    local q = math.floor(a / b)
    if q * b > a then
        q = q - 1
    elseif (q + 1) * b <= a then
        q = q + 1
    end
    return q
end

-- Built on fdiv by negation, not as fdiv(a + b - 1, b): a + b - 1 could
-- pass 2^53 where a does not.
local function cdiv(a, b)
    return -fdiv(-a, b)
end

-- '%d' goes through a C int cast on some Lua 5.1 builds and redis.call
-- formats numbers with '%.17g'; '%.0f' prints every integer up to 2^53
-- exactly. Adding 0 turns -0 into +0, which would otherwise print "-0".
local function fmt(x)
    return string.format('%.0f', x + 0)
end

-- Only a handle set to the server's clock sends -1; everything else uses
-- the caller's injected clock so every backend decides alike.
local function now_ms(arg)
    local v = tonumber(arg)
    if v == -1 then
        local tm = redis.call('TIME')
        return tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
    end
    return v
end

-- TTLs only collect garbage, so they may only grow: a shorter TTL asked by
-- one rule must not cut short the state another rule still needs. PTTL is
-- -1 for a key without TTL, which is smaller than any ms, so every written
-- key leaves with a TTL. No "PEXPIRE ... GT": the same rule is kept by the
-- client-side backends, where twemproxy rejects the option.
local function keep_for(key, ms, floor)
    if ms < floor then
        ms = floor
    end
    local left = redis.call('PTTL', key)
    if left < ms then
        redis.call('PEXPIRE', key, fmt(ms))
    end
end
