// k6: the gateway's hot path for plain HTTP, keep-alive, through the proxy.
//   HTTP_PROXY='http://USER:PASS_country-us@127.0.0.1:12321' \
//   TARGET=http://127.0.0.1:8080/healthz VUS=50 DURATION=30s \
//   METRICS_URL=http://127.0.0.1:9090/metrics k6 run loadtest/k6/gateway-http.js
// k6 sends Proxy-Authorization from the proxy URL. With METRICS_URL the gateway's own request and
// billed-byte counters are printed at the end, next to what k6 saw.
import http from 'k6/http';
import { check } from 'k6';

const TARGET = __ENV.TARGET || 'http://127.0.0.1:8080/healthz';

export const options = {
  vus: Number(__ENV.VUS || 50),
  duration: __ENV.DURATION || '30s',
  thresholds: {
    http_req_failed: ['rate<0.001'],
    http_req_duration: ['p(99)<100'],
  },
};

export function setup() {
  return { before: scrape() };
}

export default function () {
  const res = http.get(TARGET);
  check(res, { 'status 200': (r) => r.status === 200 });
}

export function teardown(data) {
  const after = scrape();
  if (after && data.before) {
    for (const name of Object.keys(after)) console.log(`${name}: +${after[name] - (data.before[name] || 0)}`);
  }
}

function scrape() {
  if (!__ENV.METRICS_URL) return undefined;
  const res = http.get(__ENV.METRICS_URL, { tags: { name: 'metrics' } });
  const sums = {};
  for (const line of String(res.body).split('\n')) {
    const m =
      /^(proxyfleet_gateway_(?:requests_total|billed_bytes_total|refusals_total))\{[^}]*\} ([0-9.e+]+)$/.exec(
        line,
      );
    if (m) sums[m[1]] = (sums[m[1]] || 0) + Number(m[2]);
  }
  return sums;
}
