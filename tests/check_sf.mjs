// SPDX-License-Identifier: BSD-3-Clause
// check_sf.mjs - reads test_sf_fields' cases and parses every field with
// npm's structured-headers (an RFC 9651 parser that shares nothing with
// sluice), checking what draft-ietf-httpapi-ratelimit-headers-11 asks:
// RateLimit-Policy a List of String items with Integer q and w, qu a
// String of the unit; RateLimit one String item naming a policy, with
// Integer r and t and pk a Byte Sequence: the first 16 bytes of the
// key's SHA-256 (node's crypto) or the key's own bytes; Retry-After an
// Integer; and each field, serialized again by the parser, exactly what
// sluice wrote. Run by test_sf.sh --npm (the test run runs check_sf.py,
// which checks the same without the npm registry). Exit 1 on the first
// case that fails, with the case.
//   node check_sf.mjs CASES_FILE [MODULES_DIR]
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [file, modules] = process.argv.slice(2);
const entry = modules
  ? pathToFileURL(join(resolve(modules), "node_modules/structured-headers/dist/index.js")).href
  : "structured-headers";
const sf = await import(entry);
const units = [null, "content-bytes", "concurrent-requests"];

function expectedName(nameHex, i, count) {
  let name = Buffer.from(nameHex === "-" ? "" : nameHex, "hex");
  if (name.length === 0) name = Buffer.from("sluice");
  let s = "";
  for (const b of name) s += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : "_";
  return count > 1 ? `${s}-${i + 1}` : s;
}

function fail(c, why) {
  console.error(`FAIL: ${why}\n${c.head}\n${c.text}`);
  process.exit(1);
}

function isInt(v) {
  return typeof v === "number" && Number.isInteger(v);
}

const lines = readFileSync(file, "utf8").split("\n");
const cases = [];
for (let i = 0; i < lines.length; i++) {
  if (!lines[i].startsWith("case ")) continue;
  const [, unit, raw, count, nameHex, keyHex] = lines[i].split(" ");
  let j = i + 1, text = "";
  while (lines[j] !== "end") text += lines[j++] + "\n";
  cases.push({ head: lines[i], unit: +unit, raw: raw === "1", count: +count, nameHex, keyHex, text });
  i = j;
}
if (cases.length === 0) fail({ head: "", text: "" }, "no cases");
let pks = 0;
for (const c of cases) {
  const fields = new Map();
  for (const line of c.text.split("\n")) {
    if (line === "") continue;
    if (!line.endsWith("\r")) fail(c, "a line without CRLF");
    const colon = line.indexOf(": ");
    fields.set(line.slice(0, colon), line.slice(colon + 2, -1));
  }
  let policy, rl;
  try {
    policy = sf.parseList(fields.get("RateLimit-Policy"));
    rl = sf.parseList(fields.get("RateLimit"));
  } catch (e) {
    fail(c, `not a Structured Field List: ${e.message}`);
  }
  // Serialized again by the parser, each field is what sluice wrote: the
  // canonical form (an Integer is not a Decimal, a String not a Token).
  if (sf.serializeList(policy) !== fields.get("RateLimit-Policy") ||
      sf.serializeList(rl) !== fields.get("RateLimit"))
    fail(c, "not in the canonical form that structured-headers writes");
  if (policy.length !== c.count) fail(c, "one policy item a rule");
  const names = policy.map(([v]) => v);
  policy.forEach(([v, p], i) => {
    if (typeof v !== "string") fail(c, "a policy item's value is not a String");
    if (v !== expectedName(c.nameHex, i, c.count)) fail(c, `policy name ${v}`);
    if (!isInt(p.get("q")) || p.get("q") < 1) fail(c, "q");
    if (c.unit === 2 ? p.has("w") : !isInt(p.get("w")) || p.get("w") < 1) fail(c, "w");
    if (units[c.unit] === null ? p.has("qu") : p.get("qu") !== units[c.unit]) fail(c, "qu");
  });
  if (rl.length !== 1) fail(c, "RateLimit: one item");
  const [v, p] = rl[0];
  if (typeof v !== "string" || !names.includes(v)) fail(c, "RateLimit names no policy");
  if (!isInt(p.get("r")) || p.get("r") < 0 || !isInt(p.get("t")) || p.get("t") < 0) fail(c, "r, t");
  if (c.keyHex === "-") {
    if (p.has("pk")) fail(c, "a pk without a key");
  } else {
    const key = Buffer.from(c.keyHex, "hex");
    const want = c.raw ? key : createHash("sha256").update(key).digest().subarray(0, 16);
    const got = p.get("pk");
    if (!(got instanceof ArrayBuffer) || !Buffer.from(got).equals(want)) fail(c, "pk");
    if (!c.raw && Buffer.from(got).includes(key)) fail(c, "the raw key shows");
    pks++;
  }
  if (fields.has("Retry-After")) {
    const [ra] = sf.parseItem(fields.get("Retry-After"));
    if (!isInt(ra) || ra < 1) fail(c, "Retry-After");
  }
  for (const k of fields.keys())
    if (!["RateLimit-Policy", "RateLimit", "Retry-After"].includes(k)) fail(c, `field ${k}`);
}
console.log(`structured fields: ${cases.length} cases parsed by structured-headers, ${pks} partition keys checked`);
