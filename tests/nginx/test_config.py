#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_config.py - `nginx -t` with the module loaded: a good configuration
passes; each bad one fails with a message that names the directive and
the value it refuses (the library's own parsers check rules, URLs, TLS
files and limits files). No server is needed: the backends are mem:// or
a loopback port nothing listens on (a server that is down fails nothing).

    test_config.py --module SO --work DIR
"""
import os

import kit

ns = kit.args()
DEAD = "redis://127.0.0.1:%d" % kit.free_port()

GOOD = """
sluice_backend mem mem://;
sluice_backend redis %s?timeout_ms=100&fail=open;
sluice_zone $binary_remote_addr zone=perip backend=mem rules=fixed:10/1s;
sluice_zone $http_x_key zone=api backend=redis limiter=api fail=closed
            unit=tokens;
sluice_zone "global" zone=all backend=redis
            rules=token:100/1s,burst=20+fixed:10000/1d,block=15m fail=open;
sluice_limit zone=all;
server {
    listen 127.0.0.1:PORT0;
    sluice_limit_status 503;
    sluice_limit_log_level warn;
    location / { sluice_limit zone=perip; sluice_limit zone=api cost=$arg_n;
                 OK; }
    location /dry { sluice_limit zone=perip cost=3; sluice_limit_dry_run on;
                    sluice_headers off; OK; }
}
""" % DEAD

LIMITS = os.path.join(ns.work, "limits.yml")
with open(LIMITS, "w") as f:
    f.write("version: 1\nlimiters:\n  - name: api\n    rules: fixed:10/1x\n")

# (the http{} body, what the message must say: every string)
BAD = [
    ('sluice_backend r "bogus://x";', ['sluice_backend "r"', "bogus://x"]),
    ('sluice_backend r "redis://127.0.0.1:1?timeout_ms=abc";',
     ['sluice_backend "r"', "timeout_ms"]),
    ('sluice_backend r "redis://127.0.0.1:1?nosuch=1";',
     ['sluice_backend "r"', "nosuch"]),
    ('sluice_backend r "rediss://127.0.0.1:1?tls_ca_file=/nonexistent/ca";',
     ['sluice_backend "r"', "/nonexistent/ca"]),
    ('sluice_backend r "mem://?limits_file=%s";' % LIMITS,
     ['sluice_backend "r"', LIMITS, "fixed:10/1x"]),
    ('sluice_backend r mem://; sluice_backend r mem://;',
     ["sluice_backend", 'duplicate name "r"']),
    ('sluice_backend "a b" mem://;', ["sluice_backend", 'invalid name "a b"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:10/1x;',
     ['sluice_zone "z"', 'rules="fixed:10/1x"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:0/1s;',
     ['sluice_zone "z"', 'rules="fixed:0/1s"']),
    ('sluice_backend m mem://; sluice_zone zone=z rules=fixed:1/1s;',
     ['sluice_zone "z"', "needs a key"]),
    ('sluice_backend m mem://; sluice_zone $uri zone=z;',
     ['sluice_zone "z"', "rules=", "limiter="]),
    ('sluice_backend m mem://; '
     'sluice_zone $uri zone=z rules=fixed:1/1s limiter=x;',
     ['sluice_zone "z"', "either"]),
    ('sluice_backend m mem://; '
     'sluice_zone $uri zone=z rules=fixed:1/1s fail=maybe;',
     ['sluice_zone "z"', 'fail="maybe"']),
    ('sluice_backend m mem://; '
     'sluice_zone $uri zone=z rules=fixed:1/1s unit=to/kens;',
     ["sluice_zone", 'unit="to/kens"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s '
     'burst=3;', ["sluice_zone", '"burst=3"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=b@d rules=fixed:1/1s;',
     ["sluice_zone", 'zone="b@d"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s; '
     'sluice_zone $uri zone=z rules=fixed:2/1s;',
     ["sluice_zone", 'duplicate zone "z"']),
    ('sluice_backend m mem://; sluice_backend n mem://; '
     'sluice_zone $uri zone=z rules=fixed:1/1s;',
     ['sluice_zone "z"', "backend=", "2 sluice_backend"]),
    ('sluice_backend m mem://; '
     'sluice_zone $uri zone=z backend=other rules=fixed:1/1s;',
     ['sluice_zone "z"', '"other"']),
    ('sluice_backend m mem://; server { listen 127.0.0.1:PORT0; '
     'location / { sluice_limit zone=nope; } }',
     ["sluice_limit zone=nope", "nginx.conf:", 'no sluice_zone "nope"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s; '
     'server { listen 127.0.0.1:PORT0; location / { '
     'sluice_limit zone=z cost=-1; } }', ["sluice_limit", 'cost="-1"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s; '
     'server { listen 127.0.0.1:PORT0; location / { '
     'sluice_limit zone=z cost=abc; } }', ["sluice_limit", 'cost="abc"']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s; '
     'server { listen 127.0.0.1:PORT0; location / { '
     'sluice_limit zone=z; sluice_limit zone=z; } }',
     ["sluice_limit", 'zone "z" twice']),
    ('sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s; '
     'server { listen 127.0.0.1:PORT0; location / { '
     'sluice_limit zone=z size=1; } }', ["sluice_limit", '"size=1"']),
    ('server { listen 127.0.0.1:PORT0; sluice_limit_status 200; }',
     ["sluice_limit_status", 'code "200"', "400 to 599"]),
    ('server { listen 127.0.0.1:PORT0; sluice_limit_dry_run maybe; }',
     ['"sluice_limit_dry_run"', '"maybe"']),
    ('server { listen 127.0.0.1:PORT0; sluice_limit_log_level loud; }',
     ["sluice_limit_log_level", 'level "loud"']),
    # A named limiter has one shadow mode a backend.
    ('sluice_backend m mem://; sluice_zone $uri zone=z limiter=api; '
     'server { listen 127.0.0.1:PORT0; '
     'location /a { sluice_limit zone=z; sluice_limit_dry_run on; } '
     'location /b { sluice_limit zone=z; } }',
     ["sluice_limit zone=z", 'limiter "api"', "dry_run"]),
    # ... and one fail policy.
    ('sluice_backend m mem://; sluice_zone $uri zone=y limiter=api '
     'fail=open; sluice_zone $uri zone=z limiter=api fail=closed;',
     ['limiter "api"', "fail="]),
]


def main():
    n = kit.Nginx(ns, "good", GOOD)
    rc, out = n.test_config()
    kit.check(rc == 0 and "syntax is ok" in out,
              "the good configuration failed: %s" % out)
    for i, (body, says) in enumerate(BAD):
        n = kit.Nginx(ns, "bad%d" % i, body)
        rc, out = n.test_config()
        kit.check(rc != 0, "accepted: %s\n%s" % (body, out))
        for s in says:
            kit.check(s in out, "case %d: %r not in the message:\n%s\n"
                      "(configuration: %s)" % (i, s, out, body))
        # The message never shows a password of a URL.
        kit.check("hunter2" not in out, out)
    # A password in a bad URL stays out of the message.
    n = kit.Nginx(ns, "secret",
                  'sluice_backend r "redis://u:hunter2@127.0.0.1:1?x=1";')
    rc, out = n.test_config()
    kit.check(rc != 0 and 'sluice_backend "r"' in out and
              "hunter2" not in out, out)
    print("%d bad configurations refused, each naming its directive and "
          "value" % len(BAD))


kit.run(main)
