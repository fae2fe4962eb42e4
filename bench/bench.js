// bench.js — the closed-loop benchmark of `make bench`: VUS concurrent
// buyers, each sending its next order as soon as the last was answered,
// for DURATION, spread over SKU_IDS (comma-separated). Every buyer is a
// distinct user (per-user limits never refuse), so on a SKU with stock
// every answer should be 201, and on a sold-out SKU every answer 409.
// TARGET_PATH=/bench/constant measures the HTTP ceiling instead. With
// RATE (orders/s) the load is open instead: a constant arrival rate,
// whatever the answers' latency, from up to VUS buyers at once (k6 counts
// the arrivals it could not start as dropped_iterations). With
// SHOPPER_SECRET (the service's HS256 auth.jwt.secret, from the
// environment) every request carries its buyer's token, signed here
// because every iteration is a new buyer; the ceiling gets one too, so
// the client's cost is the same in every row.
//
//   k6 run -e URL=http://127.0.0.1:8080 -e SKU_IDS=1 -e VUS=1000 bench/bench.js
import http from 'k6/http';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';
import { Counter } from 'k6/metrics';

const URL = (__ENV.URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
const PATH = __ENV.TARGET_PATH || '/api/v1/orders';
const SKUS = (__ENV.SKU_IDS || '1').split(',').map(Number);
const RUN = __ENV.RUN_ID || `b${Date.now().toString(36)}`;

const created = new Counter('orders_created');
const rejected = new Counter('orders_rejected');
const unavailable = new Counter('unavailable');
const unexpected = new Counter('unexpected_status');

const RATE = Number(__ENV.RATE || 0);
const VUS = Number(__ENV.VUS || 1000);
const DURATION = __ENV.DURATION || '10s';

export const options = {
  scenarios: {
    buyers: RATE > 0 ? {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: Math.min(VUS, 200),
      maxVUs: VUS,
      gracefulStop: '10s',
    } : {
      executor: 'constant-vus',
      vus: VUS,
      duration: DURATION,
      gracefulStop: '10s',
    },
  },
  discardResponseBodies: true,
  summaryTrendStats: ['avg', 'p(50)', 'p(95)', 'p(99)', 'max'],
  thresholds: {
    // A benchmark that got answers outside the contract measured nothing.
    unexpected_status: ['count==0'],
  },
};

const SECRET = __ENV.SHOPPER_SECRET || '';
const JWT_HEADER = encoding.b64encode(JSON.stringify({ alg: 'HS256', typ: 'JWT' }), 'rawurl');

function params(user) {
  const headers = { 'Content-Type': 'application/json' };
  if (SECRET) {
    const now = Math.floor(Date.now() / 1000);
    const claims = encoding.b64encode(JSON.stringify({ sub: user, aud: 'seckill', iat: now, exp: now + 3600 }), 'rawurl');
    headers.Authorization = `Bearer ${JWT_HEADER}.${claims}.${crypto.hmac('sha256', SECRET, `${JWT_HEADER}.${claims}`, 'base64rawurl')}`;
  }
  return { headers, timeout: '60s' };
}

export default function () {
  const sku = SKUS[(__VU + __ITER) % SKUS.length];
  const user = `${RUN}-${__VU}-${__ITER}`;
  const body = `{"sku_id":${sku},"user_id":"${user}","quantity":1}`;
  const res = http.post(URL + PATH, body, params(user));
  if (res.status === 201) {
    created.add(1);
  } else if (res.status === 409 || res.status === 429) {
    rejected.add(1);
  } else if (res.status === 503) {
    unavailable.add(1); // in the contract: the design collapsed under contention
  } else {
    unexpected.add(1);
  }
}

export function handleSummary(data) {
  const out = {};
  if (__ENV.SUMMARY) out[__ENV.SUMMARY] = JSON.stringify(data);
  return out;
}
