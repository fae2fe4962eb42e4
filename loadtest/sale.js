// sale.js — a flash-sale spike against one SKU or several, for k6 (v1.8).
// The arrivals, the crowd, the keys and replays, the malformed share and
// the thresholds: README.md, "The load".
//
// The console output is the clients' record, held by the runner to the
// database (harness/k6.go, readConsole): "ack <order_id> <user>" for every
// order a buyer was told about, "unsure <user>" for a buyer left without
// an answer, "refused <key> <user> <code>" for a keyed buyer refused after
// an attempt of unknown outcome, "unavail <unix ms> <status>" for every
// 503 or dropped connection, lib.js's "hist" for every order request and
// "restock" for each restock (RESTOCKS, see restocker). With SKU_IDS,
// iteration i buys SKU i mod N and its buyer's id names its SKU
// ("<run>-s<sku>-u<i>"), so that the record splits by SKU.
//
// Run it through `make loadtest`; by hand:
//   k6 run -e BASE_URLS=http://127.0.0.1:8080 -e SKU_ID=1 loadtest/sale.js
import http from 'k6/http';
import exec from 'k6/execution';
import { sleep } from 'k6';
import { Counter } from 'k6/metrics';
import { BASE_URLS, JSON_HEADERS, SIGNED, bearer, env, errorCode, flag, history, nums, orderID, restock, stockLeft } from './lib.js';

const SKU_IDS = env('SKU_IDS', env('SKU_ID', '')).split(',').map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0);
const SKU_ID = SKU_IDS.length > 0 ? SKU_IDS[0] : 0; // the malformed requests' SKU
const RUN = env('RUN_ID', `lt${Date.now().toString(36)}`);
const FAULT = env('FAULT', 'none'); // none | redis | instance | mysql
const RAMP = env('RAMP', '10s');
const HOLD = env('HOLD', '10s');
const { START_RATE, RATE, PRE_VUS, MAX_VUS, MAX_ATTEMPTS, P95_MS, P99_MS } = nums({
  START_RATE: 50, RATE: 2000, PRE_VUS: 200, MAX_VUS: 2000, MAX_ATTEMPTS: 8, P95_MS: 1000, P99_MS: 3000 });
const { RESTOCKS, RESTOCK_UNITS, RESTOCK_FOR_MS } = nums({ RESTOCKS: 0, RESTOCK_UNITS: 1, RESTOCK_FOR_MS: 0 });
const { REPEAT_SHARE, REPEAT_USERS, MALFORMED_SHARE, NOKEY_SHARE, REPLAY_SHARE, CONFLICT_SHARE } = nums({
  REPEAT_SHARE: 0.2, REPEAT_USERS: 50, MALFORMED_SHARE: 0.02, NOKEY_SHARE: 0.05, REPLAY_SHARE: 0.1, CONFLICT_SHARE: 0.02 });
const REQ_TIMEOUT = env('REQ_TIMEOUT', '15s');

if (!SKU_ID) throw new Error('SKU_ID or SKU_IDS is required');

// 503 is part of the contract while something is down; a dead instance
// shows as a connection failure (status 0). Outside a fault, neither is.
const ALLOW_503 = FAULT !== 'none';
const ALLOW_CONN_ERR = FAULT === 'instance';
const faulted = (res) => (ALLOW_503 && res.status === 503) || (ALLOW_CONN_ERR && res.status === 0);

export const options = {
  discardResponseBodies: false,
  scenarios: {
    sale: {
      executor: 'ramping-arrival-rate',
      startRate: START_RATE,
      timeUnit: '1s',
      preAllocatedVUs: PRE_VUS,
      maxVUs: MAX_VUS,
      stages: [
        { target: RATE, duration: RAMP },
        { target: RATE, duration: HOLD },
      ],
      // Long enough for every iteration to finish its retries, so that no
      // buyer is cut off without a record of what it was told.
      gracefulStop: '2m',
    },
    ...(RESTOCKS > 0 ? { restocks: { executor: 'per-vu-iterations', vus: 1, iterations: 1, exec: 'restocker', maxDuration: `${Math.ceil(RESTOCK_FOR_MS / 1000) + 5}s` } } : {}),
  },
  thresholds: {
    unexpected_status: ['count==0'],
    idempotency_broken: ['count==0'],
    'http_req_duration{kind:order}': [`p(95)<${P95_MS}`, `p(99)<${P99_MS}`],
  },
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
};

const idempotencyBroken = new Counter('idempotency_broken');
const retried = new Counter('retried');
const gaveUp = new Counter('gave_up');
const counters = (prefix, names) => Object.fromEntries(names.map((n) => [n, new Counter(`${prefix}_${n}`)]));
const byStatus = counters('status', [0, 200, 201, 400, 404, 409, 413, 429, 500, 502, 503, 504]);
const statusOther = new Counter('status_other');
const byCode = counters('code', ['sold_out', 'limit_exceeded', 'idempotency_conflict', 'busy', 'unavailable', 'invalid_request', 'request_too_large']);

function count(res) {
  (byStatus[res.status] || statusOther).add(1);
  const code = errorCode(res);
  if (byCode[code]) byCode[code].add(1);
  if (res.status === 503 || res.status === 0) console.log(`unavail ${Date.now()} ${res.status}`);
  return code;
}

function post(url, body, key, kind, user, rec) {
  const headers = { ...JSON_HEADERS, ...bearer(user) };
  if (key !== null) headers['Idempotency-Key'] = key;
  const t0 = Date.now();
  const res = http.post(url, body, { headers, tags: { kind }, timeout: REQ_TIMEOUT });
  if (rec) history(rec, user, key, t0, Date.now(), res);
  return res;
}

function retryable(res, key) {
  if (res.status === 429) return true; // busy: never processed
  // Without a key a retry after a lost answer is a second purchase, so only
  // keyed requests are retried after 503 or a dropped connection.
  return key !== null && (res.status === 503 || res.status === 0);
}

// order sends one purchase, retrying with the same Idempotency-Key on
// another instance after a busy, unavailable or dropped answer. A replay
// (or a retry whose first answer was lost) may be answered 200. unsure
// tells whether an attempt's outcome was unknown (503 or dropped).
function order(body, key, first, replay, user, rec) {
  let res;
  let code = '';
  let unsure = false;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const inst = (first + attempt) % BASE_URLS.length;
    res = post(`${BASE_URLS[inst]}/api/v1/orders`, body, key, 'order', user, { ...rec, attempt, inst });
    code = count(res);
    const ok = { 200: key !== null && (replay || attempt > 0), 201: true, 409: ['sold_out', 'limit_exceeded'].includes(code), 429: true };
    if (!ok[res.status] && !faulted(res)) flag('order', res, 'not an answer a valid order may get');
    unsure = unsure || res.status === 503 || res.status === 0;
    if (!retryable(res, key)) return { res, code, unsure };
    if (attempt + 1 === MAX_ATTEMPTS) break;
    retried.add(1);
    const after = Number(res.headers['Retry-After']);
    const backoff = Math.min(2, 0.05 * 2 ** attempt);
    sleep(Math.min(Number.isFinite(after) && after > 0 ? after : backoff, 2) * (0.5 + Math.random()));
  }
  gaveUp.add(1);
  return { res, code, unsure };
}

const MALFORMED = [
  { name: 'bad json', body: () => '{"sku_id":', want: 400 },
  { name: 'not an object', body: () => '[]', want: 400 },
  { name: 'quantity 0', body: (u) => JSON.stringify({ sku_id: SKU_ID, user_id: u, quantity: 0 }), want: 400 },
  { name: 'negative quantity', body: (u) => JSON.stringify({ sku_id: SKU_ID, user_id: u, quantity: -1 }), want: 400 },
  { name: 'sku as string', body: (u) => JSON.stringify({ sku_id: 'abc', user_id: u, quantity: 1 }), want: 400 },
  { name: 'no sku', body: (u) => JSON.stringify({ user_id: u, quantity: 1 }), want: 400 },
  // With tokens, a body user_id that is not the token's sub is refused 403.
  { name: 'empty user', body: () => JSON.stringify({ sku_id: SKU_ID, user_id: '', quantity: 1 }), want: SIGNED ? 403 : 400 },
  { name: 'key too long', body: (u) => JSON.stringify({ sku_id: SKU_ID, user_id: u, quantity: 1 }), key: 'k'.repeat(129), want: 400 },
  { name: 'body too large', body: (u) => JSON.stringify({ sku_id: SKU_ID, user_id: u, quantity: 1, pad: 'x'.repeat(8192) }), want: 413 },
];

function malformed(it) {
  const m = MALFORMED[it % MALFORMED.length];
  const base = BASE_URLS[it % BASE_URLS.length];
  const res = post(`${base}/api/v1/orders`, m.body(`${RUN}-bad${it}`), m.key === undefined ? null : m.key, 'malformed', `${RUN}-bad${it}`);
  count(res);
  // Under a fault the service may refuse before it validates.
  if (res.status !== m.want && !faulted(res)) flag('malformed', res, `${m.name}: want ${m.want}`);
}

// restocker restocks the sale's SKU RESTOCKS times, each time it has sold
// out, to RESTOCK_UNITS, through the instances in turn, while the
// arrivals last (RESTOCK_FOR_MS): a sold-out mark must follow a restock
// made through another instance within the bound (the history check).
export function restocker() {
  const end = Date.now() + RESTOCK_FOR_MS;
  for (let done = 0; done < RESTOCKS && Date.now() < end; sleep(0.05)) {
    if (stockLeft(SKU_ID) === 0 && restock(done % BASE_URLS.length, SKU_ID, RESTOCK_UNITS).status === 200) done++;
  }
}

export default function () {
  const it = exec.scenario.iterationInTest;
  if (Math.random() < MALFORMED_SHARE) {
    malformed(it);
    return;
  }
  const sku = SKU_IDS[it % SKU_IDS.length];
  const buyer = SKU_IDS.length > 1 ? `${RUN}-s${sku}` : RUN;
  const user = Math.random() < REPEAT_SHARE ? `${buyer}-r${Math.floor(Math.random() * REPEAT_USERS)}` : `${buyer}-u${it}`;
  const body = JSON.stringify({ sku_id: sku, user_id: user, quantity: 1 });
  const key = Math.random() < NOKEY_SHARE ? null : `${RUN}-k${it}`;
  const { res, code, unsure } = order(body, key, it, false, user, { it, call: 'order' });
  if (res.status !== 201 && res.status !== 200) {
    if (unsure && res.status !== 409) {
      // The buyer never learned whether it bought: an order may exist.
      console.log(`unsure ${user}`);
    } else if (unsure && key !== null) {
      // Refused after an attempt of unknown outcome: if that attempt had
      // bought, the key names an order and this refusal is a lie.
      console.log(`refused ${key} ${user} ${code}`);
    }
    return;
  }

  const id = orderID(res);
  if (!id) {
    flag('order', res, 'a 2xx without order_id');
    return;
  }
  console.log(`ack ${id} ${user}`);
  if (key === null) return;

  if (Math.random() < REPLAY_SHARE) {
    // The same key and body again, maybe on another instance: the same order.
    const { res: again } = order(body, key, it + 1, true, user, { it, call: 'replay' });
    if (again.status === 200 || again.status === 201) {
      const id2 = orderID(again);
      if (again.status !== 200 || id2 !== id) {
        idempotencyBroken.add(1);
        flag('replay', again, `replay of order ${id} answered ${again.status} with order ${id2}`);
      }
    } else if (again.status !== 503 && again.status !== 0 && again.status !== 429) {
      idempotencyBroken.add(1);
      flag('replay', again, `replay of order ${id} was refused`);
    }
  }
  if (Math.random() < CONFLICT_SHARE) {
    // The buyer's own key with another body must be refused, never sold
    // twice. (Keys belong to their buyer: another buyer's same key is a
    // new order.)
    const other = JSON.stringify({ sku_id: sku, user_id: user, quantity: 2 });
    const inst = (it + 2) % BASE_URLS.length;
    const res3 = post(`${BASE_URLS[inst]}/api/v1/orders`, other, key, 'conflict', user, { it, call: 'conflict', attempt: 0, inst, qty: 2 });
    const code = count(res3);
    if (res3.status === 200 || res3.status === 201) {
      idempotencyBroken.add(1);
      flag('conflict', res3, `key of order ${id} reused with another body was accepted`);
    } else if (!(res3.status === 409 && (code === 'idempotency_conflict' || code === 'sold_out')) && !faulted(res3)) {
      flag('conflict', res3, 'want 409 idempotency_conflict (or sold_out)');
    }
  }
}
