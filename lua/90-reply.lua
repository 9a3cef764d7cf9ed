-- The reply: the first r - 1 slots of st, then t on the server's clock,
-- then the tag, packed as little-endian int64s in one string: a table
-- reply costs Redis a look-up of every special field ('err', 'ok', ...)
-- on top of each element.
-- Reads    st, r, server, t, op, g, blk, e0, e1, tag.
-- Returns  the reply of OP_PEEK, OP_ACQUIRE, OP_AT_MOST (and of
--          OP_REFUND and OP_FORCE, answered as a peek).
if server then
    st[r] = t
    r = r + 1
end
if op == OP_AT_MOST then
    st[r] = g
    r = r + 1
end
if blk then
    st[r], st[r + 1] = e0, e1
    r = r + 2
end
st[r] = tag
return struct.pack(string.sub(
    '<i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8' ..
    'i8i8i8',
    1, 1 + 2 * r),
    unpack(st, 1, r))
