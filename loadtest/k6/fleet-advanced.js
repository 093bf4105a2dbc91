// k6 against the fleet's advanced gateway: customer C only, steady, nothing disturbed, so that
// every byte k6 moved can be compared with the bytes the gateway billed. Started by
// loadtest/run.ts with HTTP_PROXY and HTTPS_PROXY = http://<C user>:<C password>@127.0.0.1:<advanced>,
// ORIGIN_HTTP, ORIGIN_HTTPS, DURATION, SCALE, SIZE, SUMMARY.
import http from 'k6/http';
import { check, sleep } from 'k6';

const D = Number(__ENV.DURATION || 30);
const SCALE = Number(__ENV.SCALE || 2);
const SIZE = Number(__ENV.SIZE || 16384);

export const options = {
  discardResponseBodies: true,
  insecureSkipTLSVerify: true,
  scenarios: {
    plain: { executor: 'constant-vus', exec: 'plain', vus: SCALE, duration: `${D}s`, gracefulStop: '5s' },
    tls: { executor: 'constant-vus', exec: 'tls', vus: SCALE, duration: `${D}s`, gracefulStop: '5s' },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    checks: ['rate>0.99'],
  },
};

export function plain() {
  check(http.get(`${__ENV.ORIGIN_HTTP}/bytes/${SIZE}`), { 'plain 200': (r) => r.status === 200 });
  sleep(0.05);
}

export function tls() {
  check(http.get(`${__ENV.ORIGIN_HTTPS}/bytes/${SIZE}`), { 'tls 200': (r) => r.status === 200 });
  sleep(0.05);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data, null, 1) };
}
