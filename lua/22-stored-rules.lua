-- A named limiter's stored rules (OP_RULES_GET reads, OP_RULES_PUT_NX
-- stores unless present, OP_RULES_PUT stores, OP_RULES_DEL deletes) under
-- KEYS[1]. The value starts "sluice-limiter 1\n<keep-alive>\n": a read
-- starts the keep-alive again. KEYS[2], the overrides hash, is deleted
-- with the rules and given each keep-alive they are.
-- Reads    op, c the keep-alive in ms to store (0: none), tag; ARGV[2]
--          the value to store; ARGV[3] (a read) a client whose override
--          is read too.
-- Returns  always, for these ops: the value read (none: empty), the
--          override read (with ARGV[3]), then found (0/1), the override's
--          length (with ARGV[3]; -1: none), the count of overrides (not
--          for OP_RULES_DEL: HLEN, so that a client can know a name has
--          none) and the tag. OP_RULES_PUT answers the value it
--          stored; OP_RULES_PUT_NX answers as a read (the value stored
--          now: its own, or the one that was there).
-- The four codes follow each other: one range test.
if op >= OP_RULES_GET and op <= OP_RULES_DEL then
    local key = KEYS[1]
    if op == OP_RULES_DEL then
        local d = redis.call('DEL', key)
        redis.call('DEL', KEYS[2])
        return struct.pack('<i8i8', d, tag)
    end
    if op == OP_RULES_PUT_NX or op == OP_RULES_PUT then
        local args = {'SET', key, ARGV[2]}
        if c > 0 then
            args[4], args[5] = 'PX', string.format('%.0f', c)
        end
        if op == OP_RULES_PUT_NX then
            args[#args + 1] = 'NX'
        end
        redis.call(unpack(args))
        if op == OP_RULES_PUT then
            if c > 0 then
                redis.call('PEXPIRE', KEYS[2], string.format('%.0f', c))
            else
                redis.call('PERSIST', KEYS[2])
            end
            return ARGV[2] .. struct.pack('<i8i8i8', 1,
                redis.call('HLEN', KEYS[2]), tag)
        end
    end
    local v = redis.call('GET', key)
    if not v then
        if ARGV[3] then
            return struct.pack('<i8i8i8i8', 0, -1, 0, tag)
        end
        return struct.pack('<i8i8i8', 0, 0, tag)
    end
    local ka = tonumber(string.match(v, '^sluice%-limiter 1\n(%d+)\n'))
    if ka and ka > 0 then
        redis.call('PEXPIRE', key, string.format('%.0f', ka))
        redis.call('PEXPIRE', KEYS[2], string.format('%.0f', ka))
    end
    local count = redis.call('HLEN', KEYS[2])
    if ARGV[3] then
        local o = redis.call('HGET', KEYS[2], ARGV[3])
        if not o then
            return v .. struct.pack('<i8i8i8i8', 1, -1, count, tag)
        end
        return v .. o .. struct.pack('<i8i8i8i8', 1, #o, count, tag)
    end
    return v .. struct.pack('<i8i8i8', 1, count, tag)
end
