import { describe, expect, it } from '@jest/globals';
import { DestinationGuard, embeddedIPv4, parseAuthority } from './guard.ts';

const guard = new DestinationGuard([], async (host) => {
  const table: Record<string, string[]> = {
    'public.example': ['93.184.216.34'],
    'rebind.example': ['93.184.216.34', '127.0.0.1'],
    'v6.example': ['2606:2800:220:1::1'],
    'mapped.example': ['::ffff:169.254.169.254'],
  };
  const addresses = table[host];
  if (!addresses) throw new Error('ENOTFOUND');
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
});

describe('DestinationGuard', () => {
  it.each([
    ['93.184.216.34', 80, true],
    ['[2606:2800:220:1::1]', 443, true],
    ['127.0.0.1', 80, false],
    ['0.0.0.0', 80, false],
    ['10.0.0.1', 80, false],
    ['100.100.100.200', 80, false],
    ['169.254.169.254', 80, false],
    ['172.31.255.255', 80, false],
    ['172.32.0.1', 80, true],
    ['192.168.1.1', 80, false],
    ['198.18.0.1', 80, false],
    ['224.0.0.1', 80, false],
    ['255.255.255.255', 80, false],
    ['[::1]', 80, false],
    ['[::]', 80, false],
    ['[::ffff:127.0.0.1]', 80, false],
    ['[::ffff:7f00:1]', 80, false],
    ['[64:ff9b::a9fe:a9fe]', 80, false],
    ['[fd00:ec2::254]', 80, false],
    ['[fe80::1]', 80, false],
    ['[ff02::1]', 80, false],
    ['[2002:7f00:1::]', 80, false],
    // IPv4-compatible ::a.b.c.d, which the URL parser rewrites to hex (::7f00:1), and the
    // local-use NAT64 prefix of RFC 8215.
    ['[::7f00:1]', 80, false],
    ['[::a9fe:a9fe]', 80, false],
    ['[64:ff9b:1::7f00:1]', 80, false],
    ['[64:ff9b:1:abcd::1]', 80, false],
    ['public.example', 80, true],
    ['public.example', 25, false],
    ['public.example', 587, false],
    ['rebind.example', 80, false],
    ['mapped.example', 80, false],
    ['v6.example', 80, true],
    ['localhost', 80, false],
    ['foo.localhost', 80, false],
    ['metadata.google.internal', 80, false],
    ['kubernetes.default.svc', 80, false],
    ['kubernetes.default.svc.cluster.local.', 80, false],
  ])('%s:%d allowed=%s', async (host, port, allowed) => {
    const result = await guard.check(host, port);
    expect(result.ok).toBe(allowed);
  });

  it('resolves names to the address it checked (the one to connect to)', async () => {
    expect(await guard.check('public.example', 80)).toEqual({
      ok: true,
      address: '93.184.216.34',
      family: 4,
    });
    expect(await guard.check('nothing.example', 80)).toEqual({ ok: false, status: 502, reason: 'dns_error' });
  });

  it('lets PROXYFLEET_GATEWAY_ALLOW_CIDRS exempt ranges', async () => {
    const open = new DestinationGuard(['127.0.0.0/8', '::1/128']);
    expect((await open.check('127.0.0.2', 80)).ok).toBe(true);
    expect((await open.check('[::ffff:127.0.0.1]', 80)).ok).toBe(true);
    expect((await open.check('10.0.0.1', 80)).ok).toBe(false);
    expect(() => new DestinationGuard(['nonsense'])).toThrow(/not a CIDR/);
  });

  it('resolves localhost and names under .localhost to loopback (RFC 6761), then judges that address', async () => {
    const noDns = async (): Promise<{ address: string; family: number }[]> => {
      throw new Error('no DNS for .localhost names');
    };
    const open = new DestinationGuard(['127.0.0.0/8'], noDns);
    expect(await open.check('origin.localhost', 8443)).toEqual({ ok: true, address: '127.0.0.1', family: 4 });
    expect(await open.check('LOCALHOST.', 80)).toEqual({ ok: true, address: '127.0.0.1', family: 4 });
    expect(await open.check('a.b.localhost', 80)).toEqual({ ok: true, address: '127.0.0.1', family: 4 });
    const closed = new DestinationGuard([], noDns);
    expect(await closed.check('origin.localhost', 8443)).toEqual({
      ok: false,
      status: 403,
      reason: 'destination_prohibited',
    });
    expect(await closed.check('localhost', 80)).toEqual({
      ok: false,
      status: 403,
      reason: 'destination_prohibited',
    });
  });

  it('judges every other name by the addresses it resolves to, not by its suffix', async () => {
    const resolver = async (host: string) =>
      host === 'api.internal'
        ? [{ address: '10.1.2.3', family: 4 }]
        : [{ address: '93.184.216.34', family: 4 }];
    expect(await new DestinationGuard(['10.0.0.0/8'], resolver).check('api.internal', 80)).toEqual({
      ok: true,
      address: '10.1.2.3',
      family: 4,
    });
    expect(await new DestinationGuard([], resolver).check('api.internal', 80)).toEqual({
      ok: false,
      status: 403,
      reason: 'destination_prohibited',
    });
  });

  it('answers the cloud metadata name with its fixed link-local address, then judges it', async () => {
    const noDns = async (): Promise<{ address: string; family: number }[]> => {
      throw new Error('no DNS');
    };
    expect(await new DestinationGuard([], noDns).check('metadata.google.internal', 80)).toEqual({
      ok: false,
      status: 403,
      reason: 'destination_prohibited',
    });
    expect(
      await new DestinationGuard(['169.254.0.0/16'], noDns).check('metadata.google.internal', 80),
    ).toEqual({
      ok: true,
      address: '169.254.169.254',
      family: 4,
    });
  });
});

describe('parseAuthority', () => {
  it.each([
    ['example.com:443', { host: 'example.com', port: 443 }],
    ['2130706433:80', { host: '127.0.0.1', port: 80 }],
    ['0x7f.1:80', { host: '127.0.0.1', port: 80 }],
    ['0177.0.0.1:80', { host: '127.0.0.1', port: 80 }],
    ['[::1]:443', { host: '[::1]', port: 443 }],
    ['EXAMPLE.com:443', { host: 'example.com', port: 443 }],
    ['example.com', undefined],
    ['example.com:0', undefined],
    ['example.com:70000', undefined],
    ['user@example.com:443', undefined],
    ['exa mple.com:443', undefined],
  ])('%s', (authority, expected) => {
    expect(parseAuthority(authority)).toEqual(expected);
  });

  it('reads embedded IPv4 addresses', () => {
    expect(embeddedIPv4('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(embeddedIPv4('::ffff:a00:1')).toBe('10.0.0.1');
    expect(embeddedIPv4('2606:2800:220:1::1')).toBeUndefined();
  });
});
