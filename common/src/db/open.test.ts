import { describe, expect, it } from '@jest/globals';
import { databaseSettingsProblems } from './open.ts';

describe('database settings', () => {
  const pooler = 'postgresql://app@pgbouncer:6432/proxyfleet';
  const session = 'postgresql://app@pgbouncer:6432/proxyfleet_session';

  it('need nothing more for a direct connection or a session pool', () => {
    expect(databaseSettingsProblems({ databaseUrl: pooler, sessionUrl: undefined })).toEqual([]);
    expect(
      databaseSettingsProblems({ databaseUrl: undefined, sessionUrl: undefined, pooling: 'session' }),
    ).toEqual([]);
  });

  it('behind a transaction pooler, need a session URL of its own and a server', () => {
    expect(
      databaseSettingsProblems({ databaseUrl: pooler, sessionUrl: session, pooling: 'transaction' }),
    ).toEqual([]);
    const [missing] = databaseSettingsProblems({
      databaseUrl: pooler,
      sessionUrl: undefined,
      pooling: 'transaction',
    });
    expect(missing).toMatch(
      /^PROXYFLEET_DATABASE_SESSION_URL: required when PROXYFLEET_DB_POOLING=transaction/,
    );
    expect(
      databaseSettingsProblems({ databaseUrl: pooler, sessionUrl: pooler, pooling: 'transaction' }),
    ).toEqual([missing]);
    expect(
      databaseSettingsProblems({ databaseUrl: undefined, sessionUrl: session, pooling: 'transaction' })[0],
    ).toMatch(/^DATABASE_URL: required/);
  });
});
