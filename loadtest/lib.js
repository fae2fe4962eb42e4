// lib.js — what the k6 scripts here share: their settings, the buyers'
// tokens, and the lines of the clients' record the runner checks
// (loadtest/harness, readConsole).
import http from 'k6/http';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';

export function env(name, def) {
  const v = __ENV[name];
  return v === undefined || v === '' ? def : v;
}
export function num(name, def) {
  const v = Number(env(name, def));
  if (!Number.isFinite(v)) throw new Error(`${name}=${__ENV[name]} is not a number`);
  return v;
}
// nums reads every setting named in defaults as a number.
export function nums(defaults) {
  return Object.fromEntries(Object.entries(defaults).map(([name, def]) => [name, num(name, def)]));
}

export const BASE_URLS = env('BASE_URLS', 'http://127.0.0.1:8080').split(',').map((u) => u.trim().replace(/\/+$/, '')).filter((u) => u);
if (BASE_URLS.length === 0) throw new Error('BASE_URLS is required');

const SHOPPER_SECRET = env('SHOPPER_SECRET', '');
const SHOPPER_AUDIENCE = env('SHOPPER_AUDIENCE', 'seckill');
const JWT_HEADER = encoding.b64encode(JSON.stringify({ alg: 'HS256', typ: 'JWT' }), 'rawurl');
export const SIGNED = SHOPPER_SECRET !== '';

// bearer returns the Authorization header of user: an HS256 token valid
// for an hour, signed with SHOPPER_SECRET (the service's auth.jwt.secret,
// from the environment), or nothing without it (auth.shopper none).
export function bearer(user) {
  if (!SIGNED) return {};
  const now = Math.floor(Date.now() / 1000);
  const claims = encoding.b64encode(JSON.stringify({ sub: user, aud: SHOPPER_AUDIENCE, iat: now, exp: now + 3600 }), 'rawurl');
  const sig = crypto.hmac('sha256', SHOPPER_SECRET, `${JWT_HEADER}.${claims}`, 'base64rawurl');
  return { Authorization: `Bearer ${JWT_HEADER}.${claims}.${sig}` };
}

export function errorCode(res) {
  try {
    const c = res.json('error.code');
    return typeof c === 'string' ? c : '';
  } catch (_) {
    return '';
  }
}

export function orderID(res) {
  try {
    return res.json('order_id');
  } catch (_) {
    return undefined;
  }
}

const unexpected = new Counter('unexpected_status'); // every script's threshold: count==0
let flagged = 0; // unexpected answers logged by this VU, bounded

// flag counts an answer outside the contract and logs the first few of each VU.
export function flag(kind, res, why) {
  unexpected.add(1, { kind, status: String(res.status) });
  if (flagged++ < 5) console.log(`unexpected ${kind} ${res.status} ${errorCode(res)} ${why}: ${String(res.body || res.error || '').slice(0, 200)}`);
}

export const JSON_HEADERS = { 'Content-Type': 'application/json' };

// buyOnce sends user's keyless order of one unit of sku to instance inst,
// once, and records it: "hist", and "unsure" when it got a 503 or no
// answer; an answer other than 201 or sold_out is flagged. The caller
// acknowledges a 201.
export function buyOnce(inst, sku, user, it, timeout) {
  const t0 = Date.now();
  const res = http.post(`${BASE_URLS[inst]}/api/v1/orders`, JSON.stringify({ sku_id: sku, user_id: user, quantity: 1 }), { headers: JSON_HEADERS, timeout });
  history({ it, call: 'order', attempt: 0, inst }, user, null, t0, Date.now(), res);
  if (res.status === 503 || res.status === 0) console.log(`unsure ${user}`);
  else if (res.status !== 201 && !(res.status === 409 && errorCode(res) === 'sold_out')) flag('order', res, 'not an answer an order may get');
  return res;
}

// history writes one line per order request for the linearizability
// check (loadtest/verify, Attempt): invocation and response time in ms,
// the VU, the iteration, the call (order, replay, conflict) and attempt,
// the instance, the buyer, the key, the quantity and the answer.
export function history(rec, user, key, t0, t1, res) {
  let id = '-';
  if (res.status === 200 || res.status === 201) id = String(orderID(res) || '-');
  console.log(`hist ${t0} ${t1} ${exec.vu.idInTest} ${rec.it} ${rec.call} ${rec.attempt} ${rec.inst} ${user} ${key === null ? '-' : key} ${rec.qty || 1} ${res.status} ${errorCode(res) || '-'} ${id}`);
}

const ADMIN = { ...JSON_HEADERS, Authorization: `Bearer ${env('ADMIN_TOKEN', '')}` };

// restock sets SKU sku's remaining stock to units through instance inst
// (ADMIN_TOKEN, from the environment) and records it for the history:
// "restock <call ms> <return ms> <instance> <stock> <status> <total_stock>";
// one not answered 200 has an unknown outcome. It returns the answer.
export function restock(inst, sku, units) {
  const t0 = Date.now();
  const res = http.put(`${BASE_URLS[inst]}/admin/v1/skus/${sku}/stock`, JSON.stringify({ stock: units }), { headers: ADMIN, timeout: '15s' });
  const total = res.status === 200 ? res.json('stock') + res.json('sold') : 0;
  console.log(`restock ${t0} ${Date.now()} ${inst} ${units} ${res.status} ${total}`);
  return res;
}

// stockLeft reads SKU sku's remaining stock through the first instance (-1: no answer).
export function stockLeft(sku) {
  const res = http.get(`${BASE_URLS[0]}/admin/v1/skus/${sku}`, { headers: ADMIN, timeout: '1s' });
  return res.status === 200 ? res.json('stock') : -1;
}
