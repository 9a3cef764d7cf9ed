#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check_sf.py - reads test_sf_fields' cases and parses every field with a
Structured Field parser written here from RFC 9651 (Lists, Items,
Parameters; Integers, Decimals, Strings, Tokens, Byte Sequences, Booleans),
sharing nothing with sluice's C, then checks what
draft-ietf-httpapi-ratelimit-headers-11 asks: RateLimit-Policy a List of
String items with Integer q and w, qu a String of the unit; RateLimit one
String item naming a policy, with Integer r and t and pk a Byte Sequence:
the first 16 bytes of the key's SHA-256 (Python's hashlib) or the key's
own bytes; Retry-After an Integer; and each field, serialized again
(RFC 9651 section 4.1), exactly what sluice wrote. tests/check_sf.mjs does
the same with npm's structured-headers where the npm registry is reachable
(test_sf.sh --npm). Exit 1 on the first case that fails, with the case.

    check_sf.py CASES_FILE
"""
import base64
import hashlib
import string
import sys

sys.dont_write_bytecode = True

TCHAR = set("!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits)
KEY_FIRST = set(string.ascii_lowercase + "*")
KEY_CHARS = set(string.ascii_lowercase + string.digits + "_-.*")
B64 = set(string.ascii_letters + string.digits + "+/=")


class Token(str):
    """An sf-token, apart from an sf-string."""


class ParseError(Exception):
    pass


class Parser:
    """RFC 9651 section 4.2, the parts a List of Items needs."""

    def __init__(self, text):
        self.s, self.i = text, 0

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self):
        c = self.peek()
        self.i += 1
        return c

    def skip_sp(self):
        while self.peek() == " ":
            self.i += 1

    def skip_ows(self):
        while self.peek() in (" ", "\t") and self.peek() != "":
            self.i += 1

    def list(self):
        self.skip_sp()
        members = []
        while self.i < len(self.s):
            members.append(self.item())
            self.skip_ows()
            if self.i >= len(self.s):
                return members
            if self.take() != ",":
                raise ParseError("a list member not followed by a comma")
            self.skip_ows()
            if self.i >= len(self.s):
                raise ParseError("a trailing comma")
        return members

    def whole_item(self):
        self.skip_sp()
        item = self.item()
        self.skip_sp()
        if self.i != len(self.s):
            raise ParseError("characters after the item")
        return item

    def item(self):
        return (self.bare(), self.params())

    def params(self):
        params = {}
        while self.peek() == ";":
            self.i += 1
            self.skip_sp()
            key = self.key()
            value = True
            if self.peek() == "=":
                self.i += 1
                value = self.bare()
            params[key] = value
        return params

    def key(self):
        if self.peek() not in KEY_FIRST or self.peek() == "":
            raise ParseError("a key must start with a lowercase letter or *")
        start = self.i
        while self.peek() in KEY_CHARS and self.peek() != "":
            self.i += 1
        return self.s[start:self.i]

    def bare(self):
        c = self.peek()
        if c == "-" or c.isdigit():
            return self.number()
        if c == '"':
            return self.string()
        if c == ":":
            return self.binary()
        if c == "?":
            self.i += 1
            b = self.take()
            if b not in ("0", "1"):
                raise ParseError("a boolean is ?0 or ?1")
            return b == "1"
        if c != "" and (c.isalpha() or c == "*"):
            return self.token()
        raise ParseError("no bare item at %r" % self.s[self.i:])

    def number(self):
        start, neg = self.i, self.peek() == "-"
        if neg:
            self.i += 1
        digits, dot = "", False
        while self.peek() != "" and (self.peek().isdigit() or
                                     (self.peek() == "." and not dot)):
            dot = dot or self.peek() == "."
            digits += self.take()
        if not digits or not digits[0].isdigit():
            raise ParseError("not a number at %r" % self.s[start:])
        if dot:
            whole, frac = digits.split(".")
            if len(whole) > 12 or not 1 <= len(frac) <= 3:
                raise ParseError("a decimal out of range")
            return ("decimal", float(("-" if neg else "") + digits))
        if len(digits) > 15:
            raise ParseError("an integer of more than 15 digits")
        return int(digits) * (-1 if neg else 1)

    def string(self):
        self.i += 1
        out = ""
        while True:
            c = self.take()
            if c == "":
                raise ParseError("a string without its closing quote")
            if c == "\\":
                n = self.take()
                if n not in ('"', "\\"):
                    raise ParseError("a bad escape in a string")
                out += n
            elif c == '"':
                return out
            elif not " " <= c <= "~":
                raise ParseError("a character a string may not hold")
            else:
                out += c

    def token(self):
        start = self.i
        self.i += 1
        while self.peek() != "" and (self.peek() in TCHAR or
                                     self.peek() in ":/"):
            self.i += 1
        return Token(self.s[start:self.i])

    def binary(self):
        self.i += 1
        end = self.s.find(":", self.i)
        if end < 0:
            raise ParseError("a byte sequence without its closing colon")
        text = self.s[self.i:end]
        if any(c not in B64 for c in text):
            raise ParseError("not base64 in a byte sequence")
        self.i = end + 1
        return base64.b64decode(text, validate=True)


def serialize_bare(v):
    """RFC 9651 section 4.1.3."""
    if isinstance(v, bool):
        return "?1" if v else "?0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, tuple):
        return ("%.3f" % v[1]).rstrip("0").rstrip(".") + (
            ".0" if float(v[1]).is_integer() else "")
    if isinstance(v, Token):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bytes):
        return ":" + base64.b64encode(v).decode() + ":"
    raise TypeError(v)


def serialize_item(item):
    v, params = item
    out = serialize_bare(v)
    for k, p in params.items():
        out += ";" + k + ("" if p is True else "=" + serialize_bare(p))
    return out


def serialize_list(members):
    return ", ".join(serialize_item(m) for m in members)


UNITS = [None, "content-bytes", "concurrent-requests"]


def expected_name(name_hex, i, count):
    name = bytes.fromhex("" if name_hex == "-" else name_hex) or b"sluice"
    s = "".join(chr(b) if 0x20 <= b < 0x7F else "_" for b in name)
    return "%s-%d" % (s, i + 1) if count > 1 else s


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check(case):
    head, text = case
    _, unit, raw, count, name_hex, key_hex = head.split(" ")
    unit, raw, count = int(unit), raw == "1", int(count)
    fields = {}
    for line in text.split("\n"):
        if not line:
            continue
        if not line.endswith("\r"):
            return "a line without CRLF"
        name, _, value = line[:-1].partition(": ")
        fields[name] = value
    if set(fields) - {"RateLimit-Policy", "RateLimit", "Retry-After"}:
        return "another field"
    try:
        policy = Parser(fields["RateLimit-Policy"]).list()
        rl = Parser(fields["RateLimit"]).list()
    except (ParseError, KeyError, ValueError) as e:
        return "not a Structured Field List: %s" % e
    if (serialize_list(policy) != fields["RateLimit-Policy"] or
            serialize_list(rl) != fields["RateLimit"]):
        return "not in its canonical serialization"
    if len(policy) != count:
        return "one policy item a rule"
    names = []
    for i, (v, p) in enumerate(policy):
        if not isinstance(v, str) or isinstance(v, Token):
            return "a policy item's value is not a String"
        if v != expected_name(name_hex, i, count):
            return "policy name %r" % v
        names.append(v)
        if not is_int(p.get("q")) or p["q"] < 1:
            return "q"
        if unit == 2:
            if "w" in p:
                return "a w for a concurrency"
        elif not is_int(p.get("w")) or p["w"] < 1:
            return "w"
        if UNITS[unit] is None:
            if "qu" in p:
                return "a qu for requests"
        elif p.get("qu") != UNITS[unit] or isinstance(p["qu"], Token):
            return "qu"
    if len(rl) != 1:
        return "RateLimit: one item"
    v, p = rl[0]
    if not isinstance(v, str) or isinstance(v, Token) or v not in names:
        return "RateLimit names no policy"
    if not all(is_int(p.get(k)) and p[k] >= 0 for k in ("r", "t")):
        return "r, t"
    if key_hex == "-":
        if "pk" in p:
            return "a pk without a key"
    else:
        key = bytes.fromhex(key_hex)
        want = key if raw else hashlib.sha256(key).digest()[:16]
        if p.get("pk") != want:
            return "pk"
        if not raw and key in p["pk"]:
            return "the raw key shows"
    if "Retry-After" in fields:
        try:
            ra, params = Parser(fields["Retry-After"]).whole_item()
        except ParseError as e:
            return "Retry-After: %s" % e
        if not is_int(ra) or ra < 1 or params:
            return "Retry-After"
    return None


def main():
    with open(sys.argv[1], newline="") as f:  # keep the CRs
        lines = f.read().split("\n")
    cases, i = [], 0
    while i < len(lines):
        if lines[i].startswith("case "):
            j, text = i + 1, ""
            while lines[j] != "end":
                text += lines[j] + "\n"
                j += 1
            cases.append((lines[i], text))
            i = j
        i += 1
    if not cases:
        print("FAIL: no cases")
        return 1
    pks = 0
    for case in cases:
        why = check(case)
        if why is not None:
            print("FAIL: %s\n%s\n%s" % (why, case[0], case[1]))
            return 1
        pks += case[0].split(" ")[5] != "-"
    print("structured fields: %d cases parsed (RFC 9651, check_sf.py), %d "
          "partition keys checked" % (len(cases), pks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
