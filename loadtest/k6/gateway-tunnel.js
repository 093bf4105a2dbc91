// k6: CONNECT tunnels through the gateway, one request per tunnel (no connection reuse).
//   HTTPS_PROXY='http://USER:PASS_country-us@127.0.0.1:12321' \
//   TARGET=https://127.0.0.1:8443/ VUS=50 DURATION=30s k6 run loadtest/k6/gateway-tunnel.js
// The target is any HTTPS origin; certificates are not checked (local self-signed origins).
import http from 'k6/http';
import { check } from 'k6';

export const options = {
  vus: Number(__ENV.VUS || 50),
  duration: __ENV.DURATION || '30s',
  noConnectionReuse: true,
  insecureSkipTLSVerify: true,
  thresholds: {
    http_req_failed: ['rate<0.001'],
    http_req_connecting: ['p(99)<100'],
  },
};

export default function () {
  const res = http.get(__ENV.TARGET || 'https://127.0.0.1:8443/');
  check(res, { 'status 200': (r) => r.status === 200 });
}
