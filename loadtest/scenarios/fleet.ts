// The fleet scenario (`npm run loadtest`, `--smoke` in CI): customers A-E on the fleet of
// loadtest/fleet; k6 drives basic (keep-alive, sticky, CONNECT, API polling, B's exhaustion) and
// advanced (plain and TLS) while this runner revokes keys, resets a proxy password on every
// gateway and kills a gateway with SIGKILL and restarts it. The assertions are in
// fleet-judge.ts. docs/loadtest.md explains each of them.
import pg from 'pg';
import { z } from 'zod';
import type { Fleet } from '../fleet/fleet.ts';
import { Prometheus } from '../prom.ts';
import {
  admin,
  apiStatus,
  customer,
  gatewayRequest,
  keySchema,
  passwordSchema,
  timeUntilRefused,
} from '../run/clients.ts';
import { sleep, type RunContext } from '../run/context.ts';
import { connectionsByApplication, dbSnapshot } from '../run/db-cost.ts';
import { runK6 } from '../run/k6.ts';
import { judgeFleetRun } from './fleet-judge.ts';
import { fleetProfile } from './fleet-profile.ts';

export async function fleetScenario(fleet: Fleet, ctx: RunContext): Promise<string[][]> {
  const { say } = ctx;
  const profile = fleetProfile(ctx.smoke);
  const p = fleet.ports;
  const prom = new Prometheus(fleet.prometheusUrl);
  const originHttp = `http://origin.localhost:${p.originHttp}`;
  const originHttps = `https://origin.localhost:${p.originHttps}`;

  // A: plenty of basic (rotating, sticky, CONNECT, API polling); B: a small basic budget that
  // runs out mid-run; C: advanced only, undisturbed (billing compared byte for byte); D: the
  // named keys revoked mid-run; E: the proxy password reset mid-run, probed on every gateway.
  const A = await customer(fleet, `a-${ctx.stamp}@loadtest.example`, { basic: 50e9 });
  const B = await customer(fleet, `b-${ctx.stamp}@loadtest.example`, { basic: profile.budgetB });
  const C = await customer(fleet, `c-${ctx.stamp}@loadtest.example`, { advanced: 50e9 });
  const D = await customer(fleet, `d-${ctx.stamp}@loadtest.example`, {});
  const E = await customer(fleet, `e-${ctx.stamp}@loadtest.example`, { basic: 1e9, advanced: 1e9 });
  const dKey = keySchema.parse(
    await admin(fleet, 'POST', `/admin/v1/accounts/${D.id}/keys`, { name: 'k6-polled' }),
  );
  // An admin change answers once every API process applied it; gateways learn it through the
  // change feed a moment later. Start the traffic once every gateway has applied the newest change
  // (its /readyz cacheVersion), then check that each accepts each customer at once.
  const created = Date.now();
  const versionDb = new pg.Client({ connectionString: fleet.databaseUrl });
  await versionDb.connect();
  const newest = Number(
    (await versionDb.query<{ v: string }>('SELECT coalesce(max(id), 0)::text AS v FROM change_log')).rows[0]
      ?.v ?? 0,
  );
  await versionDb.end();
  for (const health of p.gatewayHealth) {
    for (;;) {
      const res = await fetch(`http://127.0.0.1:${health}/readyz`, { signal: AbortSignal.timeout(5000) });
      const report = z
        .object({ info: z.object({ cacheVersion: z.number().optional() }).optional() })
        .parse(await res.json());
      if ((report.info?.cacheVersion ?? 0) >= newest) break;
      if (Date.now() - created > 10_000)
        throw new Error(`the gateway with health port ${health} has not applied change ${newest} after 10 s`);
      await sleep(10);
    }
  }
  /** Bytes this runner moved through the advanced gateway itself (billed too). */
  let advancedProbeBytes = 0;
  for (const [who, plan] of [
    [A, 'basic'],
    [B, 'basic'],
    [C, 'advanced'],
    [E, 'basic'],
    [E, 'advanced'],
  ] as const) {
    for (const port of plan === 'basic' ? p.basicGateways : p.advancedGateways) {
      const cred =
        plan === 'basic'
          ? `${who.proxyUsername}:${who.proxyPassword}_country-us`
          : `${who.proxyUsername}:${who.proxyPassword}`;
      for (;;) {
        const r = await gatewayRequest(port, cred, `${originHttp}/bytes/0`);
        if (r.status === 200) {
          if (plan === 'advanced') advancedProbeBytes += r.bytes;
          break;
        }
        if (Date.now() - created > 10_000)
          throw new Error(`a new customer is still refused by the gateway on ${port} after 10 s`);
        await sleep(20);
      }
    }
  }
  const allKnownMs = Date.now() - created;
  say(`customers A-E created; every gateway accepts them ${allKnownMs} ms later`);

  const before = await dbSnapshot(fleet.databaseUrl);
  const runStart = Date.now() / 1000;
  const common = {
    DURATION: String(profile.duration),
    SCALE: String(profile.scale),
    SIZE: String(profile.size),
    ORIGIN_HTTP: originHttp,
    ORIGIN_HTTPS: originHttps,
  };
  const basicRun = runK6(
    ctx,
    'fleet-basic.js',
    {
      ...common,
      HTTP_PROXY: `http://127.0.0.1:${p.basic}`,
      HTTPS_PROXY: `http://${encodeURIComponent(A.proxyUsername)}:${encodeURIComponent(`${A.proxyPassword}_country-us`)}@127.0.0.1:${p.basic}`,
      API_URL: fleet.apiUrl,
      A_KEY: A.apiKey,
      D_KEY: dKey.apiKey,
      A_USER: A.proxyUsername,
      A_PASS: A.proxyPassword,
      B_USER: B.proxyUsername,
      B_PASS: B.proxyPassword,
      EXHAUST_START: String(profile.exhaustStart),
    },
    'basic',
  );
  const advancedProxy = `http://${encodeURIComponent(C.proxyUsername)}:${encodeURIComponent(C.proxyPassword)}@127.0.0.1:${p.advanced}`;
  const advancedRun = runK6(
    ctx,
    'fleet-advanced.js',
    { ...common, HTTP_PROXY: advancedProxy, HTTPS_PROXY: advancedProxy },
    'advanced',
  );
  say(`k6 started (${profile.duration} s, ${profile.scale} VUs per scenario)`);

  // Mid-run: the polled key's revocation, the SIGKILL, the revocation rounds.
  await sleep(profile.duration * 250);
  await admin(fleet, 'DELETE', `/admin/v1/accounts/${D.id}/keys/${dKey.id}`);
  say('the named key k6 polls is revoked');

  const apiLatencies: number[] = [];
  const gatewayLatencies: number[] = [];
  let ePassword = E.proxyPassword;
  const gatewayPorts = [
    ...p.basicGateways.map((port) => ({ port, plan: 'basic' })),
    ...p.advancedGateways.map((port) => ({ port, plan: 'advanced' })),
  ];
  const credentials = (plan: string, password: string) =>
    plan === 'basic' ? `${E.proxyUsername}:${password}_country-us` : `${E.proxyUsername}:${password}`;
  const revocationRounds = async () => {
    for (let round = 0; round < profile.revocations; round++) {
      const key = keySchema.parse(
        await admin(fleet, 'POST', `/admin/v1/accounts/${D.id}/keys`, { name: `probe-${round}` }),
      );
      for (const port of p.apis)
        if ((await apiStatus(port, key.apiKey)) !== 200)
          throw new Error(`a new key is refused by the API on ${port}`);
      await admin(fleet, 'DELETE', `/admin/v1/accounts/${D.id}/keys/${key.id}`);
      const since = Date.now();
      apiLatencies.push(
        ...(await Promise.all(
          p.apis.map((port) => timeUntilRefused(since, () => apiStatus(port, key.apiKey), 401)),
        )),
      );

      // The proxy password works on every gateway, then is reset: how soon does each refuse it?
      for (const g of gatewayPorts) {
        const r = await gatewayRequest(g.port, credentials(g.plan, ePassword), `${originHttp}/bytes/100`);
        if (r.status !== 200)
          throw new Error(
            `E's password is refused (${r.status}) by the gateway on ${g.port} before its reset`,
          );
        if (g.plan === 'advanced') advancedProbeBytes += r.bytes;
      }
      const old = ePassword;
      ePassword = passwordSchema.parse(
        await admin(fleet, 'POST', `/admin/v1/accounts/${E.id}/proxy-password/reset`),
      ).proxyPassword;
      const reset = Date.now();
      gatewayLatencies.push(
        ...(await Promise.all(
          gatewayPorts.map((g) =>
            timeUntilRefused(
              reset,
              async () => {
                const r = await gatewayRequest(g.port, credentials(g.plan, old), `${originHttp}/bytes/100`);
                if (r.status === 200 && g.plan === 'advanced') advancedProbeBytes += r.bytes;
                return r.status;
              },
              407,
            ),
          ),
        )),
      );
    }
  };
  // The SIGKILL first (while B drains its budget), then the revocation rounds, which probe every
  // gateway process directly and so must not overlap the killed one's absence.
  let killedAt = 0;
  const killer = (async () => {
    await sleep(Math.max(0, runStart * 1000 + profile.killAt * 1000 - Date.now()));
    killedAt = Date.now();
    await fleet.kill('gateway-basic-3', 'SIGKILL');
    say('gateway-basic-3 killed with SIGKILL');
    await sleep(2000);
    await fleet.restart('gateway-basic-3');
    say(`gateway-basic-3 restarted and ready ${Date.now() - killedAt} ms after the kill`);
    return Date.now() - killedAt;
  })();
  const revocations = killer.then(() => revocationRounds());
  const connectionsPromise = sleep(profile.duration * 500).then(() =>
    connectionsByApplication(fleet.databaseUrl),
  );
  const [basic, advanced, , restartMs, connections] = await Promise.all([
    basicRun,
    advancedRun,
    revocations,
    killer,
    connectionsPromise,
  ]);
  const after = await dbSnapshot(fleet.databaseUrl);
  const runEnd = Date.now() / 1000;
  say(
    `k6 done (basic exit ${basic.code}, advanced exit ${advanced.code}); waiting for the last flushes and scrapes`,
  );
  await sleep(6000);
  return judgeFleetRun(fleet, ctx, {
    profile,
    prom,
    basic,
    advanced,
    advancedProbeBytes,
    runStart,
    runEnd,
    apiLatencies,
    gatewayLatencies,
    A,
    B,
    originHttp,
    killedAt,
    before,
    after,
    connections,
    restartMs,
    allKnownMs,
  });
}
