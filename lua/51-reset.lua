-- A reset on the server's clock (on the client's, the client deletes the
-- keys itself): each rule's key, and windows k - 2 .. k + 1 around now.
-- Reads    op, n, t, pos, window_locate, tag, ARGV[1], KEYS, ARGV[3] (a
--          block: its key, the last, goes too).
-- Returns  for OP_RESET: t, then the tag.
if op == OP_RESET then
    for i = 1, n do
        local algo, l, p, off
        algo, l, p, off, pos = struct.unpack('<i8i8i8i8i8i8', ARGV[1], pos)
        redis.call('DEL', KEYS[i])
        if algo <= 2 then
            local k = window_locate(t, off, p)
            for d = -2, 1 do
                redis.call('DEL', KEYS[i] .. ':' .. string.format('%.0f',
                    k + d))
            end
        end
    end
    if ARGV[3] then
        redis.call('DEL', KEYS[#KEYS])
    end
    return struct.pack('<i8i8', t, tag)
end
