import { describe, expect, it } from '@jest/globals';
import type os from 'node:os';
import { Writable } from 'node:stream';
import { Gauge, Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { ExitAddressWatch, localAddresses } from './exit-addresses.ts';
import { ExitPool } from './exits.ts';

type Info = os.NetworkInterfaceInfo;
const v4 = (address: string, prefix: number, internal = false): Info => ({
  address,
  netmask: '',
  family: 'IPv4',
  mac: '00:00:00:00:00:00',
  internal,
  cidr: `${address}/${prefix}`,
});
const v6 = (address: string, prefix: number, internal = false): Info => ({
  address,
  netmask: '',
  family: 'IPv6',
  mac: '00:00:00:00:00:00',
  internal,
  cidr: `${address}/${prefix}`,
  scopeid: 0,
});

/** As os.networkInterfaces() lists this test machine: lo, and eth0 with one address of its subnets. */
const HOST = {
  lo: [v4('127.0.0.1', 8, true), v6('::1', 128, true)],
  eth0: [v4('192.0.2.2', 24), v6('fd00::2', 64), v6('fe80::fc:ff:fe00:1', 64)],
};

describe('localAddresses: what bind() takes without IP_FREEBIND', () => {
  const cases: [string, NodeJS.Dict<Info[]>, string, boolean][] = [
    ['an address of an interface', HOST, '192.0.2.2', true],
    ['another address of its subnet (on the link, not local)', HOST, '192.0.2.7', false],
    ['any address of a loopback subnet (127/8 is routed to lo)', HOST, '127.0.0.2', true],
    ['IPv6 loopback', HOST, '::1', true],
    ['beside the IPv6 loopback /128', HOST, '::2', false],
    ['an IPv6 address written in full', HOST, 'fd00:0:0:0:0:0:0:2', true],
    ['a link-local address with its zone', HOST, 'fe80::fc:ff:fe00:1%eth0', true],
    ['an address no interface has', HOST, '198.51.100.7', false],
    ['nothing listed (every interface down)', {}, '192.0.2.2', false],
    ['not an address: left to bind() to refuse', HOST, 'exit.example.com', true],
  ];
  it.each(cases)('%s', (_name, interfaces, address, local) => {
    expect(localAddresses(interfaces)(address)).toBe(local);
  });
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: createLogger('test', 'info', out) };
}

/** Three exits for us (two on addresses, one upstream) and one for de, on a lister the test edits. */
function setup() {
  let addresses = ['10.0.0.1', '10.0.0.2', '10.0.0.3'];
  let broken = false;
  const lister = () => {
    if (broken) throw new Error('getifaddrs failed');
    return { lo: [v4('127.0.0.1', 8, true)], eth1: addresses.map((a) => v4(a, 24)) };
  };
  const pool = new ExitPool([
    { name: 'us-a', sourceAddress: '10.0.0.1', country: 'us' },
    { name: 'us-b', sourceAddress: '10.0.0.2', country: 'us' },
    { name: 'us-up', upstream: { url: 'http://u:p@10.9.0.1:3128' }, country: 'us' },
    { name: 'de-a', sourceAddress: '10.0.0.3', country: 'de' },
  ]);
  const registry = new Registry();
  const gauge = new Gauge({
    name: 'exit_missing',
    help: 'x',
    labelNames: ['plan', 'exit'],
    registers: [registry],
  });
  const { lines, logger } = capture();
  const watch = new ExitAddressWatch(pool, { plan: 'basic', logger, gauge, lister });
  const missingGauge = async () =>
    Object.fromEntries((await gauge.get()).values.map((v) => [v.labels.exit, v.value]));
  return {
    pool,
    watch,
    lines,
    missingGauge,
    remove: (a: string) => (addresses = addresses.filter((x) => x !== a)),
    add: (a: string) => (addresses = [...addresses, a]),
    fail: (b: boolean) => (broken = b),
  };
}

const names = (exits: { name: string }[]) => exits.map((e) => e.name);
/** Each of `n` sessions' first exit. */
const sessions = (pool: ExitPool, n = 40) =>
  Array.from({ length: n }, (_, i) => pool.sticky({ country: 'us' }, `seed-${i}`)[0]!.name);

describe('ExitAddressWatch', () => {
  it('leaves a missing exit out of every choice, logs and counts the change once, and takes it back', async () => {
    const t = setup();
    t.watch.check();
    expect(await t.missingGauge()).toEqual({ 'us-a': 0, 'us-b': 0, 'de-a': 0 });
    const rotating = () =>
      new Set(Array.from({ length: 6 }, () => t.pool.rotating({ country: 'us' })[0]!.name));
    expect(rotating()).toEqual(new Set(['us-a', 'us-b', 'us-up']));
    const before = sessions(t.pool);
    expect(before).toContain('us-b');

    t.remove('10.0.0.2');
    t.watch.check();
    t.watch.check();
    expect(rotating()).toEqual(new Set(['us-a', 'us-up']));
    // Sticky sessions on the missing exit move (to the same next one on every pod); the others stay.
    const during = sessions(t.pool);
    expect(during).not.toContain('us-b');
    for (const [i, exit] of before.entries()) if (exit !== 'us-b') expect(during[i]).toBe(exit);
    expect(t.pool.report().map((r) => r.s)).toEqual(['ok', 'missing', 'ok', 'ok']);
    expect(await t.missingGauge()).toEqual({ 'us-a': 0, 'us-b': 1, 'de-a': 0 });
    expect(t.lines.filter((l) => l.exit === 'us-b')).toEqual([
      expect.objectContaining({ level: 'warn', sourceAddress: '10.0.0.2', plan: 'basic' }),
    ]);

    t.add('10.0.0.2');
    t.watch.check();
    expect(rotating()).toEqual(new Set(['us-a', 'us-b', 'us-up']));
    expect(sessions(t.pool)).toEqual(before);
    expect(await t.missingGauge()).toEqual({ 'us-a': 0, 'us-b': 0, 'de-a': 0 });
    expect(t.lines.filter((l) => l.exit === 'us-b').map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('a location whose every exit is missing has no exit (the 503 no_exit)', () => {
    const t = setup();
    t.remove('10.0.0.3');
    t.watch.check();
    expect(names(t.pool.rotating({ country: 'de' }))).toEqual([]);
    expect(names(t.pool.sticky({ country: 'de' }, 'seed'))).toEqual([]);
    t.add('10.0.0.3');
    t.watch.check();
    expect(names(t.pool.rotating({ country: 'de' }))).toEqual(['de-a']);
  });

  it('keeps what it knew when the interfaces cannot be read', () => {
    const t = setup();
    t.remove('10.0.0.1');
    t.watch.check();
    t.fail(true);
    t.add('10.0.0.1');
    t.watch.check();
    expect(t.pool.report()[0]!.s).toBe('missing');
    expect(t.lines.at(-1)).toEqual(expect.objectContaining({ level: 'warn', err: 'getifaddrs failed' }));
  });
});

describe('ExitPool health', () => {
  it('reports each exit from its real connections: failing after a failure, ok after a success', () => {
    const pool = new ExitPool([
      { name: 'a', country: 'us' },
      { name: 'b', country: 'us' },
    ]);
    const [a, b] = pool.exits as [(typeof pool.exits)[0], (typeof pool.exits)[0]];
    expect(pool.report()).toEqual([
      { n: 'a', s: 'ok' },
      { n: 'b', s: 'ok' },
    ]);
    pool.markFailed(a, 'ECONNREFUSED', 1_700_000_000_500);
    pool.markFailed(a, 'upstream_407', 1_700_000_001_900);
    pool.markHealthy(b, 1_700_000_002_000);
    expect(pool.report()).toEqual([
      { n: 'a', s: 'failing', lf: 1_700_000_001, cf: 2, e: 'upstream_407' },
      { n: 'b', s: 'ok', ls: 1_700_000_002 },
    ]);
    pool.markHealthy(a, 1_700_000_003_000);
    expect(pool.report()[0]).toEqual({
      n: 'a',
      s: 'ok',
      ls: 1_700_000_003,
      lf: 1_700_000_001,
      e: 'upstream_407',
    });
  });
});
