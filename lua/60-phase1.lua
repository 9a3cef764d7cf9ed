-- Phase 1: each rule's state and admission; only windows write (see
-- below). The op is a decision here: OP_PEEK (as a refund or a forced
-- charge made above ends), OP_ACQUIRE or OP_AT_MOST.
-- Reads    op, c, n, t, server, pos, window_locate, fdiv, ARGV[1],
--          ARGV[2], ARGV[3], KEYS; unexpected and foreign.
-- Sets     g, c (below), st (for each rule its numbers and state, then
--          its admission), all (every rule admits), blk (ARGV[3]), adm
--          (each rule's admission, with a block), kx, o. Returns only an
--          error.

-- An acquire at most reads as a peek of cost 1; g is what it grants: the
-- least room over the rules, where room is the largest cost a rule admits.
local g = c
if op == OP_AT_MOST then
    c = 1
end

-- What phase 2 needs goes into st, in rule order (sized for one rule at
-- once: growing a table costs).
local st = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
local all = true
local blk, adm = ARGV[3], nil
if blk then
    adm = {}
end
local kx, o = 1, 1
for i = 1, n do
    local algo, l, p, a3, a4, a5
    algo, l, p, a3, a4, a5, pos = struct.unpack('<i8i8i8i8i8i8', ARGV[1],
        pos)
    local admit
    if algo <= 2 then
        local wk, pk, te = KEYS[kx], KEYS[kx + 1], a4
        if server then
            local k
            k, te = window_locate(t, a3, p)
            wk = KEYS[kx] .. ':' .. string.format('%.0f', k)
            pk = KEYS[kx] .. ':' .. string.format('%.0f', k - 1)
            kx = kx + 1
        elseif algo == 2 then
            kx = kx + 2
        else
            kx = kx + 1
        end
        -- An acquire charges at once (INCRBY answers the count in the
        -- same call) and phase 2 takes the charge back on a denial:
        -- counted with callgrind, that is cheaper than reading first.
        local now, prev = 0, 0
        if op == OP_ACQUIRE then
            now = redis.call('INCRBY', wk, ARGV[2])
        else
            now = (tonumber(redis.call('GET', wk)) or 0) + c
        end
        if algo == 1 then
            admit = now <= l
        else
            -- prev * (P - e) + (cur + c) * P <= L * P; each product stays
            -- below 2^53, or passes it only where the sum is surely above
            -- L * P, where the double's rounding cannot change the answer.
            prev = tonumber(redis.call('GET', pk)) or 0
            admit = prev * te + now * p <= l * p
        end
        local cur = now - c
        if op == OP_AT_MOST then
            -- fixed: L - cur; sliding: floor((L*P - prev*(P - e)) / P) -
            -- cur, each product below 2^53 (one correction step).
            local room = l - cur
            if algo == 2 then
                room = fdiv(l * p - prev * te, p) - cur
            end
            if room < g then
                g = room
            end
        end
        st[o], st[o + 1], st[o + 2], st[o + 3] = algo, p, a5, cur
        st[o + 4], st[o + 5], st[o + 6] = prev, wk, te
        o = o + 7
    elseif algo == 3 then
        -- A log: a sorted set scored by stamp, members 'x:c:rest' (every
        -- backend reads x and c so). The script's own members are links
        -- of a chain: 'x:c:~' and 32 bytes, q, S, x and c as big-endian
        -- int64, where q counts the script's entries on the key and S
        -- their costs (mod 2^50), both up to and with this one (binary:
        -- one struct.unpack reads them, where Lua's patterns and strtod
        -- cost a third of the decision; links of one stamp and cost sort
        -- by q). When the newest and the oldest member are links and the
        -- set holds exactly the q's between them, the live cost is an S
        -- difference: a few commands that read one member each, however
        -- many entries live. Anything else (members written by the plain
        -- backends; links of one stamp with different costs, which sort
        -- by cost) is read whole, as before.
        local key = KEYS[kx]
        kx = kx + 1
        local top = redis.call('ZRANGE', key, '-1', '-1')
        local m, u, sum, xfit, cum, sq, ss, dead = -1, t, 0, -1, 0, 0, 0, 0
        local lo, nl, fast, r0
        local v = top[1]
        if v then
            local q, s
            if string.byte(v, -33) == 126 then
                q, s, m = struct.unpack('>i8>i8>i8', v, #v - 31)
            else
                m = tonumber(string.match(v, '^(%d+):%d+:'))
                if m == nil then
                    return redis.error_reply(unexpected .. key .. foreign)
                end
            end
            if m > u then
                u = m
            end
            lo = '(' .. string.format('%.0f', u - p)
            dead = 1 -- unknown: an admission prunes
            local qf, sf, xf, cf
            if q then
                v = redis.call('ZRANGE', key, '0', '0')[1]
                if string.byte(v, -33) == 126 then
                    qf, sf, xf, cf = struct.unpack('>i8>i8>i8>i8', v,
                        #v - 31)
                end
            end
            if qf and q - qf + 1 == redis.call('ZCARD', key) then
                -- Every member a link: the first live one is the oldest,
                -- or the first after the dead ones, which must then be
                -- the next q (else its stamp has links of other costs).
                local qo = qf
                dead = 0
                if xf <= u - p then
                    dead = redis.call('ZCOUNT', key, '-inf',
                        string.format('%.0f', u - p))
                    v = redis.call('ZRANGEBYSCORE', key, lo, '+inf',
                        'LIMIT', '0', '1')[1]
                    qf = false
                    if v == nil then
                        fast, nl = true, 0 -- nothing lives: a new chain
                    elseif string.byte(v, -33) == 126 then
                        qf, sf, xf, cf = struct.unpack('>i8>i8>i8>i8', v,
                            #v - 31)
                    end
                end
                if qf == qo + dead then
                    fast, r0, sq, ss = true, dead, q, s
                    nl = q - qf + 1
                    sum = (s - sf + cf) % 1125899906842624
                end
            end
        end
        if fast then
            admit = sum + c <= l
            if not admit and c <= l and sum == nl then
                -- Every live cost is 1: the entry whose leaving lets the
                -- request fit is the (nl + c - l)-th oldest, read by rank.
                cum = nl + c - l
                local e = redis.call('ZRANGE', key, r0 + cum - 1,
                    r0 + cum - 1)
                xfit = tonumber(string.match(e[1], '^(%d+):'))
            end
        end
        if (not fast and top[1]) or (fast and not admit and c <= l and
                xfit == -1) then
            -- Read whole: the sum, the chain's newest link (if any link
            -- lives), and for a denial that can fit, the oldest-first
            -- walk to the entry whose leaving lets it fit.
            local live = redis.call('ZRANGEBYSCORE', key, lo, '+inf')
            if not fast then
                sum, sq, ss = 0, 0, 0
                for j = 1, #live do
                    local w, s, q = string.match(live[j],
                        '^%d+:(%d+):(.*)$')
                    if w == nil then
                        return redis.error_reply(unexpected .. key .. foreign)
                    end
                    sum = sum + tonumber(w)
                    if string.byte(s, -33) == 126 then
                        local q, sv = struct.unpack('>i8>i8', s, #s - 31)
                        if q > sq then
                            sq, ss = q, sv
                        end
                    end
                end
                admit = sum + c <= l
            end
            if not admit and c <= l then
                -- Oldest first, until what is left plus c fits; c <= L,
                -- so the walk ends at the latest when nothing is left.
                for j = 1, #live do
                    local x, w = string.match(live[j], '^(%d+):(%d+):')
                    cum = cum + tonumber(w)
                    if sum - cum + c <= l then
                        xfit = tonumber(x)
                        break
                    end
                end
            end
        elseif not top[1] then
            admit = c <= l
        end
        if op == OP_AT_MOST and l - sum < g then
            g = l - sum
        end
        st[o], st[o + 1], st[o + 2], st[o + 3] = algo, p, a3, m
        st[o + 4], st[o + 5], st[o + 6] = sum, xfit, cum
        st[o + 7], st[o + 8], st[o + 9], st[o + 10] = u, key, sq, ss
        st[o + 11] = dead
        o = o + 12
    else
        -- token, gcra: x (the last charge), D (the backlog in request*ms
        -- at x) and keep (the time until which the state must live, so
        -- that its TTL only grows): three little-endian int64.
        local key = KEYS[kx]
        kx = kx + 1
        local v = redis.call('GET', key)
        local x, d, keep = t, 0, 0
        if v then
            if #v ~= 24 then
                return redis.error_reply(unexpected .. key .. foreign)
            end
            x, d, keep = struct.unpack('<i8i8i8', v)
        end
        local u = t
        if x > u then
            u = x
        end
        -- Drained at L request*ms a ms: (u - x) * L < D tells whether
        -- anything is left; past 2^53 the product is inexact but still
        -- above D, so the comparison holds.
        local du = 0
        if (u - x) * l < d then
            du = d - (u - x) * l
        end
        admit = c <= a3 and du <= (a3 - c) * p
        if op == OP_AT_MOST then
            -- B - ceil(du / P).
            local room = a3 + fdiv(-du, p)
            if room < g then
                g = room
            end
        end
        st[o], st[o + 1], st[o + 2], st[o + 3] = algo, p, a4, v or false
        st[o + 4], st[o + 5], st[o + 6], st[o + 7] = u, du, keep, key
        st[o + 8], st[o + 9], st[o + 10] = l, x, d
        o = o + 11
    end
    if not admit then
        all = false
    end
    st[o] = admit
    o = o + 1
    if blk then
        adm[i] = admit
    end
end
