-- What the sections after this one share: the server's clock, the byte
-- of the first rule's numbers in ARGV[1], the words of an error.
-- Reads    t.
-- Sets     server (the request is on the server's clock: t was -1), t
--          (then the server's TIME in ms), window_locate (on the server's
--          clock only), pos (33: the first rule's numbers, after t, op,
--          c and tag), unexpected and foreign (an error's words).
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
