// rlf.js - rate-limiter-flexible (RateLimiterRedis on ioredis) under the
// same load as sluice-bench: one key pattern, sequential or N in flight.
//   node rlf.js PORT MODE PATTERN SECONDS
//   MODE: seq | inflight50; PATTERN: hot | uniform | zipf
// Prints one JSON object: decisions/s, latency percentiles, admitted.
'use strict';
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const [port, mode, pattern, seconds] = process.argv.slice(2);
const NKEYS = 10000;
let rng = 0x2545f4914f6cdd1dn;
function rand() {
  rng ^= (rng << 13n) & 0xffffffffffffffffn;
  rng ^= rng >> 7n;
  rng ^= (rng << 17n) & 0xffffffffffffffffn;
  return Number(rng & 0xfffffffffffffn) / 4503599627370496;
}
const cdf = new Float64Array(NKEYS);
let h = 0;
for (let i = 0; i < NKEYS; i++) { h += 1 / (i + 1); cdf[i] = h; }
for (let i = 0; i < NKEYS; i++) cdf[i] /= h;
function nextKey() {
  if (pattern === 'hot') return 'k0';
  if (pattern === 'uniform') return 'k' + Math.floor(rand() * NKEYS);
  const u = rand();
  let lo = 0, hi = NKEYS - 1;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (cdf[mid] < u) lo = mid + 1; else hi = mid; }
  return 'k' + lo;
}

async function main() {
  const client = new Redis({ port: Number(port), host: '127.0.0.1', enableOfflineQueue: true });
  const limiter = new RateLimiterRedis({
    storeClient: client, points: 1000, duration: 1,
    keyPrefix: 'rlf' + process.pid,
  });
  const lat = [];
  let decisions = 0, admitted = 0, errors = 0;
  const deadline = process.hrtime.bigint() + BigInt(Math.round(Number(seconds) * 1e9));
  async function loop() {
    while (process.hrtime.bigint() < deadline) {
      const t0 = process.hrtime.bigint();
      try {
        await limiter.consume(nextKey());
        admitted++;
      } catch (e) {
        if (e instanceof Error) errors++;
      }
      lat.push(Number(process.hrtime.bigint() - t0) / 1000);
      decisions++;
    }
  }
  const start = process.hrtime.bigint();
  const n = mode === 'seq' ? 1 : Number(mode.replace('inflight', ''));
  await Promise.all(Array.from({ length: n }, loop));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  lat.sort((a, b) => a - b);
  const pct = (p) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(lat.length * p))] : 0;
  const version = require('rate-limiter-flexible/package.json').version;
  const client_version = require('ioredis/package.json').version;
  console.log(JSON.stringify({
    peer: 'rate-limiter-flexible ' + version, client: 'ioredis ' + client_version,
    what: 'RateLimiterRedis fixed 1000/1s',
    pattern, mode, decisions_per_s: decisions / secs, p50_us: pct(0.5),
    p99_us: pct(0.99), p999_us: pct(0.999), decisions, admitted, errors,
  }));
  client.disconnect();
}
main().catch((e) => { console.error(e); process.exit(1); });
