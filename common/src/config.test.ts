import { describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import {
  ConfigError,
  baseEnv,
  bool,
  cidrList,
  encryptionKey,
  parseConfig,
  port,
  relayUrlEnv,
} from './config.ts';
import { loadApiConfig } from '#api/config.ts';

const schema = z.object({
  ...baseEnv,
  PORT: port(8080),
  FLAG: bool(false),
  KEY: encryptionKey,
  CIDRS: cidrList,
});

describe('parseConfig', () => {
  it('applies defaults and coerces values', () => {
    const config = parseConfig(schema, {
      KEY: 'a'.repeat(64),
      PORT: '9000',
      FLAG: 'yes',
      CIDRS: '127.0.0.0/8, 10.0.0.0/8',
    });
    expect(config.PORT).toBe(9000);
    expect(config.FLAG).toBe(true);
    expect(config.KEY).toHaveLength(32);
    expect(config.CIDRS).toEqual(['127.0.0.0/8', '10.0.0.0/8']);
    expect(config.PROXYFLEET_DATA_DIR).toBe('./.proxyfleet');
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it('reports every problem with the path of the variable', () => {
    let error: unknown;
    try {
      parseConfig(schema, { PORT: '70000', FLAG: 'maybe', KEY: 'short', DATABASE_URL: 'mysql://x' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(4);
    expect(problems.some((p) => p.startsWith('PORT:'))).toBe(true);
    expect(problems.some((p) => p.startsWith('FLAG:'))).toBe(true);
    expect(problems.some((p) => p.startsWith('KEY:') && p.includes('32 bytes'))).toBe(true);
    expect(problems.some((p) => p.startsWith('DATABASE_URL:') && p.includes('postgres'))).toBe(true);
    expect((error as Error).message).toContain('invalid configuration');
  });

  it('freezes the result, nested values included', () => {
    const config = parseConfig(schema, { KEY: 'a'.repeat(64), CIDRS: '1.2.3.0/24' });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.CIDRS)).toBe(true);
    expect(() => {
      (config as { PORT: number }).PORT = 1;
    }).toThrow(TypeError);
  });

  it('refuses a relay URL still holding a Kubernetes variable reference the kubelet left unexpanded', () => {
    const relay = z.object(relayUrlEnv);
    const url = 'ws://$(PROXYFLEET_RELAY_SERVICE_HOST):$(PROXYFLEET_RELAY_SERVICE_PORT_STREAM)/changes';
    expect(() => parseConfig(relay, { PROXYFLEET_RELAY_URL: url })).toThrow(
      /PROXYFLEET_RELAY_URL: holds an unexpanded Kubernetes variable reference .*relay.address=serviceEnv/,
    );
    // One of several unexpanded is refused as well; the expanded form and DNS names are accepted.
    expect(() => parseConfig(relay, { PROXYFLEET_RELAY_URL: `ws://10.96.0.7:8095/changes,${url}` })).toThrow(
      /unexpanded/,
    );
    for (const ok of [
      'ws://10.96.0.7:8095/changes',
      'ws://proxyfleet-relay.proxyfleet.svc:8095/changes',
      'ws://a:8095/changes, wss://b:8095/changes',
    ])
      expect(parseConfig(relay, { PROXYFLEET_RELAY_URL: ok }).PROXYFLEET_RELAY_URL).toBe(ok);
    expect(parseConfig(relay, {}).PROXYFLEET_RELAY_URL).toBeUndefined();
  });

  it('gives secrets no defaults: the api entrypoint refuses to start without them', () => {
    expect(() => loadApiConfig({})).toThrow(/PROXYFLEET_ADMIN_TOKEN/);
    expect(() => loadApiConfig({})).toThrow(/PROXYFLEET_CREDENTIALS_KEY/);
  });
});
