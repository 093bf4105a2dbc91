import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Counter, Registry } from 'prom-client';
import { Health, startHealthServer, type HealthServer } from './health.ts';

describe('health server', () => {
  const registry = new Registry();
  const other = new Registry();
  const health = new Health([registry]);
  let server: HealthServer;
  let dbUp = true;

  beforeAll(async () => {
    new Counter({ name: 'proxyfleet_test_things_total', help: 'things', registers: [registry] }).inc(3);
    new Counter({ name: 'proxyfleet_other_things_total', help: 'others', registers: [other] }).inc();
    health.addRegistry(other);
    health.addCheck('database', () => {
      if (!dbUp) throw new Error('connection refused');
    });
    health.addInfo('cacheVersion', () => 42);
    server = await startHealthServer(health, '127.0.0.1', 0);
  });
  afterAll(() => server.close());

  const get = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${server.port}${path}`);
    return { status: res.status, body: await res.text() };
  };

  it('is alive on /healthz', async () => {
    expect(await get('/healthz')).toEqual({ status: 200, body: '{"status":"ok"}' });
  });

  it('is ready while every check passes, with the info fields', async () => {
    const res = await get('/readyz');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({
      ready: true,
      checks: { database: 'ok' },
      info: { cacheVersion: 42 },
    });
  });

  it('is not ready when a check fails, and says why', async () => {
    dbUp = false;
    const res = await get('/readyz');
    dbUp = true;
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body).checks.database).toBe('connection refused');
  });

  it('serves every registry on /metrics', async () => {
    const res = await get('/metrics');
    expect(res.body).toContain('proxyfleet_test_things_total 3');
    expect(res.body).toContain('proxyfleet_other_things_total 1');
  });

  it('answers 404 elsewhere and stops being ready while draining', async () => {
    expect((await get('/nope')).status).toBe(404);
    health.startDraining();
    const res = await get('/readyz');
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body).checks.shutdown).toBe('draining');
    expect((await get('/healthz')).status).toBe(200);
  });
});

describe('/prestop', () => {
  it('makes the pod unready at once and answers when the wait set for it is over', async () => {
    const health = new Health([new Registry()]);
    let called!: () => void;
    const waiting = new Promise<void>((r) => (called = r));
    let finish!: (v: unknown) => void;
    health.setPreStop(() => {
      called();
      return new Promise((r) => (finish = r));
    });
    const server = await startHealthServer(health, '127.0.0.1', 0);
    try {
      let answered = false;
      const preStop = fetch(`http://127.0.0.1:${server.port}/prestop`).then(async (res) => {
        answered = true;
        return { status: res.status, body: await res.text() };
      });
      await waiting;
      const ready = await fetch(`http://127.0.0.1:${server.port}/readyz`);
      expect(ready.status).toBe(503);
      expect(answered).toBe(false);
      finish({ waitedMs: 4200, ended: 'quiet' });
      expect(await preStop).toEqual({ status: 200, body: '{"preStop":{"waitedMs":4200,"ended":"quiet"}}' });
    } finally {
      await server.close();
    }
  });
});
