-- main.lua - decides one sluice request on every rule of a key; concatenated
-- last, after common, window, log and bucket (one chunk, one EVALSHA).
--
-- Contract (docs/DESIGN.md, "The Lua script contract"):
--   KEYS[i]   the key of rule i, i = 1..n, all with the hash tag {K}
--   ARGV[1]   now in ms, or -1: read the server's TIME
--   ARGV[2]   1 = acquire (charge when admitted), 0 = peek, 2 = reset
--             (forget every rule's state: the key, and for windows the
--             windows k - 2 .. k + 1 around now)
--   ARGV[3]   cost
--   ARGV[4]   TTL floor in ms
--   ARGV[5 + 5*(i-1) ..]  rule i: algo (1 fixed, 2 sliding, 3 log,
--             4 token, 5 gcra), limit, period_ms, burst (= limit for
--             windows), off_ms
--   return    reset: {tag}; otherwise a flat array, 6 integers per rule:
--             admitted (1/0), never_fits (1/0), remaining,
--             retry_ms (-1 unless denying and fitting; from u),
--             reset_ms (from u), gap (u - t; 0 for windows)
-- The request is admitted iff every rule admits; the outputs of each rule
-- assume that outcome (a peek answers what an acquire would). Keys are
-- written only by an admitted acquire, and each written key gets a TTL.
-- Malformed ARGV (the C side validates first) gives an error reply and
-- writes nothing.

-- Dispatch by algorithm (1 fixed, 2 sliding, 3 log, 4 token, 5 gcra),
-- without building tables on every call.
local function rule_read(r)
    local a = r.algo
    if a <= 2 then
        window_read(r)
    elseif a == 3 then
        log_read(r)
    else
        bucket_read(r)
    end
end

local function rule_outputs(r, all)
    local a = r.algo
    if a == 1 then
        return fixed_outputs(r, all)
    elseif a == 2 then
        return sliding_outputs(r, all)
    elseif a == 3 then
        return log_outputs(r, all)
    end
    return bucket_outputs(r, all)
end

local function rule_charge(r, floor)
    local a = r.algo
    if a <= 2 then
        window_charge(r, floor)
    elseif a == 3 then
        log_charge(r, floor)
    else
        bucket_charge(r, floor)
    end
end

-- The C side has checked every value against the accepted ranges before
-- sending it; the script only converts, and refuses a malformed call.
local function parse()
    local n = #KEYS
    if n < 1 or #ARGV ~= 5 + 5 * n then
        return nil, 'sluice script: ' .. n .. ' keys need ' ..
            (5 + 5 * n) .. ' ARGV, got ' .. #ARGV
    end
    local c = tonumber(ARGV[3])
    local rules = {}
    for i = 1, n do
        local b = 5 + 5 * (i - 1)
        -- Every field any algorithm sets is named here, so that the table
        -- is sized once instead of growing (and rehashing) as it fills.
        local r = {
            key = KEYS[i], c = c, algo = tonumber(ARGV[b]),
            limit = tonumber(ARGV[b + 1]), period = tonumber(ARGV[b + 2]),
            burst = tonumber(ARGV[b + 3]), off = tonumber(ARGV[b + 4]),
            t = 0, gap = 0, cur = 0, prev = 0, e = 0, te = 0, k = false,
            khi = 0, klo = 0, wkey = false, admit = false, never = false,
            u = 0, du = 0, sum = 0, newest = 0, xs = false, cs = false,
        }
        if c == nil or r.algo == nil or r.algo < 1 or r.algo > 5 or
            r.limit == nil or r.period == nil or r.burst == nil or
            r.off == nil then
            return nil, 'sluice script: ARGV of rule ' .. i ..
                ' are not numbers'
        end
        rules[i] = r
    end
    return {
        t = ARGV[1], acquire = ARGV[2] == '1', op = ARGV[2],
        floor = tonumber(ARGV[4]) or 0, rules = rules,
    }
end

local req, perr = parse()
if req == nil then
    return redis.error_reply(perr)
end

local t = now_ms(req.t)
local rules = req.rules

if req.op == '2' then
    for i = 1, #rules do
        local r = rules[i]
        r.t = t
        redis.call('DEL', r.key)
        if r.algo <= 2 then
            window_reset(r)
        end
    end
    return {ARGV[#ARGV]}
end

-- Phase 1: does each rule admit? Reads only.
local all = true
for i = 1, #rules do
    local r = rules[i]
    r.t = t
    r.gap = 0
    rule_read(r)
    if not r.admit then
        all = false
    end
end

-- Phase 2: every rule's outputs under the composite's outcome.
local result = {}
for i = 1, #rules do
    local r = rules[i]
    local remaining, retry, reset = rule_outputs(r, all)
    local admitted, never, o = 0, 0, 6 * (i - 1)
    if r.admit then
        admitted = 1
    end
    if r.never then
        never = 1
    end
    result[o + 1] = admitted
    result[o + 2] = never
    result[o + 3] = remaining
    result[o + 4] = retry
    result[o + 5] = reset
    result[o + 6] = r.gap
end

-- Phase 3: charge every rule, or none.
if req.acquire and all then
    for i = 1, #rules do
        local r = rules[i]
        rule_charge(r, req.floor)
    end
end

-- The request's tag, echoed so that the client can tell a reply out of step
-- from the one it waits for.
result[6 * #rules + 1] = ARGV[#ARGV]
return result
