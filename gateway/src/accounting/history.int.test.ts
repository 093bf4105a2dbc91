// Usage history through a real gateway and PostgreSQL (docs/adr/0103): a wrong password, a
// destination that never answers, a refused port and answers of three status classes are counted
// for the account they belong to, per hour and per day, in the flush; the bytes are exactly the
// billed ones.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import {
  cacheSynced,
  gatewaySpec,
  ONE_SECOND_ANSWER_TIMEOUT,
  useTestGateway,
} from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { historyWritten, recordedUsage } from '#test/gateway/usage.ts';
import { startSilentServer, type Origin } from '#test/gateway/origin.ts';

// A destination that accepts and never answers, behind a gateway whose answer timeout is 1 s.
let silent: Origin;

const fx = useTestGateway({
  spec: gatewaySpec('basic', undefined, ONE_SECOND_ANSWER_TIMEOUT),
});

beforeAll(async () => {
  silent = await startSilentServer();
});

afterAll(() => silent.close());

const COLUMNS = `bytes_up + bytes_down AS bytes, requests, succeeded, refused_bad_credentials AS "badCredentials",
  upstream_timeout AS "timeout", refused_target_not_allowed AS "targetNotAllowed", status_2xx AS "s2xx",
  status_4xx AS "s4xx", other`;

describe('usage history', () => {
  it("counts a wrong password, an upstream timeout, a refused port and the origin's status classes for the account, hourly and daily, with the billed bytes", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const good = basicAuth(account.proxyUsername, account.proxyPassword);
    const wrong = basicAuth(account.proxyUsername, 'wrongpassword');
    const origin = `http://127.0.0.1:${fx.origin.port}`;
    const ok = await rawExchange(fx.gateway.port, [
      get(`${origin}/bytes/3000`, good),
      get(`${origin}/missing`, good),
    ]);
    expect(ok.responses.map((r) => r.status)).toEqual([200, 404]);
    for (let i = 0; i < 2; i++) {
      const refused = await rawExchange(fx.gateway.port, [get(`${origin}/bytes/10`, wrong)]);
      expect(refused.responses.map((r) => r.status)).toEqual([407]);
    }
    const port = silent.port;
    const timedOut = await rawExchange(fx.gateway.port, [get(`http://127.0.0.1:${port}/`, good)]);
    expect(timedOut.responses.map((r) => r.status)).toEqual([504]);
    const prohibited = await rawExchange(fx.gateway.port, [get(`http://127.0.0.1:25/`, good)]);
    expect(prohibited.responses.map((r) => r.status)).toEqual([403]);

    await historyWritten(fx.gateway);

    const billed = await recordedUsage(fx.db.pool, account.id);
    const expected = {
      bytes: billed.up + billed.down,
      requests: 6,
      succeeded: 2,
      badCredentials: 2,
      timeout: 1,
      targetNotAllowed: 1,
      s2xx: 1,
      s4xx: 1,
      other: 0,
    };
    const hourly = await fx.db.pool.query(
      `SELECT ${COLUMNS}, sub_user, product FROM usage_history_hourly WHERE account_id = $1`,
      [account.id],
    );
    expect(hourly.rows).toEqual([{ ...expected, sub_user: '', product: 'basic' }]);
    const daily = await fx.db.pool.query(`SELECT ${COLUMNS} FROM usage_history_daily WHERE account_id = $1`, [
      account.id,
    ]);
    expect(daily.rows).toEqual([expected]);
  }, 30_000);
});
