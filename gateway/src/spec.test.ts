// The ProxyGateway spec's throttle (docs/adr/0035): optional, bounded like an account's cap; its
// PROXY protocol (docs/adr/0102): off unless asked, trusted ranges required, the environment's first.
import { describe, expect, it } from '@jest/globals';
import { proxyGatewaySchema, proxyGatewaySpecSchema, withProxyProtocolEnv } from './spec.ts';

const base = { plan: 'basic', port: 12321, advertisedHost: 'h', exits: [{ name: 'direct', country: '*' }] };

describe('spec.throttle', () => {
  it('is optional: absent, no plan default', () => {
    expect(proxyGatewaySpecSchema.parse(base).throttle).toBeUndefined();
  });

  it('accepts a cap within 64 KiB/s..10 GB/s', () => {
    const spec = proxyGatewaySpecSchema.parse({ ...base, throttle: { bytesPerSecond: 1_048_576 } });
    expect(spec.throttle).toEqual({ bytesPerSecond: 1_048_576 });
  });

  it.each([[65_535], [10_000_000_001], [1.5e5 + 0.5], ['1MB'], [undefined]])(
    'refuses bytesPerSecond %p, naming the field',
    (bytesPerSecond) => {
      const parsed = proxyGatewaySpecSchema.safeParse({ ...base, throttle: { bytesPerSecond } });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(['throttle', 'bytesPerSecond']);
    },
  );
});

describe('spec.proxyProtocol', () => {
  it('is off when absent; takes a mode and the trusted ranges', () => {
    expect(proxyGatewaySpecSchema.parse(base).proxyProtocol).toBeUndefined();
    const spec = proxyGatewaySpecSchema.parse({
      ...base,
      proxyProtocol: { mode: 'required', trustedCidrs: ['10.0.0.0/8', '2001:db8::/32', '192.0.2.1'] },
    });
    expect(spec.proxyProtocol).toEqual({
      mode: 'required',
      trustedCidrs: ['10.0.0.0/8', '2001:db8::/32', '192.0.2.1'],
    });
  });

  it.each([
    [{ mode: 'on', trustedCidrs: ['10.0.0.0/8'] }, ['proxyProtocol', 'mode']],
    [{ mode: 'optional', trustedCidrs: ['10.0.0.0/33'] }, ['proxyProtocol', 'trustedCidrs', 0]],
    [{ mode: 'optional', trustedCidrs: ['example.com/8'] }, ['proxyProtocol', 'trustedCidrs', 0]],
    [{ mode: 'required' }, ['proxyProtocol', 'trustedCidrs']],
  ])('refuses %p, naming the field', (proxyProtocol, path) => {
    const parsed = proxyGatewaySpecSchema.safeParse({ ...base, proxyProtocol });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(path);
  });

  it('the environment replaces the spec when set, and only then', () => {
    const gateway = proxyGatewaySchema.parse({
      apiVersion: 'proxyfleet.io/v1alpha1',
      kind: 'ProxyGateway',
      metadata: { name: 'basic' },
      spec: { ...base, proxyProtocol: { mode: 'optional', trustedCidrs: ['10.0.0.0/8'] } },
    });
    const unset = { PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: [] };
    expect(withProxyProtocolEnv(gateway, unset)).toBe(gateway);
    const set = withProxyProtocolEnv(gateway, {
      PROXYFLEET_GATEWAY_PROXY_PROTOCOL: 'off',
      PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: [],
    });
    expect(set.spec.proxyProtocol).toEqual({ mode: 'off', trustedCidrs: [] });
  });
});
