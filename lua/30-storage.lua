-- The functions the decisions' rules call, each made only for a request
-- whose rules call it.
-- Reads    n, algo1, op.
-- Sets     window_ttl, reset_ttl, fdiv (nil where no rule calls it).
--
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
if n > 1 or algo1 >= 4 or op == OP_AT_MOST or op == OP_FORCE then
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
