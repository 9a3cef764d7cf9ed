-- A block (SEMANTICS.md, "Penalties"), when ARGV[3] holds each rule's
-- block in ms (0: none; negative: with extend=1) and the last key is the
-- key's block, a sorted set whose member 'e' is scored by the block's end.
-- Blocked (t before the end): denied, what phase 1 charged taken back,
-- and a rule with extend starts it again; else a rule with a block that
-- denies, and whose cost could fit, starts it. A peek only reports.
-- Reads    blk, adm, op, c, n, t, ARGV[1], the last key, st[3] (the
--          first rule's TTL floor).
-- Sets     e0, e1 (the block's end before and after; with a block only);
--          when blocked, all = false and (OP_AT_MOST) g = 0.
local e0, e1
if blk then
    local bk = KEYS[#KEYS]
    e0 = tonumber(redis.call('ZSCORE', bk, 'e')) or -1
    e1 = e0
    local q, qb, bmax, blocked = 33, 1, 0, e0 > t
    for i = 1, n do
        local algo, l, p, a3, b
        algo, l, p, a3, q = struct.unpack('<i8i8i8i8', ARGV[1], q)
        q = q + 16
        b, qb = struct.unpack('<i8', blk, qb)
        local cap = l
        if algo >= 4 then
            cap = a3
        end
        if b < 0 and blocked then
            b = -b
            if t + b > e1 then
                e1 = t + b
            end
        elseif b < 0 then
            b = -b
        end
        if b > bmax then
            bmax = b
        end
        if not blocked and not adm[i] and c <= cap and b > 0 and
                t + b > e1 then
            e1 = t + b
        end
    end
    if blocked then
        all = false
        if op == OP_AT_MOST then
            g = 0
        end
    end
    -- A time is below 2^53 (SEMANTICS.md): so is a block's end.
    if e1 > 9007199254740991 then
        e1 = 9007199254740991
    end
    if e1 ~= e0 and (op == OP_ACQUIRE or op == OP_AT_MOST) then
        redis.call('ZADD', bk, string.format('%.0f', e1), 'e')
        -- Never below the TTL floor, the handle's one value that phase 1
        -- kept with each rule (st[3]: the first rule's).
        local ttl = e1 - t + bmax
        if ttl < st[3] then
            ttl = st[3]
        end
        redis.call('PEXPIRE', bk, string.format('%.0f', ttl))
    end
end
