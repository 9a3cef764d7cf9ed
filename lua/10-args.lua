-- The request's numbers, read once for every section.
-- Reads    ARGV[1] (the contract above; padded to 80 bytes for the named
--          limiter's operations).
-- Sets     t, op, c (the cost, or the operation's own number), tag, the
--          first rule's six numbers (algo1, l1, p1, x1, y1, z1: for the
--          fast path and the operations that are not decisions, which
--          read their own numbers there), and n, the rules' count.
local t, op, c, tag, algo1, l1, p1, x1, y1, z1 = struct.unpack(
    '<i8i8i8i8i8i8i8i8i8i8', ARGV[1])
local n = (#ARGV[1] - 32) / 48
