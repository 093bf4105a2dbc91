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
