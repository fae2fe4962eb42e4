// lifecycle.js — buyers who pay, cancel or walk away (-scenario lifecycle,
// README.md), for k6: each VU sends buyers one after another until it has
// been answered only sold_out for QUIET_MS. The record is sale.js's plus
// "said <order id> <status>" each time a buyer learns what became of its
// order (paid, cancelled, expired, or cancel-unanswered) and "cancel <call
// ms> <return ms> <order id> <user> <instance> <status>" for every cancel.
import http from 'k6/http';
import exec from 'k6/execution';
import { sleep } from 'k6';
import { BASE_URLS, JSON_HEADERS, buyOnce, env, errorCode, flag, nums, orderID } from './lib.js';

const { SKU_ID, QUIET_MS, VUS } = nums({ SKU_ID: 0, QUIET_MS: 15000, VUS: 32 });
const PAY = { ...JSON_HEADERS, Authorization: `Bearer ${env('PAY_TOKEN', '')}` };

export const options = {
  scenarios: { buyers: { executor: 'per-vu-iterations', vus: VUS, iterations: 1, maxDuration: env('MAX_DURATION', '5m') } },
  thresholds: { unexpected_status: ['count==0'] },
};

// pay confirms order id as the payment system does, sending it again at
// the next instance after a 503 or no answer (it is idempotent).
function pay(id, k, late) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const res = http.post(`${BASE_URLS[(k + attempt) % BASE_URLS.length]}/internal/v1/orders/${id}/paid`, '', { headers: PAY, timeout: '10s' });
    if (res.status === 503 || res.status === 0) {
      sleep(0.1);
      continue;
    }
    if (res.status === 200 && !late) console.log(`said ${id} paid`);
    else if (res.status === 409 && errorCode(res) === 'order_expired') console.log(`said ${id} expired`);
    else flag('payment', res, `late: ${late}`);
    return;
  }
}

function cancel(id, user, inst) {
  const t0 = Date.now();
  const res = http.post(`${BASE_URLS[inst]}/api/v1/orders/${id}/cancel`, '', { headers: JSON_HEADERS, timeout: '10s' });
  console.log(`cancel ${t0} ${Date.now()} ${id} ${user} ${inst} ${res.status}`);
  if (res.status === 200) console.log(`said ${id} cancelled`);
  else if (res.status === 503 || res.status === 0) console.log(`said ${id} cancel-unanswered`);
  else flag('cancel', res, 'of a pending order');
}

const downUntil = BASE_URLS.map(() => 0); // an instance that refused a connection is left alone a second

export default function () {
  const vu = exec.vu.idInTest;
  let quietSince = 0;
  for (let n = 0; quietSince === 0 || Date.now() - quietSince < QUIET_MS; n++) {
    const k = vu * 100000 + n;
    const user = `buyer-${k}`;
    let inst = k % BASE_URLS.length;
    for (let i = 0; i < BASE_URLS.length && downUntil[inst] > Date.now(); i++) inst = (inst + 1) % BASE_URLS.length;
    const res = buyOnce(inst, SKU_ID, user, k, '10s');
    if (res.status !== 201) {
      if (res.status === 0) downUntil[inst] = Date.now() + 1000;
      if (res.status === 409 && errorCode(res) === 'sold_out' && quietSince === 0) quietSince = Date.now();
      sleep(0.05); // sold out until units come back, or an instance away
      continue;
    }
    quietSince = 0;
    const id = orderID(res);
    if (res.json('status') !== 'pending' || !id) {
      flag('order', res, 'new, want pending with expires_at');
      continue;
    }
    console.log(`ack ${id} ${user}`);
    switch (n % 10) {
      case 0:
      case 1:
        break; // never pays
      case 2: // pays after the window
        sleep(Math.max(0, Date.parse(res.json('expires_at')) + 20 - Date.now()) / 1000);
        pay(id, k, true);
        break;
      case 3:
        cancel(id, user, inst);
        break;
      default:
        pay(id, k, false);
    }
  }
}
