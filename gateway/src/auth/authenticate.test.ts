import { describe, expect, it } from '@jest/globals';
import { createHash, randomBytes } from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Authenticator } from './authenticate.ts';
import { AuthBackoff, FAILURES_ALLOWED, USERNAME_FAILURES_ALLOWED } from './backoff.ts';
import type { CachedAccount, CredentialCache } from './cache.ts';

// A credential cache stand-in: the Authenticator only reads entries and the generation.
function cacheWith(accounts: { username: string; password: string }[]): CredentialCache {
  const byUsername = new Map<string, CachedAccount>(
    accounts.map((a, i) => [
      a.username,
      {
        accountId: `00000000-0000-0000-0000-00000000000${i}`,
        username: a.username,
        passwordSha256: createHash('sha256').update(a.password).digest(),
        status: 'active',
      },
    ]),
  );
  return {
    generation: 1,
    get: (u: string) => byUsername.get(u),
    size: byUsername.size,
  } as unknown as CredentialCache;
}

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

describe('Authenticator', () => {
  it('keeps no memory for junk credentials: 20,000 distinct 8 KB values grow the process by less than 64 MB', () => {
    const auth = new Authenticator('datacenter', cacheWith([]), new AuthBackoff(), 60);
    // What the process keeps, not what the collector has yet to reclaim: RSS after 160 MB of
    // short-lived strings depends on when the GC last ran (seen: 92 MB on a busy machine).
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage().heapUsed + process.memoryUsage().external;
    for (let i = 0; i < 20_000; i++) {
      // A distinct address each time, so the address backoff does not short-cut the parsing.
      const junk = `Basic ${randomBytes(6144).toString('base64')}`;
      const r = auth.authenticate(junk, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
      expect(r.ok).toBe(false);
    }
    expect(auth.memoSize.entries).toBe(0);
    gc();
    const retained = process.memoryUsage().heapUsed + process.memoryUsage().external - before;
    console.log(`junk credentials: 20,000 x 8 KB left ${(retained / 2 ** 20).toFixed(1)} MiB after a GC`);
    expect(retained).toBeLessThan(64 * 1024 * 1024);
  });

  it('memoises successes only, bounded by bytes', () => {
    const accounts = Array.from({ length: 50 }, (_, i) => ({
      username: `user${String(i).padStart(4, '0')}`,
      password: `pass${i}word`,
    }));
    const auth = new Authenticator('datacenter', cacheWith(accounts), new AuthBackoff(), 60);
    for (const a of accounts)
      expect(auth.authenticate(basic(a.username, `${a.password}_country-us`), '10.0.0.1').ok).toBe(true);
    expect(auth.memoSize.entries).toBe(50);
    expect(auth.authenticate(basic(accounts[0]!.username, 'nope'), '10.0.0.1').ok).toBe(false);
    expect(auth.memoSize.entries).toBe(50);
  });

  it('does not let one success reset an address that keeps guessing (counted per address and per username)', () => {
    const accounts = [
      { username: 'attacker1', password: 'minemine' },
      { username: 'victim01', password: 'secretsecret' },
    ];
    const auth = new Authenticator('datacenter', cacheWith(accounts), new AuthBackoff(), 60);
    let blocked = false;
    for (let i = 0; i < FAILURES_ALLOWED * 2 && !blocked; i++) {
      // The attacker's own valid login interleaved with each guess.
      // (a fresh session id each time: a header value never seen before)
      const own = auth.authenticate(basic('attacker1', `minemine_country-us_session-s${i}`), '10.0.0.9');
      expect(own.ok || own.status === 429).toBe(true);
      const r = auth.authenticate(basic('victim01', `guess${i}_country-us`), '10.0.0.9');
      if (!r.ok && r.status === 429) blocked = true;
    }
    expect(blocked).toBe(true);
  });

  it('backs off a username guessed from many addresses; its own success clears only that username', () => {
    const accounts = [
      { username: 'victim01', password: 'secretsecret' },
      { username: 'other001', password: 'otherother' },
    ];
    const auth = new Authenticator('datacenter', cacheWith(accounts), new AuthBackoff(), 60);
    for (let i = 0; i < USERNAME_FAILURES_ALLOWED; i++)
      auth.authenticate(basic('victim01', `guess${i}_country-us`), `10.1.${i >> 4}.${i}`);
    const r = auth.authenticate(basic('victim01', 'anotherguess_country-us'), '10.2.0.1');
    expect(r.ok).toBe(false);
    expect(!r.ok && r.status).toBe(429);
    // Another username is not affected.
    expect(auth.authenticate(basic('other001', 'otherother_country-us'), '10.3.0.1').ok).toBe(true);
  });
});
