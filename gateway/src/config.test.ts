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
