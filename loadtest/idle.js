// idle.js — sell-outs, idle gaps and restocks (-scenario idle-restock,
// README.md), for k6. The VUs keep step on the wall clock from one start
// (setup); a step that overruns its slot fails the run rather than
// shorten the idle gap. The record is sale.js's plus lib.js's restocks.
import exec from 'k6/execution';
import { sleep } from 'k6';
import { Counter } from 'k6/metrics';
import { BASE_URLS, buyOnce, errorCode, flag, nums, orderID, restock } from './lib.js';

const { SKU_ID, UNITS, ROUNDS, BURST, IDLE_MS, AFTER_MS } = nums({ SKU_ID: 0, UNITS: 30, ROUNDS: 3, BURST: 20, IDLE_MS: 2500, AFTER_MS: 2000 });
const SELL_MS = 5000;
const RESTOCK_MS = 1000;
const ROUND_MS = SELL_MS + IDLE_MS + RESTOCK_MS + AFTER_MS + 2000;
if (BASE_URLS.length < 2) throw new Error('idle.js restocks through one instance and sells through the others: 2 or more');

export const options = {
  scenarios: { idle: { executor: 'per-vu-iterations', vus: BURST, iterations: 1, maxDuration: `${Math.ceil((ROUNDS * ROUND_MS) / 1000) + 60}s` } },
  thresholds: { unexpected_status: ['count==0'], burst_sold_out: ['count==0'], overran: ['count==0'] },
};

const burstSoldOut = new Counter('burst_sold_out'); // a buyer after a restock told sold_out
const overran = new Counter('overran'); // a step past its slot

export function setup() {
  return { start: Date.now() + 1000 };
}

function sleepUntil(t) {
  const d = t - Date.now();
  if (d > 0) sleep(d / 1000);
}

let bought = 0; // buyers this VU sent

// buy sends one order of a new buyer to instance inst and records it.
function buy(inst) {
  const user = `idle-v${exec.vu.idInTest}-${++bought}`;
  const res = buyOnce(inst, SKU_ID, user, exec.vu.idInTest * 100000 + bought - 1, '15s');
  if (res.status === 201) console.log(`ack ${orderID(res)} ${user}`);
  return errorCode(res);
}

// sellOut buys at the selling instances in turn until each has answered sold_out.
function sellOut() {
  const marked = new Set();
  for (let i = 0; marked.size < BASE_URLS.length - 1 && i < 10 * UNITS; i++) {
    const inst = 1 + (i % (BASE_URLS.length - 1));
    if (buy(inst) === 'sold_out') marked.add(inst);
  }
}

export default function (data) {
  const first = exec.vu.idInTest === 1;
  for (let round = 0; round < ROUNDS; round++) {
    const start = data.start + round * ROUND_MS;
    const restockAt = start + SELL_MS + IDLE_MS;
    if (first) {
      sleepUntil(start);
      sellOut();
      if (Date.now() > start + SELL_MS) overran.add(1);
      sleepUntil(restockAt);
      const res = restock(0, SKU_ID, UNITS);
      if (res.status !== 200) flag('restock', res, 'want 200');
      if (Date.now() > restockAt + RESTOCK_MS) overran.add(1);
    }
    sleepUntil(restockAt + RESTOCK_MS + AFTER_MS);
    if (buy(1 + (exec.vu.idInTest % (BASE_URLS.length - 1))) === 'sold_out') burstSoldOut.add(1);
  }
}
