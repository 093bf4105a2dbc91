import { describe, expect, it } from '@jest/globals';
import { loadGatewayConfig } from './config.ts';

const base = { PROXYFLEET_GATEWAY_CONFIG: '/etc/proxyfleet/gateway.yaml' };

describe('gateway configuration: TLS files', () => {
  it('takes both files, or neither', () => {
    expect(loadGatewayConfig(base).PROXYFLEET_GATEWAY_TLS_CERT).toBeUndefined();
    const both = loadGatewayConfig({
      ...base,
      PROXYFLEET_GATEWAY_TLS_CERT: '/tls/tls.crt',
      PROXYFLEET_GATEWAY_TLS_KEY: '/tls/tls.key',
    });
    expect([both.PROXYFLEET_GATEWAY_TLS_CERT, both.PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS]).toEqual([
      '/tls/tls.crt',
      10,
    ]);
  });

  it('refuses one without the other, naming the missing variable', () => {
    expect(() => loadGatewayConfig({ ...base, PROXYFLEET_GATEWAY_TLS_CERT: '/tls/tls.crt' })).toThrow(
      /PROXYFLEET_GATEWAY_TLS_KEY: set both PROXYFLEET_GATEWAY_TLS_CERT and PROXYFLEET_GATEWAY_TLS_KEY, or neither/,
    );
  });
});

describe('gateway configuration: flush interval', () => {
  it('defaults to 2 s and takes fractions', () => {
    expect(loadGatewayConfig(base).PROXYFLEET_GATEWAY_FLUSH_SECONDS).toBe(2);
    expect(
      loadGatewayConfig({ ...base, PROXYFLEET_GATEWAY_FLUSH_SECONDS: '0.5' })
        .PROXYFLEET_GATEWAY_FLUSH_SECONDS,
    ).toBe(0.5);
  });

  it('refuses an interval that would flush constantly or leave minutes unbilled, naming the variable', () => {
    for (const value of ['0', '61', 'soon'])
      expect(() => loadGatewayConfig({ ...base, PROXYFLEET_GATEWAY_FLUSH_SECONDS: value })).toThrow(
        /PROXYFLEET_GATEWAY_FLUSH_SECONDS/,
      );
  });
});

describe('gateway configuration: PROXY protocol', () => {
  it('takes a mode and the trusted ranges; unset, the spec decides', () => {
    expect(loadGatewayConfig(base).PROXYFLEET_GATEWAY_PROXY_PROTOCOL).toBeUndefined();
    const c = loadGatewayConfig({
      ...base,
      PROXYFLEET_GATEWAY_PROXY_PROTOCOL: 'required',
      PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: '10.0.0.0/8, fd00::/8',
    });
    expect(c.PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS).toEqual(['10.0.0.0/8', 'fd00::/8']);
  });

  it('refuses an unknown mode, a range that is not one, and a mode with nothing trusted, naming the variable', () => {
    expect(() => loadGatewayConfig({ ...base, PROXYFLEET_GATEWAY_PROXY_PROTOCOL: 'on' })).toThrow(
      /PROXYFLEET_GATEWAY_PROXY_PROTOCOL/,
    );
    expect(() =>
      loadGatewayConfig({ ...base, PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: '10.0.0.0/33' }),
    ).toThrow(/PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: comma-separated address ranges/);
    expect(() => loadGatewayConfig({ ...base, PROXYFLEET_GATEWAY_PROXY_PROTOCOL: 'optional' })).toThrow(
      /PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: PROXYFLEET_GATEWAY_PROXY_PROTOCOL optional or required needs/,
    );
  });
});
