-- main.lua - decides one sluice request on every rule of a key; concatenated
-- last, after common, window, log and bucket (one chunk, one EVALSHA).
--
-- Contract (docs/DESIGN.md, "The Lua script contract"):
--   KEYS[i]   the key of rule i, i = 1..n, all with the hash tag {K}
--   ARGV[1]   now in ms, or -1: read the server's TIME
--   ARGV[2]   1 = acquire (charge when admitted), 0 = peek
--   ARGV[3]   cost
--   ARGV[4]   TTL floor in ms
--   ARGV[5 + 5*(i-1) ..]  rule i: algo (1 fixed, 2 sliding, 3 log,
--             4 token, 5 gcra), limit, period_ms, burst (= limit for
--             windows), off_ms
--   return    a flat array, 6 integers per rule:
--             admitted (1/0), never_fits (1/0), remaining,
--             retry_ms (-1 unless denying and fitting; from u),
--             reset_ms (from u), gap (u - t; 0 for windows)
-- The request is admitted iff every rule admits; the outputs of each rule
-- assume that outcome (a peek answers what an acquire would). Keys are
-- written only by an admitted acquire, and each written key gets a TTL.
-- Malformed ARGV (the C side validates first) gives an error reply and
-- writes nothing.

local algos = {
    { read = window_read, outputs = fixed_outputs, charge = window_charge },
    { read = window_read, outputs = sliding_outputs, charge = window_charge },
    { read = log_read, outputs = log_outputs, charge = log_charge },
    { read = bucket_read, outputs = bucket_outputs, charge = bucket_charge },
    { read = bucket_read, outputs = bucket_outputs, charge = bucket_charge },
}

-- 2^53: the products of the arithmetic stay below it (capacity * period).
local exact = 9007199254740992

local function argv_int(i, lo, hi)
    local v = tonumber(ARGV[i])
    if v == nil or v ~= math.floor(v) or v < lo or v > hi then
        return nil, 'sluice script: ARGV[' .. i .. '] = \'' ..
            tostring(ARGV[i]) .. '\' is not an integer in [' ..
            fmt(lo) .. ', ' .. fmt(hi) .. ']'
    end
    return v
end

local function parse()
    local n = #KEYS
    if n < 1 or #ARGV ~= 4 + 5 * n then
        return nil, 'sluice script: ' .. n .. ' keys need ' ..
            (4 + 5 * n) .. ' ARGV, got ' .. #ARGV
    end
    local t, err = argv_int(1, -1, exact - 1)
    if err then
        return nil, err
    end
    local mode
    mode, err = argv_int(2, 0, 1)
    if err then
        return nil, err
    end
    local c
    c, err = argv_int(3, 1, 1e9)
    if err then
        return nil, err
    end
    local floor
    floor, err = argv_int(4, 0, exact - 1)
    if err then
        return nil, err
    end
    local rules = {}
    for i = 1, n do
        local b = 5 + 5 * (i - 1)
        local r = { key = KEYS[i], c = c }
        local bounds = {
            { 'algo', 1, 5 }, { 'limit', 1, 1e9 }, { 'period', 1, 1e10 },
            { 'burst', 1, 1e9 }, { 'off', -50400000, 50400000 },
        }
        for j = 1, 5 do
            r[bounds[j][1]], err = argv_int(b + j - 1, bounds[j][2],
                bounds[j][3])
            if err then
                return nil, err
            end
        end
        local cap = r.limit
        if r.algo >= 4 then
            cap = r.burst
        end
        if cap * r.period >= exact then
            return nil, 'sluice script: rule ' .. i .. ': capacity ' ..
                fmt(cap) .. ' * period ' .. fmt(r.period) ..
                ' is not below 2^53'
        end
        rules[i] = r
    end
    return { t = t, acquire = mode == 1, floor = floor, rules = rules }
end

local req, perr = parse()
if req == nil then
    return redis.error_reply(perr)
end

local t = now_ms(req.t)
local rules = req.rules

-- Phase 1: does each rule admit? Reads only.
local all = true
for i = 1, #rules do
    local r = rules[i]
    r.t = t
    r.gap = 0
    algos[r.algo].read(r)
    if not r.admit then
        all = false
    end
end

-- Phase 2: every rule's outputs under the composite's outcome.
local result = {}
for i = 1, #rules do
    local r = rules[i]
    local remaining, retry, reset = algos[r.algo].outputs(r, all)
    local admitted, never = 0, 0
    if r.admit then
        admitted = 1
    end
    if r.never then
        never = 1
    end
    result[#result + 1] = admitted
    result[#result + 1] = never
    result[#result + 1] = remaining
    result[#result + 1] = retry
    result[#result + 1] = reset
    result[#result + 1] = r.gap
end

-- Phase 3: charge every rule, or none.
if req.acquire and all then
    for i = 1, #rules do
        local r = rules[i]
        algos[r.algo].charge(r, req.floor)
    end
end

return result
