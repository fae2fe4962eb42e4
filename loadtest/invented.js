// invented.js — orders for SKU ids that do not exist (-scenario
// invented-skus), for k6: COUNT orders, VUS at a time, for FIRST, FIRST+1,
// ..., round-robin over the instances; each must be 404 sku_not_found.
import http from 'k6/http';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';
import { BASE_URLS, bearer, errorCode, num } from './lib.js';

const FIRST = num('FIRST', 2 ** 40);

export const options = {
  scenarios: { invented: { executor: 'shared-iterations', vus: num('VUS', 64), iterations: num('COUNT', 20000), maxDuration: '10m' } },
  thresholds: { not_found_missed: ['count==0'] },
};

const missed = new Counter('not_found_missed'); // an answer other than 404 sku_not_found

export default function () {
  const i = exec.scenario.iterationInTest;
  const user = `attacker-${FIRST + i}`;
  const res = http.post(`${BASE_URLS[i % BASE_URLS.length]}/api/v1/orders`, JSON.stringify({ sku_id: FIRST + i, user_id: user, quantity: 1 }), {
    headers: { 'Content-Type': 'application/json', ...bearer(user) },
  });
  if (res.status !== 404 || errorCode(res) !== 'sku_not_found') missed.add(1, { status: String(res.status) });
}
