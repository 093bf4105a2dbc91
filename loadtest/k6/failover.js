// k6 for the failover scenario (loadtest/scenarios/failover.ts): customers keep using the fleet
// while its database fails over or switches over. Two processes, as in the main load test (k6
// takes one proxy per process): MODE=basic through the basic HAProxy (A keep-alive and CONNECT,
// R draining a small balance that auto-refills, N a newcomer who starts at NEWCOMER_START, and the
// API polled with A's key), MODE=advanced through the advanced HAProxy (C, plain and TLS).
// Every answer is counted by what it means: `served` (200), `refused_503`, `refused_402`,
// `unexpected` (any other status, or no answer); `refused_at` holds the time of each refusal or
// failure (ms since the epoch: its min and max bound the refusal window). Each answer but 200 is
// also written as one line `FAILED {json}` (when, which scenario and request, status, k6's error
// and code, the gateway's Proxy-Status, how long it took), which the scenario lists per phase.
// Env: MODE, HTTP_PROXY, HTTPS_PROXY, ORIGIN_HTTP, ORIGIN_HTTPS, API_URL, A_KEY, A_USER, A_PASS,
// R_USER, R_PASS, N_USER, N_PASS, DURATION, SCALE, SIZE, NEWCOMER_START, SUMMARY.
import http from 'k6/http';
import { sleep } from 'k6';
import encoding from 'k6/encoding';
import exec from 'k6/execution';
import { Counter, Trend } from 'k6/metrics';

const D = Number(__ENV.DURATION || 30);
const SCALE = Number(__ENV.SCALE || 2);
const SIZE = Number(__ENV.SIZE || 16384);
const NEWCOMER_START = Number(__ENV.NEWCOMER_START || 0);

const served = new Counter('served');
const refused503 = new Counter('refused_503');
const refused402 = new Counter('refused_402');
const unexpected = new Counter('unexpected');
const refusedAt = new Trend('refused_at');

const vus = (exec, n, extra) => ({
  executor: 'constant-vus',
  exec,
  vus: n,
  duration: `${D}s`,
  gracefulStop: '10s',
  ...extra,
});
const rate = (exec, perSecond, extra) => ({
  executor: 'constant-arrival-rate',
  exec,
  rate: perSecond,
  timeUnit: '1s',
  duration: `${D}s`,
  preAllocatedVUs: 4,
  maxVUs: 20,
  gracefulStop: '10s',
  ...extra,
});

const scenarios =
  __ENV.MODE === 'advanced'
    ? { plain: vus('plain', SCALE), tls: vus('tls', SCALE) }
    : {
        keepalive: vus('keepalive', SCALE),
        connect: vus('connect', SCALE),
        refill: vus('refill', 1),
        newcomer: rate('newcomer', 5, {
          startTime: `${NEWCOMER_START}s`,
          duration: `${Math.max(1, D - NEWCOMER_START)}s`,
        }),
        api: rate('api', 4),
      };
const tracked = ['served', 'refused_503', 'refused_402', 'unexpected'];
const thresholds = { refused_at: ['min>=0'] };
for (const name of tracked) {
  thresholds[name] = ['count>=0'];
  for (const s of Object.keys(scenarios)) thresholds[`${name}{scenario:${s}}`] = ['count>=0'];
}
for (const s of Object.keys(scenarios)) {
  thresholds[`data_sent{scenario:${s}}`] = ['count>=0'];
  thresholds[`data_received{scenario:${s}}`] = ['count>=0'];
}

export const options = {
  discardResponseBodies: true,
  insecureSkipTLSVerify: true,
  scenarios,
  thresholds,
  summaryTrendStats: ['min', 'max', 'count'],
};

function count(res) {
  if (res.status === 200) return served.add(1);
  refusedAt.add(Date.now());
  const url = String(res.request?.url ?? res.url ?? '');
  console.warn(
    `FAILED ${JSON.stringify({
      at: Date.now(),
      scenario: exec.scenario.name,
      mode: __ENV.MODE,
      request: `${res.request?.method ?? 'GET'} ${url.replace(/\/\/[^@/]*@/, '//')}`,
      status: res.status,
      error: res.error || undefined,
      errorCode: res.error_code || undefined,
      proxyStatus: res.headers?.['Proxy-Status'] || undefined,
      ms: Math.round(res.timings?.duration ?? 0),
    })}`,
  );
  if (res.status === 503) refused503.add(1);
  else if (res.status === 402) refused402.add(1);
  else unexpected.add(1);
}

// Bounded: a request the fleet holds longer than this is a failure, not a wait.
const TIMEOUT = '20s';
const auth = (who) => ({
  timeout: TIMEOUT,
  headers: {
    'Proxy-Authorization': `Basic ${encoding.b64encode(`${__ENV[`${who}_USER`]}:${__ENV[`${who}_PASS`]}`)}`,
  },
});

export function keepalive() {
  count(http.get(`${__ENV.ORIGIN_HTTP}/bytes/${SIZE}`, auth('A')));
  sleep(0.05);
}

// CONNECT + TLS with HTTPS_PROXY's credentials (A's).
export function connect() {
  count(http.get(`${__ENV.ORIGIN_HTTPS}/bytes/${SIZE}`, { timeout: TIMEOUT }));
  sleep(0.05);
}

export function refill() {
  count(http.get(`${__ENV.ORIGIN_HTTP}/bytes/${SIZE * 4}`, auth('R')));
  sleep(0.05);
}

export function newcomer() {
  count(http.get(`${__ENV.ORIGIN_HTTP}/bytes/1024`, auth('N')));
}

export function api() {
  count(
    http.get(`${__ENV.API_URL}/api/v1/usage`, { timeout: TIMEOUT, headers: { 'X-API-Key': __ENV.A_KEY } }),
  );
}

export function plain() {
  count(http.get(`${__ENV.ORIGIN_HTTP}/bytes/${SIZE}`, { timeout: TIMEOUT }));
  sleep(0.05);
}

export function tls() {
  count(http.get(`${__ENV.ORIGIN_HTTPS}/bytes/${SIZE}`, { timeout: TIMEOUT }));
  sleep(0.05);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data, null, 1) };
}
