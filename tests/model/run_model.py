"""Drive `sluice replay` with random schedules and check every answer
against the independent reference model (model.py).

Why it exists: the other differential tests compare backends with mem://,
which shares code with some of them; this one compares every field of
every answer with a model written from docs/SEMANTICS.md alone. Given
several --url, event i goes to the i-th URL modulo their number, one line
at a time, so backends on one server must share their state.

    run_model.py --bin BUILD/sluice --url URL|@FILE [--unsupported ALGS]
                 [--url ... [--unsupported ...]] [--events N] [--seed S]

--unsupported applies to the --url before it. SLUICE_WRAP, when set, is a
command prefix (valgrind) put in front of the binary. Exit 0 when every
answer matched, 1 on the first mismatch (with a reproducer), 2 on usage.
"""

import json
import os
import random
import select
import shlex
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402

TOP = 2 ** 53 - 1
TTL_FLOOR = 600000
PROBE = {"t": 0, "key": "model:probe", "rule": "fixed:1/1s", "op": "reset"}
HISTORY_SHOWN = 20


class Options:
    """Command line: one UrlSpec per --url, each with its refusals."""

    def __init__(self):
        self.bin, self.urls, self.events = None, [], 20000
        self.seed, self.timeout = None, None


class UrlSpec:
    """A URL as given, the URL used, and the algorithms it refuses."""

    def __init__(self, given):
        self.given, self.url, self.unsupported = given, None, set()
        # --reserve: "random" until the run draws (H, S) from its seed.
        self.reserve = None


def usage(msg):
    sys.stderr.write("run_model.py: %s\n%s" % (msg, __doc__))
    sys.exit(2)


def parse_args(argv):
    """Manual parsing: --unsupported qualifies the --url before it."""
    opts, i = Options(), 0
    while i < len(argv):
        flag = argv[i]
        if i + 1 >= len(argv):
            usage("%s needs a value" % flag)
        value, i = argv[i + 1], i + 2
        if flag == "--bin":
            opts.bin = value
        elif flag == "--url":
            opts.urls.append(UrlSpec(value))
        elif flag == "--unsupported":
            if not opts.urls:
                usage("--unsupported must follow the --url it applies to")
            opts.urls[-1].unsupported = set(value.split(","))
        elif flag == "--reserve":
            if not opts.urls:
                usage("--reserve must follow the --url it applies to")
            opts.urls[-1].reserve = parse_reserve(value)
        elif flag in ("--events", "--seed", "--timeout"):
            setattr(opts, flag[2:], int(value))
        else:
            usage("unknown argument %s" % flag)
    if not opts.bin or not opts.urls:
        usage("--bin and --url are required")
    return opts


def parse_reserve(value):
    """--reserve H,S or random (H 1..500 ms, S 10..50 %, from the seed)."""
    if value == "random":
        return value
    try:
        hold, share = (int(x) for x in value.split(","))
    except ValueError:
        usage("--reserve takes H,S or random, not %s" % value)
    if not (1 <= hold <= 60000 and 1 <= share <= 50):
        usage("--reserve: H 1..60000, S 1..50")
    return (hold, share)


def resolve_url(spec, prefix, shared=False):
    """@FILE -> its first line; then a fresh prefix, the TTL floor and
    the reservation options; shared (several URLs on one state): named
    limiters' rules read with every decision, since a change made through
    one handle reaches another's cache only within rules_cache_ms of real
    time, which the virtual clock does not see."""
    given = spec.given
    url = given
    if given.startswith("@"):
        with open(given[1:]) as f:
            url = f.readline().strip()
    sep = "&" if "?" in url else "?"
    url = "%s%sprefix=%s&ttl_floor_ms=%d" % (url, sep, prefix, TTL_FLOOR)
    if spec.reserve:
        url += "&reserve_ms=%d&reserve_share=%d" % spec.reserve
    if shared:
        url += "&rules_cache_ms=0"
    # A loaded machine must not fail the model on one slow round trip
    # (at load 10, 476 ms against the default 250): 2 s a call, scaled as
    # the build's timed tests are, unless the URL says otherwise.
    if "timeout_ms=" not in url.replace("connect_timeout_ms=", ""):
        scale = max(1, int(os.environ.get("SLUICE_TIME_SCALE", "1") or 1))
        url += "&timeout_ms=%d" % (2000 * scale)
    return url


# ----------------------------------------------------------- the process


class ReplayError(Exception):
    """The CLI died, or did not answer in time."""


class Replay:
    """One `sluice replay --url URL`, driven one line at a time: it must
    answer each line before it reads the next (flush per line)."""

    def __init__(self, binary, url, timeout):
        wrap = shlex.split(os.environ.get("SLUICE_WRAP", ""))
        cmd = wrap + [binary, "replay", "--url", url]
        self.url, self.timeout, self.buf = url, timeout, b""
        self.err = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE,
                                         stderr=self.err)
        except OSError as e:
            raise ReplayError("cannot run %s: %s" % (" ".join(cmd), e))

    def ask(self, line):
        """Write one line, read the one answer line."""
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise ReplayError("replay exited: %s" % self.stderr())
        return self.read_line()

    def read_line(self):
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ReplayError(
                    "no answer within %d s (replay must flush each answer "
                    "line) from %s" % (self.timeout, self.url))
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ReplayError("replay exited: %s" % self.stderr())
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace").strip()

    def close(self):
        """End input; the exit status (0 when every line was answered)."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.proc.wait(timeout=max(60, self.timeout))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()


def start_replay(binary, url, timeout):
    """Start one replay and check that it answers a first (probe) line."""
    r = Replay(binary, url, timeout)
    answer = r.ask(json.dumps(PROBE))
    if answer != '{"reset": true}':
        r.kill()
        raise ReplayError("probe answered %s on %s" % (answer, url))
    return r


# ------------------------------------------------------------ the schedule


PERIODS_SMALL = [1, 7, 10, 50, 100, 250, 500, 1000, 1000, 2000, 3000]
PERIODS_MEDIUM = [10000, 60000, 3600000]


class Slot:
    """One (algorithm, period, tz) of a key and its (limit, burst)s."""

    def __init__(self, alg, period, tz, variants, block=None):
        self.alg, self.period, self.tz = alg, period, tz
        self.variants = variants
        self.block = block  # (seconds, extend) or None: a penalty

    @property
    def ident(self):
        return (self.alg, self.period, self.tz)


def pick_period(rng):
    r = rng.random()
    if r < 0.75:
        return rng.choice(PERIODS_SMALL)
    if r < 0.9:
        return rng.choice(PERIODS_MEDIUM)
    if r < 0.95:
        return 86400000 * rng.randint(1, 3)
    return rng.choice([10 ** 10, rng.randint(10 ** 8, 10 ** 10)])


def pick_capacity(rng, period):
    """Mostly small, so that denials are common; sometimes the largest
    allowed (capacity * period < 2^53, at most 10^9)."""
    most = min(10 ** 9, (2 ** 53 - 1) // period)
    r = rng.random()
    if r < 0.7:
        return min(most, rng.randint(1, 10))
    if r < 0.88:
        return min(most, rng.randint(11, 300))
    if r < 0.95:
        return rng.randint(min(most, 1000), most)
    return most


def pick_variant(rng, alg, period):
    """(limit, burst): burst is the capacity for token and gcra."""
    cap = pick_capacity(rng, period)
    if alg not in M.BUCKETS:
        return (cap, cap)
    r = rng.random()
    if r < 0.4:
        return (cap, cap)
    if r < 0.85:
        return (rng.randint(1, min(10 ** 9, 2 * cap)), cap)
    return (rng.randint(1, 10 ** 9), cap)


def pick_tz(rng, alg):
    if alg not in M.WINDOWED or rng.random() < 0.4:
        return 0
    return rng.randint(-56, 56) * 15 * 60000 + rng.choice(
        [0, 0, 0, rng.randint(-14, 14) * 60000])


def make_slot(rng, alg=None):
    alg = alg or rng.choice(M.ALGORITHMS)
    period = pick_period(rng)
    tz = max(-14 * 3600000, min(14 * 3600000, pick_tz(rng, alg)))
    count = rng.choice([1, 1, 2, 3])
    variants = [pick_variant(rng, alg, period) for _ in range(count)]
    return Slot(alg, period, tz, variants, pick_block(rng))


def pick_block(rng):
    """A penalty on a fifth of the slots: mostly short (the clock moves a
    few ms an event), sometimes an hour; a third with extend=1."""
    if rng.random() >= 0.2:
        return None
    return (rng.choice([1, 1, 1, 2, 3, 5, 10, 60, 3600]),
            rng.random() < 0.33)


def fmt_block(rng, block):
    """block=D in a unit that divides it, and extend=0 or 1 at times."""
    if block is None:
        return ""
    seconds, extend = block
    ms = seconds * 1000
    units = [(u, n) for u, n in M.UNITS.items() if ms % n == 0]
    unit, n = rng.choice(units)
    text = ",block=%d%s" % (ms // n, unit)
    if extend:
        text += ",extend=1"
    elif rng.random() < 0.1:
        text += ",extend=0"
    return text


def fmt_period(rng, period):
    units = [(u, n) for u, n in M.UNITS.items() if period % n == 0]
    unit, n = rng.choice(units)
    return "%d%s" % (period // n, unit)


def fmt_tz(rng, tz):
    if tz == 0:
        return rng.choice(["", "", ",tz=+00:00", ",tz=-00:00"])
    sign, tz = ("-", -tz) if tz < 0 else ("+", tz)
    return ",tz=%s%02d:%02d" % (sign, tz // 3600000, tz % 3600000 // 60000)


def fmt_rule(rng, slot, variant):
    limit, burst = variant
    text = "%s:%d/%s" % (slot.alg, limit, fmt_period(rng, slot.period))
    if slot.alg in M.BUCKETS:
        if burst != limit or rng.random() < 0.3:
            text += ",burst=%d" % burst
    if slot.alg in M.WINDOWED:
        text += fmt_tz(rng, slot.tz)
    return text + fmt_block(rng, getattr(slot, "block", None))


class Profile:
    """A key and the slots its requests use."""

    def __init__(self, key, slots):
        self.key, self.slots = key, slots


def make_profile(rng, key, first=None):
    """A key's slots: two to four algorithms (`first` among them), some
    with two periods."""
    algs = rng.sample(M.ALGORITHMS, rng.randint(2, 4))
    if first is not None and first not in algs:
        algs[0] = first
    slots, seen = [], set()
    for alg in algs:
        for _ in range(rng.choice([1, 1, 2])):
            s = make_slot(rng, alg)
            if s.ident not in seen:
                seen.add(s.ident)
                slots.append(s)
    return Profile(key, slots)


class Schedule:
    """Random events: hot keys, skewed clients, late requests after
    denials and peeks, limit changes, jumps, the top of the time range."""

    def __init__(self, rng, model, events):
        self.rng, self.model, self.events = rng, model, events
        self.base = rng.randint(0, 3000)
        self.skews = [0] + [rng.randint(-800, 800) for _ in range(4)]
        hot = ["user:1", "user:2", "tenant:7", "clé:ü", "ip:10.0.0.9"]
        self.hot = [make_profile(rng, k, a)
                    for k, a in zip(hot, M.ALGORITHMS)]
        self.cold = [make_profile(rng, "k:%d" % i) for i in range(60)]
        self.top_at = int(events * 0.9)
        self.follow = None
        # Leases: their keys, the ids answered (newest last) with their
        # keys, and each acquire event's id (for the reproducer).
        self.lease_keys = ["lease:a", "lease:é"]
        self.issued, self.id_of = [], {}
        # Named limiters: each name's slot (one rule), the names whose
        # rules were set, their clients (SEMANTICS, "Named limiters").
        self.names = {n: make_slot(rng) for n in NAMES}
        self.named_set = set()
        self.script = self.reproducer()

    def reproducer(self):
        """The late-after-denial case that once slipped through."""
        ev = [(1000, 1), (1500, 1), (2200, 2), (1800, 1)]
        return [{"t": t, "key": "repro:log", "rule": "log:2/1s",
                 "cost": c, "op": "acquire"} for t, c in ev]

    def next(self, i):
        """The i-th event and the (slot, variant) pairs it uses."""
        if self.script:
            ev = self.script.pop(0)
            return ev, [(("log", 1000, 0), (2, 2))]
        self.advance(i)
        if self.follow is not None:
            ev, used = self.follow
            self.follow = None
            return ev, used
        return self.fresh()

    # The clock's steps: (the chance's upper end, the least and most
    # step); mostly small steps, sometimes jumps.
    STEPS = ((0.35, 0, 0), (0.75, 1, 20), (0.95, 21, 300), (0.99, 301, 5000),
             (0.998, 10 ** 4, 10 ** 7), (1.0, 10 ** 8, 10 ** 10))

    def advance(self, i):
        """Move the shared clock by a step drawn from STEPS; the top of
        the time range near the end."""
        rng, r = self.rng, self.rng.random()
        if i == self.top_at:
            self.base = TOP - 10 ** 6 + rng.randint(0, 10 ** 5)
            return
        lo, hi = next((lo, hi) for upto, lo, hi in self.STEPS if r < upto)
        step = rng.randint(lo, hi)
        if self.base + step + 1000 <= TOP and (
                i > self.top_at or self.base + step < TOP - 2 * 10 ** 6):
            self.base += step

    def fresh(self):
        rng = self.rng
        if rng.random() < 0.06:
            return self.lease_event(), []
        if rng.random() < 0.08:
            return self.named_event(), []
        prof = rng.choice(self.hot if rng.random() < 0.85 else self.cold)
        n = 1 if rng.random() < 0.7 or len(prof.slots) < 2 else \
            rng.randint(2, min(3, len(prof.slots)))
        slots = rng.sample(prof.slots, n)
        used = [(s, self.variant_of(s)) for s in slots]
        t = max(0, min(TOP, self.base + rng.choice(self.skews)))
        cost = self.pick_cost(min(v[1] for _, v in used))
        r = rng.random()
        op = ("acquire" if r < 0.72 else "peek" if r < 0.84 else
              "acquire_at_most" if r < 0.92 else "refund" if r < 0.955 else
              "settle" if r < 0.985 else "reset")
        ev = self.event(prof.key, used, t, cost, op)
        if op == "settle":
            self.settle_amounts(ev, cost, min(v[1] for _, v in used))
        return ev, [(s.ident, v) for s, v in used]

    def settle_amounts(self, ev, cost, cap):
        """A settle of what was reserved (the cost asked) against what was
        used: less, the same, a little more, or many times the capacity
        (a deep deficit)."""
        rng, r = self.rng, self.rng.random()
        ev.pop("cost", None)
        ev["op"], ev["reserved"] = "settle", cost
        ev["actual"] = min(10 ** 9, (
            rng.randint(0, cost) if r < 0.3 else cost if r < 0.4 else
            cost + rng.randint(1, max(1, min(cap, 5))) if r < 0.9 else
            cost + rng.randint(1, 10 * cap)))

    def lease_event(self):
        """A lease on one of a few keys (at most 1 to 4 holders, for 1 ms
        to a minute), or a release of a lease answered lately, mostly on its
        own key; clocks skewed as for the decisions."""
        rng = self.rng
        t = max(0, min(TOP, self.base + rng.choice(self.skews)))
        if self.issued and rng.random() < 0.3:
            lid, key = rng.choice(self.issued[-12:])
            if rng.random() < 0.15:
                key = rng.choice(self.lease_keys)
            return {"t": t, "key": key, "op": "release", "lease": lid}
        length = rng.choice([1, 10, 100, 1000, 3000, 10000, 30000, 60000])
        return {"t": t, "key": rng.choice(self.lease_keys), "op": "lease",
                "max": rng.choice([1, 1, 2, 2, 3, 4]),
                "lease_ms": min(length, TOP - t)}

    def named_event(self):
        """An event of a named limiter: its rules set (first of all, and
        sometimes again with another limit), an override set (a rule of
        the name's slot or another, unlimited, deny; one on a name with
        no rules), one removed, or a decision by name for a client."""
        rng = self.rng
        t = max(0, min(TOP, self.base + rng.choice(self.skews)))
        name = rng.choice(NAMES)
        slot = self.names[name]
        if name not in self.named_set or rng.random() < 0.04:
            self.named_set.add(name)
            return {"t": t, "op": "limiter_set", "limiter": name,
                    "rule": fmt_rule(rng, slot, self.variant_of(slot))}
        client = rng.choice(CLIENTS)
        r = rng.random()
        if r < 0.12:
            if rng.random() < 0.1:
                name = "nl:none"
            kind = rng.random()
            other = make_slot(rng) if rng.random() < 0.3 else slot
            text = ("unlimited" if kind < 0.3 else "deny" if kind < 0.5
                    else fmt_rule(rng, other, self.variant_of(other)))
            return {"t": t, "op": "override", "limiter": name,
                    "client": client, "override": text}
        if r < 0.2:
            return {"t": t, "op": "unoverride", "limiter": name,
                    "client": client}
        op = rng.random()
        op = "acquire" if op < 0.75 else "peek" if op < 0.93 else "reset"
        ev = {"t": t, "limiter": name, "client": client, "op": op}
        if op != "reset":
            ev["cost"] = self.pick_cost(min(v[1] for v in slot.variants))
        return ev

    def variant_of(self, slot):
        """Mostly the slot's first (limit, burst), sometimes another."""
        if len(slot.variants) == 1 or self.rng.random() < 0.6:
            return slot.variants[0]
        return self.rng.choice(slot.variants)

    def pick_cost(self, cap):
        rng, r = self.rng, self.rng.random()
        if r < 0.6:
            return 1
        if r < 0.82:
            return rng.randint(1, max(1, min(cap, 5)))
        if r < 0.92:
            return rng.randint(max(1, cap // 2), cap)
        if cap >= 10 ** 9:
            return cap
        return rng.randint(cap + 1, min(10 ** 9, cap + rng.choice([1, 5,
                                                                   cap])))

    def event(self, key, used, t, cost, op):
        rule = "+".join(fmt_rule(self.rng, s, v) for s, v in used)
        ev = {"t": t, "key": key, "rule": rule}
        if not (cost == 1 and op == "acquire" and self.rng.random() < 0.3):
            ev["cost"], ev["op"] = cost, op
        return ev

    def feedback(self, ev, used, answer):
        """After a denial or a peek, often send a late request on the key:
        earlier than that request, and often earlier than the latest
        charge too."""
        if is_lease(ev):
            if "lease" in answer:
                self.issued.append((answer["lease"], ev["key"]))
                self.id_of[id(ev)] = answer["lease"]
            return
        if is_named(ev):
            return
        denied = answer.get("allowed") is False
        peek = ev.get("op") == "peek"
        if not (denied or peek) or self.rng.random() < 0.4 or ev["t"] == 0:
            return
        latest = [self.model.latest(ev["key"], s) for s, _ in used]
        latest = [x for x in latest if x is not None] or [ev["t"]]
        low = max(0, min(min(latest), ev["t"]) - 800, ev["t"] - 2400)
        t = self.rng.randint(low, ev["t"] - 1) if low < ev["t"] else low
        op = "acquire" if self.rng.random() < 0.75 else "peek"
        cost = 1 if self.rng.random() < 0.7 else ev.get("cost", 1)
        follow = {"t": t, "key": ev["key"], "rule": ev["rule"],
                  "cost": cost, "op": op}
        self.follow = (follow, used)


RESERVE_MS_LOW = 20  # --reserve random: H from 20 ms (see below)
RESERVE_PERIODS = [10, 50, 100, 250, 500, 1000, 1000, 2000, 2000, 5000,
                   10000, 60000]
RESERVE_CAPACITIES = [2, 4, 8, 10, 20, 20, 30, 50, 50, 100, 100, 200,
                      500, 1000, 10 ** 4, 10 ** 6]


class ReserveSchedule(Schedule):
    """Schedules on which reservations happen: a few hot keys, each the
    current one for a while, many acquires on it a few ms apart from
    every client, limits big enough for a batch (c = C*S/100 >= 2) and
    some small enough to be reached (short grants, denials). Each client
    (URL) has its own clock skew, a constant offset; some events are
    late (earlier than the client's clock); limit changes keep the
    algorithm and period (state carries over); composites of two or
    three rules; peeks, acquires at most, refunds, settles and resets
    from any client."""

    def __init__(self, rng, model, events, clients):
        Schedule.__init__(self, rng, model, events)
        self.script = []
        self.clients = clients
        self.client_skew = [rng.choice([0, 0, rng.randint(-300, 300)])
                            for _ in range(clients)]
        hot = ["hot:a", "hot:b", "hot:ü", "hot:d"]
        self.hot = [self.profile(k, a) for k, a in zip(hot, M.ALGORITHMS)]
        self.cold = [self.profile("cold:%d" % i) for i in range(20)]
        self.current = self.hot[0]
        self.script = self.bucket_refund() + self.same_ruleset()
        self.base = max(e["t"] for e in self.script) + 1

    def same_ruleset(self):
        """The first URL's: one ruleset written two ways (a bucket's
        burst left out is its limit) is one ruleset: the second acquire
        uses the lot the first took."""
        rules = ["token:100/1s", "token:100/1000ms,burst=100"]
        out = []
        for n, (rule, cost) in enumerate(zip(rules, [4, 1])):
            out.append({"t": 10 ** 6 + 10 + n, "key": "script:same",
                        "rule": rule, "cost": cost, "op": "acquire"})
            out += [{"t": 10 ** 6 + 10 + n, "key": "script:pad",
                     "rule": "fixed:1/1s", "op": "peek"}
                    for _ in range(self.clients - 1)]
        return out

    def bucket_refund(self):
        """The first URL's (a reserving one): a bucket's units held long
        past their charge lapse: given back after the bucket refilled and
        was emptied again, they would be admitted twice (B = 100, L*h/P
        below 1). The other URLs peek meanwhile."""
        mine = [(1000, 4, "acquire"), (10 ** 6, 100, "acquire_at_most"),
                (10 ** 6 + 1, 4, "acquire"), (10 ** 6 + 2, 4, "acquire")]
        out = []
        for t, cost, op in mine:
            out.append({"t": t, "key": "script:bucket", "cost": cost,
                        "rule": "token:1/1s,burst=100", "op": op})
            out += [{"t": t, "key": "script:pad", "rule": "fixed:1/1s",
                     "op": "peek"} for _ in range(self.clients - 1)]
        return out

    def profile(self, key, first=None):
        rng = self.rng
        algs = rng.sample(M.ALGORITHMS, rng.randint(1, 3))
        if first is not None and first not in algs:
            algs[0] = first
        slots, seen = [], set()
        for alg in algs:
            # A hot key's first slot surely reserves (h >= 25 ms, c >= 2
            # at S = 10 %); the others may not.
            sure = first is not None and not slots
            period = rng.choice([p for p in RESERVE_PERIODS
                                 if p >= 250 or not sure])
            tz = 0
            if alg in M.WINDOWED and rng.random() < 0.3:
                tz = rng.randint(-56, 56) * 15 * 60000
            count = rng.choice([1, 1, 2, 3])
            variants = [self.variant(alg, 20 if sure else 0)
                        for _ in range(count)]
            slot = Slot(alg, period, tz, variants)
            if slot.ident not in seen:
                seen.add(slot.ident)
                slots.append(slot)
        return Profile(key, slots)

    def variant(self, alg, least):
        cap = self.rng.choice([c for c in RESERVE_CAPACITIES if c >= least])
        if alg not in M.BUCKETS or self.rng.random() < 0.5:
            return (cap, cap)
        return (self.rng.randint(1, 2 * cap), cap)

    def next(self, i):
        self.which = i % self.clients
        if self.script:
            return self.script.pop(0), []
        return Schedule.next(self, i)

    # Mostly a few ms, sometimes past a window or a hold, rarely a jump.
    STEPS = ((0.5, 0, 0), (0.85, 1, 3), (0.96, 4, 40), (0.995, 41, 3000),
             (1.0, 10 ** 4, 10 ** 7))

    def fresh(self):
        rng = self.rng
        if rng.random() < 0.01:
            return self.lease_event(), []
        if rng.random() < 0.02:
            self.current = rng.choice(self.hot)
        r = rng.random()
        prof = self.current if r < 0.85 else \
            rng.choice(self.hot) if r < 0.95 else rng.choice(self.cold)
        n = 1 if rng.random() < 0.75 or len(prof.slots) < 2 else \
            rng.randint(2, min(3, len(prof.slots)))
        # The slots in the profile's order: one ruleset per choice of
        # rules, whatever the sample's order.
        if n == 1 and rng.random() < 0.6:
            slots = prof.slots[:1]  # a ruleset that stays: batches
        else:
            slots = sorted(rng.sample(prof.slots, n), key=prof.slots.index)
        used = [(s, self.variant_of(s)) for s in slots]
        t = self.base + self.client_skew[self.which]
        if rng.random() < 0.03:
            t -= rng.randint(1, 300)  # a late request
        t = max(0, min(TOP, t))
        cost = self.pick_cost(min(v[1] for _, v in used))
        r = rng.random()
        op = ("acquire" if r < 0.84 else "peek" if r < 0.9 else
              "acquire_at_most" if r < 0.94 else "refund" if r < 0.97
              else "settle" if r < 0.985 else "reset")
        ev = self.event(prof.key, used, t, cost, op)
        if op == "settle":
            # Beside a handle's lots, as a refund: the settle goes to the
            # backend and leaves them (SEMANTICS, "settle").
            self.settle_amounts(ev, cost, min(v[1] for _, v in used))
        return ev, [(s.ident, v) for s, v in used]

    def variant_of(self, slot):
        """Mostly the slot's first (limit, burst): limit changes are
        rarer than in the plain schedule, so that batches happen."""
        if len(slot.variants) == 1 or self.rng.random() < 0.9:
            return slot.variants[0]
        return self.rng.choice(slot.variants)

    def pick_cost(self, cap):
        rng, r = self.rng, self.rng.random()
        if r < 0.75:
            return 1
        if r < 0.95:
            return rng.randint(1, max(1, min(cap, 5)))
        if r < 0.99:
            return rng.randint(1, cap)
        return cap + rng.randint(1, 3)


# ------------------------------------------------------------- the figures


class Figures:
    """What the run covered."""

    def __init__(self, algs):
        self.n = {k: 0 for k in ["events", "allowed", "denied", "late",
                                 "late_after_denial", "late_after_peek",
                                 "composites", "limit_changes", "resets",
                                 "peeks", "at_most", "partial_grants",
                                 "refunds", "never_fit", "unsupported",
                                 "expiry_readings", "replaced",
                                 "top_range", "tz", "big", "leases",
                                 "leases_denied", "releases",
                                 "binding_later", "binding_own_reset",
                                 "binding_rounded", "binding_refund",
                                 "block_rules", "blocked", "block_stored",
                                 "settles", "settles_over",
                                 "waits_after_settle",
                                 "by_name", "by_name_allowed",
                                 "by_name_denied", "limiter_sets",
                                 "overrides", "unoverrides", "allowlisted",
                                 "denylisted", "nolimiter"]}
        self.in_deficit = set()
        self.per_alg = {a: 0 for a in algs}
        self.last_variant = {}
        self.last_on_key = {}
        self.charged_at = {}

    def count(self, ev, used, answer):
        n, key, t = self.n, ev["key"], ev["t"]
        n["events"] += 1
        if is_lease(ev):
            n["releases"] += ev["op"] == "release"
            n["leases"] += ev["op"] == "lease"
            n["leases_denied"] += answer.get("allowed") is False
            return
        rules = M.parse_rules(ev["rule"])
        for r in rules:
            self.per_alg[r.alg] += 1
        n["composites"] += len(rules) > 1
        # A composite's binding rule: a later one than the first, its own
        # reset apart from the key's, rounded (11 significant bits), and
        # in a refund's answer.
        if "rule" in answer:
            n["binding_later"] += answer["rule"] > 0
            own = answer["rule_reset_ms"] != answer["reset_after_ms"]
            n["binding_own_reset"] += own
            n["binding_rounded"] += own and answer["rule_reset_ms"] >= 2048
            n["binding_refund"] += ev.get("op") == "refund"
        n["top_range"] += t > TOP - 2 * 10 ** 6
        op = ev.get("op", "acquire")
        n["resets"] += op == "reset"
        n["peeks"] += op == "peek"
        n["at_most"] += op == "acquire_at_most"
        n["partial_grants"] += 0 < answer.get("granted", 0) < ev.get("cost",
                                                                     1)
        n["refunds"] += op == "refund"
        n["settles"] += op == "settle"
        if op == "settle" and ev["actual"] > ev["reserved"]:
            n["settles_over"] += 1
            self.in_deficit.add(key)
        elif op != "peek" and "allowed" in answer:
            if key in self.in_deficit and answer["allowed"] is False \
                    and answer.get("retry_after_ms", -1) >= 0:
                n["waits_after_settle"] += 1
            self.in_deficit.discard(key)
        self.count_changes(key, used)
        if op != "reset":
            self.count_late(ev, rules)
        n["tz"] += any(r.tz for r in rules)
        n["big"] += any(r.capacity >= 10 ** 6 or r.period >= 10 ** 8
                        for r in rules)
        self.last_on_key[key] = (t, op, answer)
        if "allowed" in answer:
            n["allowed" if answer["allowed"] else "denied"] += 1
            n["never_fit"] += op != "acquire_at_most" and any(
                ev.get("cost", 1) > r.capacity
                                  for r in rules)
            if answer["allowed"] and op in ("acquire", "acquire_at_most"):
                for r in rules:
                    self.charged_at[(key, r.slot)] = max(
                        t, self.charged_at.get((key, r.slot), 0))

    def count_named(self, ev, answer):
        """Events of named limiters, by kind, and their answers."""
        n, op = self.n, ev.get("op", "acquire")
        n["events"] += 1
        n["by_name"] += op in ("acquire", "peek", "reset")
        n["limiter_sets"] += op == "limiter_set"
        n["overrides"] += op == "override"
        n["unoverrides"] += op == "unoverride"
        n["allowlisted"] += answer.get("status") == "allowlisted"
        n["denylisted"] += answer.get("status") == "denylisted"
        n["nolimiter"] += answer.get("error", "").startswith("nolimiter")
        if "allowed" in answer and "status" not in answer:
            n["by_name_allowed" if answer["allowed"] else
              "by_name_denied"] += 1

    def count_changes(self, key, used):
        changed = False
        for ident, variant in used:
            old = self.last_variant.get((key, ident))
            changed |= old is not None and old != variant
            self.last_variant[(key, ident)] = variant
        self.n["limit_changes"] += changed

    def count_late(self, ev, rules):
        """Late: earlier than the latest charge of one of its slots."""
        key, t = ev["key"], ev["t"]
        late = any(t < self.charged_at.get((key, r.slot), -1)
                   for r in rules)
        if not late:
            return
        self.n["late"] += 1
        prev = self.last_on_key.get(key)
        if prev and t < prev[0]:
            if prev[1] == "peek":
                self.n["late_after_peek"] += 1
            elif prev[2].get("allowed") is False:
                self.n["late_after_denial"] += 1

    def line(self, seconds, notes):
        parts = ["%s=%d" % kv for kv in self.n.items()]
        parts += ["%s=%d" % kv for kv in self.per_alg.items()]
        parts.append("seconds=%.1f" % seconds)
        text = "# " + " ".join(parts)
        for note in sorted(notes):
            text += "\n# note: " + note
        return text


# ------------------------------------------------------------- the checking


def is_lease(ev):
    return ev.get("op") in ("lease", "release")


# Named limiters: their names (one never given rules) and clients.
NAMES = ["nl:a", "nl:é"]
CLIENTS = ["c1", "c2", "vip", "ü:3"]
LISTED = {
    "unlimited": {"allowed": True, "limit": 0, "remaining": 0,
                  "retry_after_ms": -1, "reset_after_ms": 0,
                  "status": "allowlisted"},
    "deny": {"allowed": False, "limit": 0, "remaining": 0,
             "retry_after_ms": -1, "reset_after_ms": 0,
             "status": "denylisted"}}


def is_named(ev):
    return "limiter" in ev


NAMED_HISTORY = "(named limiters)"  # the history all their events share


class Named:
    """What the events set of named limiters: each name's rules and each
    (name, client)'s override (SEMANTICS, "Named limiters"). A decision
    by name is the decision of its rules on a key of its own, modelled as
    a keyed event on "lim:NAME/CLIENT"."""

    def __init__(self):
        self.rules, self.over = {}, {}

    def equivalent(self, ev):
        """The keyed event a decision by name is (None: an op on the
        rules or overrides, a name without rules, or a listed client's
        acquire or peek, which no state answers)."""
        op = ev.get("op", "acquire")
        name, client = ev["limiter"], ev.get("client", "")
        if op not in ("acquire", "peek", "reset") or name not in self.rules:
            return None
        ov = self.over.get((name, client))
        if ov in LISTED and op != "reset":
            return None
        rule = ov if ov is not None and ov not in LISTED else \
            self.rules[name]
        keyed = {"t": ev["t"], "key": "lim:%s/%s" % (name, client),
                 "rule": rule, "op": op}
        if op != "reset":
            keyed["cost"] = ev.get("cost", 1)
        return keyed

    def judge(self, model, spec, ev, actual):
        """(ok, expected) for an event of a named limiter, applied."""
        op = ev.get("op", "acquire")
        name, client = ev["limiter"], ev.get("client", "")
        model.note_time(ev["t"])
        if op == "limiter_set":
            self.rules[name] = ev["rule"]
            want = {"set": True}
            return actual == want, want
        if name not in self.rules and op != "unoverride":
            ok = actual.get("error", "").startswith("nolimiter: ")
            return ok, {"error": "nolimiter: ..."}
        if op == "override":
            self.over[(name, client)] = ev["override"]
            want = {"set": True}
            return actual == want, want
        if op == "unoverride":
            want = {"deleted": self.over.pop((name, client), None)
                    is not None}
            return actual == want, want
        keyed = self.equivalent(ev)
        if keyed is None:
            want = LISTED[self.over[(name, client)]]
            return actual == want, want
        return judge(model, spec, keyed, actual)


def judge_lease(model, ev, actual):
    """A lease: the answer, and an id (a new one) exactly when admitted;
    a release: {"released": true}. Applied to the model's leases."""
    key, t = ev["key"], ev["t"]
    model.note_time(t)
    if ev["op"] == "release":
        model.leases.release(key, ev["lease"])
        want = {"released": True}
        return actual == want, want
    want = model.leases.acquire(key, ev["max"], ev["lease_ms"], t)
    got = dict(actual)
    lid = got.pop("lease", None)
    fresh = isinstance(lid, str) and lid != "" and not any(
        lid in held for held in model.leases.keys.values())
    if got != want or (lid is not None) != want["allowed"] or \
            (lid is not None and not fresh):
        return False, dict(want, lease="(an id no live lease has)") \
            if want["allowed"] else want
    if lid is not None:
        model.leases.add(key, lid, t + ev["lease_ms"])
    return True, actual


def refused(spec, ev):
    """The URL refuses the event's algorithms, or its op: "refund" all
    refunds, "window-refund" those of fixed, sliding or log rules, "block"
    every decision on rules with a block but refunds and settles, "force"
    a settle's excess (a settle below is a refund); "ceiling" refuses an
    excess that would pass a rule's ceiling (judge asks the model)."""
    rules = M.parse_rules(ev["rule"])
    op = ev.get("op", "acquire")
    return (any(r.alg in spec.unsupported for r in rules)
            or op in spec.unsupported
            or ("block" in spec.unsupported and op not in ("refund", "settle")
                and any(r.block for r in rules))
            or (op == "settle" and ev["actual"] > ev["reserved"]
                and "force" in spec.unsupported)
            or (op == "settle" and ev["actual"] <= ev["reserved"]
                and "refund" in spec.unsupported)
            or (op in ("refund", "settle") and "window-refund" in
                spec.unsupported and ev.get("actual", 0) <=
                ev.get("reserved", 0)
                and any(r.alg not in M.BUCKETS for r in rules)))


def judge(model, spec, ev, actual):
    """Check one answer and apply it to the model: (ok, expected). When
    the answer fits readings that leave different states, ok is None."""
    op = ev.get("op", "acquire")
    if is_lease(ev):
        return judge_lease(model, ev, actual)
    if op == "settle" and ev["actual"] > ev["reserved"] and \
            "ceiling" in spec.unsupported and \
            "unsupported" in actual.get("error", "") and model.clamps(ev):
        # Charged at once, then taken back: nothing changed.
        model.note_time(ev["t"])
        return True, actual
    if refused(spec, ev):
        if "unsupported" in actual.get("error", ""):
            model.note_time(ev["t"])
            return True, actual
        if op == "reset" and actual == {"reset": True}:
            model.apply(ev, model.outcomes(ev)[0])
            return True, actual
        return False, {"error": "... unsupported ..."}
    outcomes = model.outcomes(ev)
    matches = [o for o in outcomes if o.answer == actual]
    if not matches:
        want = outcomes[0].answer
        if len(outcomes) > 1:
            want = {"any of": [o.answer for o in outcomes]}
        return False, want
    model.apply(ev, matches[0])
    return (True if len(matches) == 1 else None), actual


def parse_answer(text):
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else {"unparsed": text}
    except ValueError:
        return {"unparsed": text}


def replace_if_ambiguous(model, ev):
    """An event whose answer could not tell which expiry reading the
    backend took becomes a reset of its key and rule."""
    if ev.get("op", "acquire") == "reset" or is_lease(ev):
        return ev, False
    if model.resolvable(model.outcomes(ev)):
        return ev, False
    return as_reset(ev), True


def as_reset(ev):
    return {"t": ev["t"], "key": ev["key"], "rule": ev["rule"],
            "op": "reset"}


TRAFFIC = ("asked", "reserved", "refunded", "lapsed")
# The replay prints {"reset": true} alone, without the units the reset
# made lapse; SEMANTICS' last bullet wants "lapsed": N at that event
# (reported). Until it does, a reset's line may omit it: the drop itself
# is still checked (no later local admission from those units).
RESET_SHOWS_LAPSE = False


def traffic_in_place(keys):
    """SEMANTICS, the replay: the traffic fields come after reset_after_ms
    (and the rule fields), before status, in TRAFFIC's order."""
    at = [i for i, k in enumerate(keys) if k in TRAFFIC]
    if not at:
        return True
    names = [keys[i] for i in at]
    before = keys[:at[0]]
    return (at == list(range(at[0], at[0] + len(at)))
            and names == [k for k in TRAFFIC if k in names]
            and before and before[-1] in ("reset_after_ms", "rule_reset_ms")
            and keys[at[-1] + 1:] in ([], ["status"]))


def rules_id(rules):
    """A ruleset by value, rule by rule in order: what a reservation is
    kept per (with the key)."""
    return tuple((r.alg, r.limit, r.period, r.burst, r.tz) for r in rules)


class Judge:
    """Every answer of every URL checked against one model of the
    backend's state, one ledger of the admissions (the guarantee) and,
    per reserving URL, its reservations (SEMANTICS, "Reservations").

    A reserving URL's event is applied as the CLI reports its traffic:
    (1) the refund of R, (2) the acquire, decided by the model as any
    other, (3) the acquire at most of A, whose grant must be G; a local
    admission ("status": "reserved") must come from a valid reservation
    holding the cost, with SEMANTICS' fields, and must come whenever one
    is.
    """

    def __init__(self, specs):
        self.specs = specs
        self.model = M.Model(trusted_floor(specs))
        holds = [sp.reserve[0] for sp in specs if sp.reserve]
        most = max(holds, default=0)
        self.ledger = M.Ledger(lambda r: min(most, r.period // 10))
        self.ledger.held_units = self.held_units
        self.held = [{} for _ in specs]  # (key, rules_id) -> Reservation
        self.n = {k: 0 for k in [
            "local", "local_units", "batches", "asked", "granted",
            "short_grants", "zero_grants", "refunds", "refunded",
            "lapses", "lapsed", "reset_lapses", "late_kept", "refills",
            "from_newer", "promoted", "kept", "merged", "most_held",
            "batch_readings", "batch_ambiguous"]}
        self.local_by = [0 for _ in specs]
        self.named = Named()

    def held_units(self, key, rule, k):
        """Units held on the key by any handle in reservations whose
        ruleset has the rule's slot (charged in window k, when given)."""
        total = 0
        for held in self.held:
            for ident, lots in held.items():
                for res in lots:
                    if ident[0] != key or res.u == 0:
                        continue
                    if any(r.slot == rule.slot and (
                            k is None or M.window_of(r, res.t0)[0] == k)
                           for r in res.rules):
                        total += res.u
        return total

    @staticmethod
    def ident(ev):
        """What a reservation is kept per: the key and the ruleset by
        value (SEMANTICS keeps state by value: "1s" is "1000ms", and a
        bucket's burst left out is its limit)."""
        return ev["key"], rules_id(M.parse_rules(ev["rule"]))

    # -- one event

    def judge(self, which, ev, actual):
        """(ok, expected) as judge() says, for the URL `which`."""
        spec = self.specs[which]
        if is_named(ev):
            keyed = self.named.equivalent(ev)
            ok, want = self.named.judge(self.model, spec, ev, actual)
            if ok is not False and keyed is not None:
                broken = self.admissions(spec, keyed, actual)
                if broken:
                    return False, {"guarantee broken": broken}
            return ok, want
        if spec.reserve and not is_lease(ev):
            return self.reserving(which, spec, ev, dict(actual))
        ok, want = judge(self.model, spec, ev, actual)
        if ok is not False:
            broken = self.admissions(spec, ev, actual)
            if broken:
                return False, {"guarantee broken": broken}
        return ok, want

    def admissions(self, spec, ev, answer):
        """The ledger after an answer the model accepted: what the
        backend charged and admitted, refunded or forgot."""
        if is_lease(ev) or "error" in answer:
            return None
        op, key, t = ev.get("op", "acquire"), ev["key"], ev["t"]
        rules = M.parse_rules(ev["rule"])
        if op == "reset":
            self.ledger.reset(key, rules, t)
        elif op == "refund":
            self.ledger.refunded(key, rules, ev.get("cost", 1), t)
        elif op == "settle" and ev["actual"] <= ev["reserved"]:
            self.ledger.refunded(key, rules, ev["reserved"] - ev["actual"], t)
        elif op == "settle":
            # Charged, not admitted: the guarantee bounds admissions; the
            # ledger learns only the time it was charged at.
            self.ledger.forced(key, rules, t)
        elif op == "acquire" and answer.get("allowed"):
            self.ledger.charged(key, rules, t)
            return self.ledger.admitted(key, rules, ev.get("cost", 1), t)
        elif op == "acquire_at_most" and answer.get("granted", 0) > 0:
            self.ledger.charged(key, rules, t)
            return self.ledger.admitted(key, rules, answer["granted"], t)
        return None

    def reserving(self, which, spec, ev, actual):
        op, key, t = ev.get("op", "acquire"), ev["key"], ev["t"]
        if not traffic_in_place(list(actual)):
            return False, {"traffic": "after reset_after_ms and the rule "
                           "fields, before status, in the order %s" % (
                               ", ".join(TRAFFIC))}
        traffic = {k: actual.pop(k) for k in TRAFFIC if k in actual}
        rules = M.parse_rules(ev["rule"])
        if op == "reset":
            return self.own_reset(which, spec, ev, actual, traffic)
        if op != "acquire" or refused(spec, ev):
            # As without reservations, the lots untouched.
            if traffic:
                return False, {"no reservation traffic": True}
            return self.plain(spec, ev, actual)
        cost, ident = ev.get("cost", 1), self.ident(ev)
        lots = self.held[which].get(ident, [])
        used = next((lot for lot in lots
                     if lot.u >= cost and lot.valid(t)), None)
        if used is not None:
            return self.local(which, spec, ev, actual, traffic, lots, used)
        if actual.get("status") == "reserved":
            return False, {"not local": "no valid lot holds %d (%s)" % (
                cost, describe_lots(lots, t))}
        if any(lot.u > 0 and t < lot.t0 for lot in lots):
            # A clock behind a lot's t0: to the backend alone, the lots
            # stay as they are.
            if traffic:
                return False, {"clock behind, no reservation traffic": True}
            self.n["late_kept"] += 1
            return self.plain(spec, ev, actual)
        # A miss: (1) one refund of the units that can be given back;
        # those that cannot and are still valid stay in their lots, the
        # rest lapse.
        want, kept = {"refunded": 0, "lapsed": 0}, []
        for lot in lots:
            if can_refund(spec, ev["rule"], rules, lot.t0, lot.end, t):
                want["refunded"] += lot.u
            elif lot.u > 0 and lot.valid(t):
                kept.append(lot)
            else:
                want["lapsed"] += lot.u
        want = {k: v for k, v in want.items() if v > 0}
        self.held[which].pop(ident, None)
        if kept:
            self.held[which][ident] = kept
            self.n["kept"] += 1
        got = {k: traffic[k] for k in ("refunded", "lapsed") if k in traffic}
        if got != want:
            return False, dict(want, then="the acquire's answer")
        if "refunded" in want:
            self.n["refunds"] += 1
            self.n["refunded"] += want["refunded"]
            back = {"t": t, "key": key, "rule": ev["rule"],
                    "cost": want["refunded"], "op": "refund"}
            self.model.apply(back, self.model.outcomes(back)[0])
            # After another handle's reset of the key, that refund gives
            # back units the reset forgot already: SEMANTICS' guarantee
            # does not cover it (reported); the ledger takes it as a
            # refund event (the same effect without reservations).
            for lot in lots:
                if lot.u > 0 and can_refund(spec, ev["rule"], rules,
                                            lot.t0, lot.end, t):
                    self.ledger.refunded(key, rules, lot.u, t,
                                         reset_after=lot.seq)
        if "lapsed" in want:
            self.n["lapses"] += 1
            self.n["lapsed"] += want["lapsed"]
        # (2) the acquire, as any other.
        ok, want = self.plain(spec, ev, actual)
        if ok is not True:
            return ok, want
        # (3) the acquire at most: its grant is the older lot.
        if "asked" not in traffic:
            if "reserved" in traffic:
                return False, {"reserved without asked": True}
            return True, actual
        return self.batch(which, spec, ev, rules, traffic)

    def local(self, which, spec, ev, actual, traffic, lots, used):
        """A local admission from the lot `used` (the older that covers
        the cost, else the newer), then maybe a refill."""
        key, t, cost = ev["key"], ev["t"], ev.get("cost", 1)
        before = describe_lots(lots, t)
        used.u -= cost
        a, gone = used.answer, t - used.t0
        reset = max(0, a["reset_after_ms"] - gone)
        want = {"allowed": True, "limit": a["limit"],
                "remaining": lots[-1].answer["remaining"] +
                sum(lot.u for lot in lots),
                "retry_after_ms": -1, "reset_after_ms": reset}
        if "rule" in a:
            # a's rule reset is its answer's field (rounded already),
            # less the time gone, rounded again.
            want["rule"] = a["rule"]
            want["rule_reset_ms"] = M.rounded_reset(
                max(0, a["rule_reset_ms"] - gone), reset)
        want["status"] = "reserved"
        if actual != want or "refunded" in traffic or "lapsed" in traffic:
            return False, dict(want, from_lots=before)
        self.n["from_newer"] += used is not lots[0]
        if len(lots) == 2 and lots[0].u == 0:
            lots.pop(0)  # the newer becomes the older
            self.n["promoted"] += 1
        self.n["local"] += 1
        self.n["local_units"] += cost
        self.local_by[which] += 1
        rules = M.parse_rules(ev["rule"])
        broken = self.ledger.admitted(key, rules, cost, t, since=used.seq,
                                      stamps=used.stamps)
        if broken:
            return False, {"guarantee broken": broken}
        if "asked" not in traffic:
            if "reserved" in traffic:
                return False, {"reserved without asked": True}
            return True, actual
        # A refill: only with no newer lot and the older below half its
        # size.
        if len(lots) != 1 or 2 * lots[0].u >= lots[0].g:
            return False, {"refill": "only when one lot holds less than "
                           "half its size (%s)" % describe_lots(lots, t)}
        self.n["refills"] += 1
        return self.batch(which, spec, ev, rules, traffic)

    def batch(self, which, spec, ev, rules, traffic):
        """An acquire at most of A at t: a miss's (3), or a refill. Its
        grant G must be the model's; the lot it makes is the older when
        no lot holds units, else the newer; when both hold units (a miss
        kept them), it joins the newer."""
        key, t = ev["key"], ev["t"]
        asked, granted = traffic["asked"], traffic.get("reserved", 0)
        hold, share = spec.reserve
        cap = M.cap_of(rules, share)
        lots = self.held[which].setdefault(self.ident(ev), [])
        held = sum(lot.u for lot in lots)
        if not M.may_reserve(rules, hold, share) or \
                not 2 <= asked <= cap - held:
            return False, {"asked": "2 to c - held = %d - %d, only when "
                           "h = %d >= 1" % (cap, held,
                                            M.hold_of(rules, hold))}
        self.n["most_held"] = max(self.n["most_held"], held + asked)
        most = {"t": t, "key": key, "rule": ev["rule"], "cost": asked,
                "op": "acquire_at_most"}
        # The acquire just charged may leave state that the clock has
        # passed (a late request): the grant tells the readings apart.
        outcomes = self.model.outcomes(most)
        matches = [o for o in outcomes if o.answer["granted"] == granted]
        if not matches:
            return False, {"asked": asked, "reserved": [
                o.answer["granted"] for o in outcomes]}
        self.n["batch_readings"] += len(outcomes) > 1
        self.n["batch_ambiguous"] += len(matches) > 1
        answer = matches[0].answer
        self.model.apply(most, matches[0])
        self.n["batches"] += 1
        self.n["asked"] += asked
        self.n["granted"] += granted
        self.n["zero_grants"] += granted == 0
        self.n["short_grants"] += 0 < granted < asked
        if granted > 0:
            # Charged before the ledger hears of it: a log stamps it at
            # its latest charge when the clock is behind that.
            stamps = {r.slot: self.ledger.stamp(key, r, t)
                      for r in rules if r.alg == "log"}
            self.ledger.charged(key, rules, t)
            keeps = M.windows_only(rules) and \
                refused(spec, {"rule": ev["rule"], "op": "refund"})
            lot = M.Reservation(rules, granted, t,
                                None if keeps else t + M.hold_of(rules, hold),
                                answer)
            lot.seq, lot.stamps = self.ledger.seq, stamps
            if not lots or lots[0].u == 0:
                lots[:] = [lots[1], lot] if len(lots) == 2 and \
                    lots[1].u > 0 else [lot]
            elif len(lots) == 1 or lots[1].u == 0:
                lots[1:] = [lot]
            elif lots[1].valid(t):
                # Both hold units: one lot of theirs, valid where both
                # are (the same windows; from this charge to the earlier
                # end), with this batch's answer.
                newer = lots[1]
                ends = [e for e in (lot.end, newer.end) if e is not None]
                merged = M.Reservation(rules, granted + newer.u, t,
                                       min(ends) if ends else None, answer)
                merged.g = granted + newer.g
                merged.seq = min(newer.seq, lot.seq)
                merged.stamps = {k: max(v, newer.stamps.get(k, v))
                                 for k, v in stamps.items()}
                lots[1] = merged
                self.n["merged"] += 1
            else:
                return False, {"batch": "a newer lot not valid at the "
                               "grant, kept by a miss (%s)" % describe_lots(
                                   lots, t)}
        return True, None

    def own_reset(self, which, spec, ev, actual, traffic):
        """A reset through the handle drops its lots on the key: their
        units lapse (the reset forgot them)."""
        held, key = self.held[which], ev["key"]
        gone = [k for k in held if k[0] == key]
        lapsed = sum(lot.u for k in gone for lot in held[k])
        for k in gone:
            del held[k]
        want = {"lapsed": lapsed} if lapsed else {}
        if not RESET_SHOWS_LAPSE and not traffic:
            want = {}
        if traffic != want:
            return False, dict(want, reset=True)
        self.n["reset_lapses"] += lapsed > 0
        self.n["lapsed"] += lapsed
        return self.plain(spec, ev, actual)

    def plain(self, spec, ev, actual):
        ok, want = judge(self.model, spec, ev, actual)
        if ok is not False:
            broken = self.admissions(spec, ev, actual)
            if broken:
                return False, {"guarantee broken": broken}
        return ok, want

    # -- before an event

    def local_expected(self, which, ev):
        """Will this event be admitted locally (no backend, no doubt)?"""
        spec = self.specs[which]
        if not spec.reserve or ev.get("op", "acquire") != "acquire" or \
                is_lease(ev) or is_named(ev):
            return False
        cost, t = ev.get("cost", 1), ev["t"]
        return any(lot.u >= cost and lot.valid(t)
                   for lot in self.held[which].get(self.ident(ev), []))

    def doubtful(self, which, ev):
        """A reserving URL's miss reads state that may have expired: the
        refund and the batch carry no answer that would tell which
        reading the backend took."""
        if not self.specs[which].reserve or is_lease(ev) or is_named(ev) \
                or ev.get("op", "acquire") != "acquire":
            return False
        if self.local_expected(which, ev):
            return False
        rules = M.parse_rules(ev["rule"])
        choices = self.model._expiry_choices(ev["key"], rules, ev["t"])
        next(choices)
        return next(choices, None) is not None

    def figures(self):
        parts = ["%s=%d" % kv for kv in self.n.items()]
        parts += ["%s=%d" % kv for kv in self.ledger.n.items()]
        parts.append("local_by_url=%s" % ",".join(
            "%d" % n if spec.reserve else "-"
            for n, spec in zip(self.local_by, self.specs)))
        return "# reserve: " + " ".join(parts)


def can_refund(spec, text, rules, t0, end, t):
    """SEMANTICS: given back only in t0's windows, within the hold (the
    lot's end) when the ruleset has a bucket (what it charged may have
    drained since), with no log rule, on a backend that takes the
    refund."""
    ev = {"rule": text, "op": "refund"}
    bucket = any(r.alg in M.BUCKETS for r in rules)
    return (M.same_windows(rules, t0, t)
            and t0 <= t and (not bucket or t < end)
            and not any(r.alg == "log" for r in rules)
            and not refused(spec, ev))


def describe_lots(lots, t):
    if not lots:
        return "no lot held"
    return "; ".join("lot u=%d of %d t0=%d until %s, %s at %d, a=%s" % (
        lot.u, lot.g, lot.t0,
        "its windows' end" if lot.end is None else "%d" % lot.end,
        "valid" if lot.valid(t) else "not valid", t,
        json.dumps(lot.answer)) for lot in lots)


class Run:
    """One run: the processes, the model, the schedule, the figures."""

    def __init__(self, opts):
        self.opts = opts
        self.seed = opts.seed if opts.seed is not None else \
            random.SystemRandom().randrange(10 ** 9)
        self.timeout = opts.timeout or (
            120 if os.environ.get("SLUICE_WRAP") else 30)
        self.notes, self.history = set(), {}
        draw = random.Random(self.seed ^ 0x5eed)
        for spec in opts.urls:
            if spec.reserve == "random":
                spec.reserve = (draw.randint(RESERVE_MS_LOW, 500),
                                draw.randint(10, 50))
        self.judge = Judge(opts.urls)
        self.model = self.judge.model
        self.notes.add("state trusted to live until reset_after + one "
                       "period%s; past that both readings pass" % (
                           ", and %d ms" % TTL_FLOOR
                           if self.model.ttl_floor else ""))
        self.reserving = any(spec.reserve for spec in opts.urls)
        if self.reserving:
            self.sched = ReserveSchedule(random.Random(self.seed),
                                         self.model, opts.events,
                                         len(opts.urls))
        else:
            self.sched = Schedule(random.Random(self.seed), self.model,
                                  opts.events)
        self.fig = Figures(M.ALGORITHMS)
        self.procs = []

    def start(self):
        prefix = fresh_prefix(self.seed)
        for spec in self.opts.urls:
            spec.url = resolve_url(spec, prefix, len(self.opts.urls) > 1)
            self.procs.append(start_replay(self.opts.bin, spec.url,
                                           self.timeout))

    def step(self, i):
        """Send event i; None when it matched, else a failure text."""
        ev, used = self.sched.next(i)
        which = i % len(self.procs)
        if is_named(ev):
            return self.step_named(i, which, ev)
        if self.judge.local_expected(which, ev):
            replaced = False
        else:
            ev, replaced = replace_if_ambiguous(self.model, ev)
            if not replaced and self.judge.doubtful(which, ev):
                ev, replaced = as_reset(ev), True
            self.fig.n["expiry_readings"] += not is_lease(ev) and len(
                self.model.outcomes(ev)) > 1
        self.fig.n["replaced"] += replaced
        if not is_lease(ev) and \
                ev.get("op") not in ("reset", "refund", "settle") and \
                any(r.block for r in M.parse_rules(ev["rule"])):
            first = self.model.outcomes(ev)[0]
            self.fig.n["block_rules"] += 1
            self.fig.n["blocked"] += first.blocked
            self.fig.n["block_stored"] += first.block is not None
        line = json.dumps(ev, ensure_ascii=False)
        self.history.setdefault(ev["key"], []).append((which, ev))
        actual = parse_answer(self.procs[which].ask(line))
        self.fig.n["unsupported"] += "unsupported" in actual.get("error", "")
        ok, want = self.judge.judge(which, ev, actual)
        self.fig.count(ev, used, actual)
        if ok is False:
            return self.failure(i, which, ev, want, actual)
        self.sched.feedback(ev, used, actual)
        return None

    def step_named(self, i, which, ev):
        """An event of a named limiter: a decision whose answer could not
        tell which expiry reading the backend took becomes a reset by
        name, as a keyed one does; all named events share one history
        (the reproducer needs the rules and overrides set before)."""
        keyed = self.judge.named.equivalent(ev)
        if keyed is not None and keyed["op"] != "reset" and \
                not self.model.resolvable(self.model.outcomes(keyed)):
            ev = {"t": ev["t"], "limiter": ev["limiter"],
                  "client": ev["client"], "op": "reset"}
            self.fig.n["replaced"] += 1
        line = json.dumps(ev, ensure_ascii=False)
        self.history.setdefault(NAMED_HISTORY, []).append((which, ev))
        actual = parse_answer(self.procs[which].ask(line))
        self.fig.n["unsupported"] += "unsupported" in actual.get("error", "")
        ok, want = self.judge.judge(which, ev, actual)
        self.fig.count_named(ev, actual)
        if ok is False:
            return self.failure(i, which, ev, want, actual)
        return None

    def failure(self, i, which, ev, want, actual):
        out = ["MISMATCH seed=%d event=%d url[%d]=%s" % (
            self.seed, i, which, self.opts.urls[which].url)]
        hist = self.history[NAMED_HISTORY if is_named(ev) else ev["key"]]
        out.append("last %d events on key %r (JSON Lines%s):" % (
            min(len(hist), HISTORY_SHOWN),
            NAMED_HISTORY if is_named(ev) else ev["key"],
            "; url[i] sends it" if len(self.procs) > 1 else ""))
        out += [fmt_line(w, e, len(self.procs))
                for w, e in hist[-HISTORY_SHOWN:]]
        out.append("expected: %s" % json.dumps(want, ensure_ascii=False))
        out.append("actual:   %s" % json.dumps(actual, ensure_ascii=False))
        try:
            out += minimize(self, hist)
        except ReplayError as e:
            out.append("(no reproducer: %s)" % e)
        return "\n".join(out)

    def finish(self, seconds):
        """Close every process: each must exit 0 (valgrind: no errors)."""
        if self.model.ttl_floor and seconds > TTL_FLOOR / 1000 * 0.9:
            self.notes.add("the run took nearly the TTL floor in real "
                           "time: a key may have expired on the server")
        bad = []
        for spec, p in zip(self.opts.urls, self.procs):
            rc = p.close()
            if rc != 0:
                bad.append("replay on %s exited %d: %s" % (
                    spec.url, rc, p.stderr()))
        return bad


def trusted_floor(specs):
    """How long stored state surely lives, besides SEMANTICS' own bound
    (reset_after plus one period). Redis keys get the TTL floor in real
    time, and a run is shorter than the floor, so the floor holds on the
    virtual clock too. mem:// expires on the virtual clock: only
    SEMANTICS' bound is trusted there."""
    if any(s.given.startswith("mem:") for s in specs):
        return 0
    return TTL_FLOOR


def fresh_prefix(seed):
    return "model-%d-%d:" % (seed, random.SystemRandom().randrange(10 ** 9))


def fmt_line(which, ev, nprocs):
    text = json.dumps(ev, ensure_ascii=False)
    return text if nprocs == 1 else "url[%d] %s" % (which, text)


# ------------------------------------------------------ the reproducer


def replay_fresh(run, events):
    """Replay events on fresh processes and a fresh prefix: the index of
    the first answer that disagrees with a fresh model, with both."""
    prefix = fresh_prefix(run.seed)
    procs = []
    try:
        for spec in run.opts.urls:
            procs.append(start_replay(run.opts.bin,
                                      resolve_url(spec, prefix,
                                                  len(run.opts.urls) > 1),
                                      run.timeout))
        fresh = Judge(run.opts.urls)
        ids = {}  # a lease's id in the run -> its id in this replay
        for n, (which, ev) in enumerate(events):
            if ev.get("op") == "release":
                ev = dict(ev, lease=ids.get(ev["lease"], ev["lease"]))
            line = json.dumps(ev, ensure_ascii=False)
            actual = parse_answer(procs[which].ask(line))
            if id(ev) in run.sched.id_of and "lease" in actual:
                ids[run.sched.id_of[id(ev)]] = actual["lease"]
            ok, want = fresh.judge(which, ev, actual)
            if ok is None:
                return None
            if not ok:
                return n, want, actual
        return None
    finally:
        for p in procs:
            p.kill()


def minimize(run, hist, budget_s=60):
    """Shrink the key's history to a short sequence that still ends in a
    disagreement: shortest failing suffix, then drop events one by one."""
    deadline = time.monotonic() + budget_s
    events = hist[-400:]
    found = replay_fresh(run, events)
    if found is None or found[0] != len(events) - 1:
        return ["(the key's last %d events alone do not reproduce it "
                "the same way: %s)" % (len(events), found)]
    for size in range(1, len(events)):
        if time.monotonic() > deadline:
            break
        cand = events[-size:]
        if is_repro(run, cand):
            events = cand
            break
    i = 0
    while i < len(events) - 1 and time.monotonic() < deadline:
        cand = events[:i] + events[i + 1:]
        if is_repro(run, cand):
            events = cand
        else:
            i += 1
    n, want, actual = replay_fresh(run, events)
    out = ["minimal reproducer (%d events, fresh prefix):" % len(events)]
    if any(e.get("op") == "release" for _, e in events):
        out.append("(a release names the lease its acquire answered in the "
                   "run: replayed, it names the new one)")
    out += [fmt_line(w, e, len(run.procs)) for w, e in events]
    out.append("expected: %s" % json.dumps(want, ensure_ascii=False))
    out.append("actual:   %s" % json.dumps(actual, ensure_ascii=False))
    return out


def is_repro(run, events):
    found = replay_fresh(run, events)
    return found is not None and found[0] == len(events) - 1


# -------------------------------------------------------------------- main


def main(argv):
    opts = parse_args(argv)
    run = Run(opts)
    print("# seed %d, %d events, %s" % (
        run.seed, opts.events, " ".join(describe(s) for s in opts.urls)))
    sys.stdout.flush()
    began = time.monotonic()
    failure = None
    try:
        run.start()
        for i in range(opts.events):
            failure = run.step(i)
            if failure:
                failure += "\n%d passed, 1 failed" % i
                break
    except ReplayError as e:
        failure = "replay failed (seed %d): %s\n0 passed, 1 failed" % (
            run.seed, e)
    if failure:
        for p in run.procs:
            p.kill()
        print(failure)
        return 1
    seconds = time.monotonic() - began
    bad = run.finish(seconds)
    if run.reserving:
        bad += never_local(run)
    for text in bad:
        print(text)
    print("%d passed, %d failed" % (opts.events, len(bad)))
    print(run.fig.line(seconds, run.notes))
    print(run.judge.figures())
    return 1 if bad else 0


def never_local(run):
    """A reserving URL that never admitted locally has tested nothing of
    reservations: a failure (the schedule is made for them)."""
    out = []
    for n, spec in enumerate(run.opts.urls):
        if spec.reserve and run.judge.local_by[n] == 0:
            out.append("url[%d] (reserve_ms=%d, reserve_share=%d) never "
                       "admitted locally (seed %d)" % (
                           n, spec.reserve[0], spec.reserve[1], run.seed))
    return out


def describe(spec):
    text = spec.given
    if spec.reserve:
        text += " (reserve_ms=%d, reserve_share=%d)" % spec.reserve
    if spec.unsupported:
        text += " (unsupported: %s)" % ",".join(sorted(spec.unsupported))
    return text


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
