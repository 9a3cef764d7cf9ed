#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""fake_server.py - a small RESP server that misbehaves on purpose, for
tests/test_misbehave.c.

It listens on two free loopback ports (the second is a cluster node that
only a refreshed slot map names), prints "PORT ALT_PORT" on one line, and
serves until its standard input closes (its parent, the test, ended).

Each connection picks its misbehaviour with the password it sends (AUTH
[user] MODE: the URL redis://:MODE@host:port): "ok" acts as a Redis with
no scripts (strings, integers, sorted sets, MULTI/EXEC/WATCH, CLUSTER
SLOTS naming itself); every other mode answers as "ok" would, then changes
the reply as its name says (MODES below). "FAKE CONNS" (on any connection)
answers the number of connections accepted so far, so that a test can see
a connection closed and opened again.
"""
import asyncio
import sys

# mode -> what it does (for --help and for the reader)
MODES = {
    "ok": "acts as a Redis with no scripts",
    "nil": "nil to every command",
    "bulk_int": "integers as bulk strings",
    "neg": "every integer is -1",
    "extra": "the first INCRBY, GET or EXEC of a connection is answered twice",
    "exec_short": "EXEC answers one reply fewer than it ran",
    "exec_long": "EXEC answers one reply more than it ran",
    "exec_types": "EXEC's elements are bulk strings",
    "status_int": "every +OK is :1, every +QUEUED is +OK",
    "huge_bulk": "a 64 MB bulk string to every command, sent until closed",
    "huge_array": "an array of 30 million :1, sent until closed",
    "deep_array": "a bulk string inside 2 million nested arrays' worth of headers",
    "escapes": "an error with terminal escapes to every command",
    "long_error": "an error of 5,000 bytes to every command",
    "not_resp": "bytes that are not RESP",
    "slots_overlap": "CLUSTER SLOTS with two entries over the same slots",
    "slots_many": "CLUSTER SLOTS of 20,000 entries each over every slot",
    "slots_absurd": "CLUSTER SLOTS with start > end and ports out of range",
    "moved_unknown": "MOVED to 192.0.2.1:6379 for every script",
    "moved_long": "MOVED to a host name of 5,000 bytes",
    "moved_known": "MOVED to the second port, which CLUSTER SLOTS then names",
    "reset": "a TCP reset on the first bytes (as a TLS port does to text)",
    "unwatch_int": "UNWATCH is answered :1",
    "ask_self": "ASK to itself for every script, and :1 to ASKING",
    # Sentinels (redis+sentinel://: the sentinels' password picks these):
    "sentinel_self": "SENTINEL GET-MASTER-ADDR-BY-NAME names this server",
    "sentinel_replica": "names this server, whose ROLE is then slave "
                        "(the data nodes' password: replica)",
    "replica": "ROLE answers slave",
    "sentinel_outside": "names 192.0.2.1:6379, an address no test reaches",
    "sentinel_short": "names [host] without a port",
    "sentinel_port": "names a port of 99999",
    "sentinel_unknown": "does not know the master (nil)",
}

CONNS = 0
STORE = {}  # key -> bytes, or dict member -> score (a sorted set)
MOVED_GIVEN = False
PORTS = [0, 0]


class Err(str):
    pass


class Status(str):
    pass


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) % 16384


def enc(v, mode):
    if isinstance(v, Err):
        return b"-" + v.encode("latin-1") + b"\r\n"
    if isinstance(v, Status):
        if mode == "status_int":
            return b":1\r\n" if v == "OK" else b"+OK\r\n"
        return b"+" + v.encode() + b"\r\n"
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int):
        if mode == "bulk_int":
            return enc(str(v).encode(), mode)
        if mode == "neg":
            v = -1
        return b":%d\r\n" % v
    if v is None:
        return b"$-1\r\n"
    if isinstance(v, bytes):
        return b"$%d\r\n%s\r\n" % (len(v), v)
    if isinstance(v, list):
        return b"*%d\r\n" % len(v) + b"".join(enc(x, mode) for x in v)
    raise TypeError(v)


def zrange(z):
    out = []
    for m, sc in sorted(z.items(), key=lambda kv: (kv[1], kv[0])):
        out += [m, (b"%d" % sc) if sc == int(sc) else repr(sc).encode()]
    return out


def score(b):
    if b in (b"-inf", b"+inf", b"inf"):
        return float(b.replace(b"+", b""))
    ex = b.startswith(b"(")
    return (float(b[1:]) if ex else float(b)), ex


def run(cmd, port):
    """The reply of a Redis with no scripts (and no expiry) to cmd."""
    name = cmd[0].upper()
    a = cmd[1:]
    if name in (b"PING",):
        return Status("PONG")
    if name == b"ROLE":
        return [b"master", 0, []]
    if name == b"SENTINEL" and len(a) == 2 and \
            a[0].upper() == b"GET-MASTER-ADDR-BY-NAME":
        return [b"127.0.0.1", b"%d" % port]
    if name in (b"AUTH", b"SELECT", b"WATCH", b"UNWATCH"):
        return Status("OK")
    if name == b"GET":
        v = STORE.get(a[0])
        return v if v is None or isinstance(v, bytes) else Err(
            "WRONGTYPE Operation against a key holding the wrong kind of "
            "value")
    if name == b"SET":
        opts = [x.upper() for x in a[2:]]
        if b"NX" in opts and a[0] in STORE:
            return None
        STORE[a[0]] = a[1]
        return Status("OK")
    if name in (b"INCRBY", b"DECRBY"):
        v = int(STORE.get(a[0], b"0")) + (1 if name == b"INCRBY" else -1) * \
            int(a[1])
        STORE[a[0]] = b"%d" % v
        return v
    if name in (b"PEXPIRE", b"PERSIST"):
        return int(a[0] in STORE)
    if name == b"DEL":
        return sum(1 for k in a if STORE.pop(k, None) is not None)
    if name == b"ZADD":
        z = STORE.setdefault(a[0], {})
        new = a[2] not in z
        z[a[2]] = float(a[1])
        return int(new)
    if name == b"ZREM":
        z = STORE.get(a[0], {})
        return int(z.pop(a[1], None) is not None)
    if name == b"ZRANGE":
        return zrange(STORE.get(a[0], {}))
    if name in (b"ZREMRANGEBYSCORE", b"ZRANGEBYSCORE"):
        z = STORE.get(a[0], {})
        lo, hi = a[1], a[2]

        def inside(sc):
            for bound, low in ((lo, True), (hi, False)):
                b = score(bound)
                if isinstance(b, float):
                    continue
                v, ex = b
                if low and (sc < v or (ex and sc == v)):
                    return False
                if not low and (sc > v or (ex and sc == v)):
                    return False
            return True
        hit = {m: sc for m, sc in z.items() if inside(sc)}
        if name == b"ZRANGEBYSCORE":
            return zrange(hit)
        for m in hit:
            del z[m]
        return len(hit)
    if name == b"CLUSTER":
        return [[0, 16383, [b"127.0.0.1", port, b"fake"]]]
    if name == b"FAKE":
        return CONNS
    if name in (b"EVALSHA", b"EVAL", b"SCRIPT", b"FUNCTION", b"FCALL"):
        return Err("ERR the fake server runs no scripts")
    return Err("ERR unknown command '%s'" % name.decode("latin-1"))


def misbehave(mode, cmd, port, reply):
    """What mode makes of reply; bytes to send, or None to close."""
    global MOVED_GIVEN
    name = cmd[0].upper()
    if mode == "nil":
        return b"$-1\r\n"
    if name == b"ROLE" and mode == "replica":
        return enc([b"slave", b"127.0.0.1", 1, b"connected", 0], "ok")
    if name == b"SENTINEL":
        if mode == "sentinel_outside":
            return enc([b"192.0.2.1", b"6379"], "ok")
        if mode == "sentinel_short":
            return enc([b"127.0.0.1"], "ok")
        if mode == "sentinel_port":
            return enc([b"127.0.0.1", b"99999"], "ok")
        if mode == "sentinel_unknown":
            return b"$-1\r\n"
    if mode == "escapes":
        return b"-ERR \x1b[31mred\x1b[0m \x07\x08\x7f\r\n"
    if mode == "long_error":
        return b"-ERR " + b"x" * 5000 + b"\r\n"
    if mode == "not_resp":
        return b"?this is not RESP\r\n"
    if name == b"CLUSTER":
        me = [b"127.0.0.1", port, b"fake"]
        if mode == "slots_overlap":
            return enc([[0, 16383, me], [100, 200, me]], "ok")
        if mode == "slots_many":
            # One entry encoded once: the reply costs the server a copy,
            # not 20,000 encodings, so that a loaded machine still sends it
            # well within the timeout (and answers other connections).
            return b"*20000\r\n" + enc([0, 16383, me], "ok") * 20000
        if mode == "slots_absurd":
            return enc([[200, 100, me], [0, 16383, [b"127.0.0.1", 0, b"x"]]],
                       "ok")
        if mode == "moved_known" and MOVED_GIVEN:
            return enc([[0, 16383, [b"127.0.0.1", PORTS[1], b"alt"]]], "ok")
    if name in (b"EVALSHA", b"EVAL") and len(cmd) > 3:
        slot = key_slot(cmd[3])
        if mode == "moved_unknown":
            return b"-MOVED %d 192.0.2.1:6379\r\n" % slot
        if mode == "moved_long":
            return b"-MOVED %d %s:6379\r\n" % (slot, b"h" * 5000)
        if mode == "moved_known":
            if port == PORTS[1]:
                return b"-ERR fake: reached the node the refreshed map named\r\n"
            MOVED_GIVEN = True
            return b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, PORTS[1])
    if mode == "ask_self" and name == b"ASKING":
        return b":1\r\n"
    if mode == "ask_self" and name in (b"EVALSHA", b"EVAL") and len(cmd) > 3:
        return b"-ASK %d 127.0.0.1:%d\r\n" % (key_slot(cmd[3]), port)
    if mode == "unwatch_int" and name == b"UNWATCH":
        return b":1\r\n"
    if mode in ("exec_short", "exec_long", "exec_types") and \
            name == b"EXEC" and isinstance(reply, list):
        if mode == "exec_short":
            reply = reply[:-1]
        elif mode == "exec_long":
            reply = reply + [1]
        else:
            reply = [b"x" for _ in reply]
    return enc(reply, mode)


async def stream_forever(writer, head, unit):
    writer.write(head)
    chunk = unit * (65536 // len(unit))
    try:
        while True:
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass


async def read_command(reader):
    line = await reader.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.split()  # inline
    n = int(line[1:])
    cmd = []
    for _ in range(n):
        h = await reader.readline()
        size = int(h[1:])
        cmd.append((await reader.readexactly(size + 2))[:-2])
    return cmd


async def serve(reader, writer):
    global CONNS
    CONNS += 1
    port = writer.get_extra_info("sockname")[1]
    mode = "ok"
    multi = None
    dup_done = False
    try:
        while True:
            cmd = await read_command(reader)
            if cmd is None:
                break
            if not cmd:
                continue
            name = cmd[0].upper()
            if name == b"AUTH":
                mode = cmd[-1].decode("latin-1")
                if mode == "reset":
                    sock = writer.get_extra_info("socket")
                    import socket
                    import struct
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                writer.write(b"+OK\r\n" if mode in MODES else
                             b"-ERR fake: unknown mode\r\n")
                await writer.drain()
                continue
            if mode == "huge_bulk":
                await stream_forever(writer, b"$67108864\r\n", b"x")
                return
            if mode == "huge_array":
                await stream_forever(writer, b"*30000000\r\n", b":1\r\n")
                return
            if mode == "deep_array":
                await stream_forever(writer, b"", b"*1\r\n")
                return
            if name == b"MULTI":
                multi = []
                out = enc(Status("OK"), mode)
            elif multi is not None and name not in (b"EXEC", b"DISCARD"):
                multi.append(cmd)
                out = misbehave(mode, cmd, port, Status("QUEUED"))
            elif name == b"EXEC":
                replies = [run(c, port) for c in (multi or [])]
                multi = None
                out = misbehave(mode, cmd, port, replies)
            else:
                out = misbehave(mode, cmd, port, run(cmd, port))
            if mode == "extra" and not dup_done and \
                    name in (b"INCRBY", b"GET", b"EXEC"):
                dup_done = True
                out += out
            writer.write(out)
            await writer.drain()
    except (ConnectionError, OSError, asyncio.IncompleteReadError,
            ValueError):
        pass
    finally:
        writer.close()


async def main():
    servers = [await asyncio.start_server(serve, "127.0.0.1", 0)
               for _ in range(2)]
    for i, s in enumerate(servers):
        PORTS[i] = s.sockets[0].getsockname()[1]
    print(PORTS[0], PORTS[1], flush=True)
    loop = asyncio.get_running_loop()
    # Until the parent closes our stdin (it ended, or is done with us).
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    for s in servers:
        s.close()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        for m, what in MODES.items():
            print("%-14s %s" % (m, what))
        sys.exit(0)
    asyncio.run(main())
