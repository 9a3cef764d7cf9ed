#!/usr/bin/env python3
# capture_replies.py - writes the fuzz_reply seed corpus from real servers:
# the bytes a redis-server (and a cluster node) sends back while the CLI
# replays events on every backend, CLUSTER SLOTS, MOVED, and errors.
#   capture_replies.py SLUICE_BINARY REDIS_URL CLUSTER_NODE OUT_DIR
# REDIS_URL is redis://127.0.0.1:PORT of a throwaway server; CLUSTER_NODE is
# host:port of one node of a throwaway cluster. Each file is the harness's
# three header bytes (ruleset, tag, op/cost/clock; see fuzz_reply.c) and the
# RESP of one read.
import hashlib
import os
import socket
import subprocess
import sys
import threading

# The same order as rule_texts in fuzz_reply.c.
RULES = [
    "fixed:10/1s",
    "sliding:10/1s,tz=-05:30",
    "log:5/1s",
    "token:5/1s,burst=10",
    "gcra:5/1s",
    "fixed:1000/1d,tz=+08:00+fixed:100/1h",
    "fixed:3/1s+sliding:5/1m+log:2/1s+token:4/1s+gcra:4/1m",
    "fixed:1/1ms+fixed:1/2ms+fixed:1/3ms+fixed:1/4ms+sliding:1/5ms+"
    "sliding:1/6ms+log:1/7ms+log:1/8ms",
    "sliding:900719/10000000000ms",
    "log:1000000000/9007ms",
    "gcra:1000000000/9007ms,burst=1000000000",
    "token:1/10000000000ms",
]
NOW = 1700000000000  # clocks[2] in fuzz_reply.c
CLOCK_BITS = 2 << 3

sluice, redis_url, cluster_node, out = sys.argv[1:5]
os.makedirs(out, exist_ok=True)


def save(header, data, tag="resp"):
    blob = bytes(header) + data
    name = "%s-%s" % (tag, hashlib.sha1(blob).hexdigest()[:12])
    with open(os.path.join(out, name), "wb") as f:
        f.write(blob)


def echoed_tag(data):
    """The script's echoed tag: the last bulk string of the reply."""
    lines = data.split(b"\r\n")
    for i in range(len(lines) - 2, 0, -1):
        if lines[i - 1].startswith(b"$") and lines[i].isdigit():
            return int(lines[i]) % 256
    return 0


class Recorder:
    """A loopback proxy that keeps every read from the server."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.reads = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            c, _ = self.sock.accept()
            u = socket.create_connection(self.upstream)
            threading.Thread(target=self.pump, args=(c, u, False),
                             daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, True),
                             daemon=True).start()

    def pump(self, src, dst, record):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if record:
                self.reads.append(data)
            dst.sendall(data)


host, port = redis_url.split("://")[1].split(":")
rec = Recorder((host, int(port)))
for scheme in ("redis", "redis+multi", "twemproxy"):
    for i, rule in enumerate(RULES):
        for op, opbit in (("acquire", 0), ("peek", 1), ("reset", 2)):
            for cost, costbit in ((1, 4), (3, 0)):
                events = "".join(
                    '{"t": %d, "key": "k%d", "rule": "%s", "cost": %d, '
                    '"op": "%s"}\n' % (NOW + 10 * j, i, rule, cost, op)
                    for j in range(3))
                del rec.reads[:]
                subprocess.run(
                    [sluice, "replay", "--url",
                     "%s://127.0.0.1:%d?prefix=fz%d:" % (scheme, rec.port, i)],
                    input=events.encode(), stdout=subprocess.DEVNULL,
                    check=True)
                for data in rec.reads:
                    if data.startswith(b"+PONG") or data == b"+OK\r\n":
                        continue
                    save([i, echoed_tag(data), opbit | costbit | CLOCK_BITS],
                         data, scheme.replace("+", "_"))


def ask(addr, *cmd):
    s = socket.create_connection(addr)
    req = b"*%d\r\n" % len(cmd) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in cmd)
    s.sendall(req)
    s.settimeout(1.0)
    data = b""
    try:
        while True:
            part = s.recv(65536)
            if not part:
                break
            data += part
            if data.endswith(b"\r\n"):
                s.settimeout(0.2)
    except socket.timeout:
        pass
    s.close()
    return data


h, p = cluster_node.split(":")
node = (h, int(p))
save([0, 0, 0], ask(node, b"CLUSTER", b"SLOTS"), "cluster_slots")
for key in (b"a", b"b", b"c", b"{user:1}", b"tenant:7"):
    data = ask(node, b"GET", key)
    if data.startswith(b"-MOVED"):
        save([0, 0, 0], data, "moved")
save([3, 0, 0], ask((host, int(port)), b"EVALSHA", b"0" * 40, b"0"),
     "noscript")
ask((host, int(port)), b"SET", b"fz:wrongtype", b"x")
save([0, 0, 0], ask((host, int(port)), b"HGET", b"fz:wrongtype", b"x"),
     "wrongtype")
for err in (b"-ERR Connection refused\r\n",
            b"-ERR Connection reset by peer\r\n",
            b"-ERR Connection timed out\r\n", b"-ERR Invalid argument\r\n",
            b"-ASK 3999 127.0.0.1:7002\r\n", b"-MOVED 3999 :7002\r\n",
            b"-MOVED 3999 ?:7002\r\n", b"-MOVED 16383 ::1:7002\r\n",
            b"-ASK 0 [fe80::1]:65535\r\n", b"-MOVED 16384 h:1\r\n",
            b"-MOVED 1 h:0\r\n", b"-TRYAGAIN Multiple keys request\r\n",
            b"-CLUSTERDOWN The cluster is down\r\n",
            b"-LOADING Redis is loading\r\n",
            b"-READONLY You can't write against a read only replica.\r\n",
            b"-OOM command not allowed\r\n",
            b"*2\r\n-ERR Connection refused\r\n:1\r\n"):
    save([0, 0, 0], err, "error")
