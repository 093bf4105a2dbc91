// The ProxyGateway spec's throttle (docs/adr/0035): optional, bounded like an account's cap.
import { describe, expect, it } from '@jest/globals';
import { proxyGatewaySpecSchema } from './spec.ts';

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
