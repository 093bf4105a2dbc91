// k6 against the fleet's basic gateways (HAProxy in front of 3 processes) and its APIs; started
// by loadtest/run.ts, which passes everything in the environment:
//   HTTP_PROXY   http://127.0.0.1:<basic>  (no credentials: each request carries its own
//                Proxy-Authorization, so rotating, sticky and the exhausted customer share it)
//   HTTPS_PROXY  http://<A user>:<A password>@127.0.0.1:<basic>  (CONNECT: k6 sends these)
//   ORIGIN_HTTP, ORIGIN_HTTPS  http(s)://origin.localhost:<port> (k6 never proxies loopback
//                addresses, so the origin has a .localhost name)
//   API_URL, A_KEY (primary key), D_KEY (a named key the runner revokes mid-run)
//   A_USER, A_PASS, B_USER, B_PASS  proxy credentials of customer A (plenty) and B (runs out mid-run)
//   DURATION (seconds), SCALE (VUs per scenario), SIZE (bytes per plain request),
//   EXHAUST_START (seconds), SUMMARY (path of the summary JSON)
import http from 'k6/http';
import { check, sleep } from 'k6';
import encoding from 'k6/encoding';
import { Counter } from 'k6/metrics';

const D = Number(__ENV.DURATION || 30);
const SCALE = Number(__ENV.SCALE || 2);
const SIZE = Number(__ENV.SIZE || 16384);
const refusedAfterRevocation = new Counter('api_revoked_refusals');
const outOfBandwidth = new Counter('gateway_402');
const stickyMoved = new Counter('sticky_exit_changes');

const scenario = (exec, extra) => ({
  executor: 'constant-vus',
  exec,
  vus: SCALE,
  duration: `${D}s`,
  gracefulStop: '5s',
  ...extra,
});
export const options = {
  discardResponseBodies: true,
  insecureSkipTLSVerify: true,
  scenarios: {
    keepalive: scenario('keepalive'),
    sticky: scenario('sticky'),
    connect: scenario('connect'),
    api: {
      executor: 'constant-arrival-rate',
      exec: 'api',
      rate: 2 * SCALE,
      timeUnit: '1s',
      duration: `${D}s`,
      preAllocatedVUs: SCALE,
    },
    revoked: {
      executor: 'constant-arrival-rate',
      exec: 'revoked',
      rate: 2,
      timeUnit: '1s',
      duration: `${D}s`,
      preAllocatedVUs: 2,
    },
    exhaust: scenario('exhaust', {
      startTime: `${Number(__ENV.EXHAUST_START || 0)}s`,
      duration: `${Math.max(5, D - Number(__ENV.EXHAUST_START || 0))}s`,
    }),
  },
  thresholds: {
    // A gateway is SIGKILLed mid-run: the requests on its connections fail (a few per VU).
    'http_req_failed{scenario:keepalive}': ['rate<0.05'],
    'http_req_failed{scenario:sticky}': ['rate<0.05'],
    'http_req_failed{scenario:connect}': ['rate<0.05'],
    'http_req_failed{scenario:api}': ['rate<0.01'],
    'checks{scenario:sticky}': ['rate>0.95'],
    sticky_exit_changes: ['count==0'],
    // Present in the summary per scenario: the runner compares them with the bytes billed.
    'data_sent{scenario:exhaust}': ['count>=0'],
    'data_received{scenario:exhaust}': ['count>=0'],
    'data_received{scenario:keepalive}': ['count>0'],
    'data_received{scenario:connect}': ['count>0'],
    gateway_402: ['count>=0'],
    api_revoked_refusals: ['count>=0'],
  },
};

const auth = (b64) => ({ headers: { 'Proxy-Authorization': `Basic ${b64}` } });
const withTargeting = (who, suffix) =>
  encoding.b64encode(`${__ENV[`${who}_USER`]}:${__ENV[`${who}_PASS`]}${suffix}`);
const A_ROTATING = withTargeting('A', '_country-us');

export function keepalive() {
  const res = http.get(`${__ENV.ORIGIN_HTTP}/bytes/${SIZE}`, auth(A_ROTATING));
  check(res, { 'keepalive 200': (r) => r.status === 200 });
  sleep(0.05);
}

let myExit;
export function sticky() {
  const res = http.get(
    `${__ENV.ORIGIN_HTTP}/bytes/1024`,
    auth(withTargeting('A', `_country-us_session-vu${__VU}`)),
  );
  if (res.status !== 200) return void sleep(0.1);
  const exit = res.headers['X-Exit'];
  myExit ??= exit;
  if (exit !== myExit) stickyMoved.add(1);
  check(res, { 'sticky: same exit every time': () => exit === myExit });
  sleep(0.1);
}

export function connect() {
  const res = http.get(`${__ENV.ORIGIN_HTTPS}/bytes/${SIZE}`);
  check(res, { 'connect 200': (r) => r.status === 200 });
  sleep(0.05);
}

export function api() {
  const res = http.get(`${__ENV.API_URL}/api/v1/usage`, { headers: { 'X-API-Key': __ENV.A_KEY } });
  check(res, { 'usage 200': (r) => r.status === 200 });
}

export function revoked() {
  const res = http.get(`${__ENV.API_URL}/api/v1/usage`, {
    headers: { 'X-API-Key': __ENV.D_KEY },
    responseCallback: http.expectedStatuses(200, 401),
  });
  if (res.status === 401) refusedAfterRevocation.add(1);
}

export function exhaust() {
  const res = http.get(`${__ENV.ORIGIN_HTTP}/bytes/65536`, {
    ...auth(withTargeting('B', '_country-us')),
    responseCallback: http.expectedStatuses(200, 402),
  });
  if (res.status === 402) {
    outOfBandwidth.add(1);
    sleep(0.25);
  } else sleep(0.02);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data, null, 1) };
}
