// docs/errors.md, "Message style", checked over every message: each code's message in the table,
// rendered with a count of 1 and of 5, and every validation detail that the request schemas of
// every route produce for a corpus of bad inputs.
import { describe, expect, test } from '@jest/globals';
import type { z } from 'zod';
import { AppError, ERRORS, formatMessage, type ErrorCode } from '#common/errors.ts';
import { validationError, type RouteDef } from './http/route.ts';
import { accountRoutes } from './modules/account/routes.ts';
import { adminRoutes } from './modules/admin/routes.ts';
import { listAccountsQuery } from './modules/admin/schemas.ts';
import { proxiesRoutes } from './modules/proxies/routes.ts';
import { usageRoutes } from './modules/usage/routes.ts';
import { adminTargetRoutes, targetRoutes } from './modules/targets/routes.ts';
import { adminSubUserRoutes, subUserRoutes } from './modules/sub-users/routes.ts';

/** Messages whose words the product specification fixes (spec section 7). */
const SPEC_FIXED: ReadonlySet<ErrorCode> = new Set(['NO_BANDWIDTH']);

describe('every error message', () => {
  const codes = Object.keys(ERRORS) as ErrorCode[];
  test.each(codes)('%s is one sentence in sentence case with counts in agreement', (code) => {
    const template = ERRORS[code].message;
    expect(template).toMatch(/^[A-Z]/);
    expect(template).not.toMatch(/\{\w+\} [a-z]+s\b/); // "{n} seconds": use {n|second}
    for (const n of [1, 5]) {
      const message = new AppError(code, {
        plan: 'basic',
        target: 'country us',
        detail: 'x: must be y',
        limit: n,
        retryAfter: n,
        // Amounts are passed already written with their unit ("5 GB", "12.00 USD").
        status: 'paid',
        left: `${n} GB`,
        available: `${n}.00 USD`,
        reason: 'the card was declined',
        country: 'DE',
        requested: n,
      }).message;
      expect(message).not.toMatch(/\{/);
      expect(message).not.toMatch(/\b1 [a-z]+s\b/);
      if (!SPEC_FIXED.has(code)) {
        expect(message).not.toMatch(/\.$/);
        expect(message).not.toMatch(/\. [A-Z]/);
      }
    }
  });
  test('a count agrees with its number', () => {
    expect(formatMessage('retry after {n|second}', { n: 1 })).toBe('retry after 1 second');
    expect(formatMessage('retry after {n|second}', { n: 30 })).toBe('retry after 30 seconds');
  });
});

describe('every validation detail', () => {
  const stub = {} as never;
  const routes: RouteDef[] = [
    ...accountRoutes(stub),
    ...usageRoutes(stub, stub),
    ...targetRoutes(stub),
    ...adminTargetRoutes(stub),
    ...proxiesRoutes({ pool: stub, credentialsKey: Buffer.alloc(32), fallbackHost: 'x' }),
    ...adminRoutes({
      pool: stub,
      credentialsKey: Buffer.alloc(32),
      accounts: stub,
      waitForApiCaches: stub,
      linkBase: stub,
    }),
    ...subUserRoutes({ pool: stub, credentialsKey: Buffer.alloc(32), limit: 50 }),
    ...adminSubUserRoutes({ pool: stub, credentialsKey: Buffer.alloc(32), limit: 50 }),
  ];
  const schemas: [string, z.ZodType][] = [['GET /admin/v1/accounts (query)', listAccountsQuery]];
  for (const route of routes) {
    if (route.body) schemas.push([`${route.method.toUpperCase()} ${route.path} (body)`, route.body]);
    if (route.query) schemas.push([`${route.method.toUpperCase()} ${route.path} (query)`, route.query]);
  }
  const fieldsOf = (schema: z.ZodType): string[] => {
    const shape = (schema as { shape?: Record<string, unknown> }).shape;
    return shape ? Object.keys(shape) : ['provider', 'email', 'name', 'gb', 'product'];
  };
  const corpus = (fields: string[]): unknown[] => [
    {},
    { unexpected: 1 },
    ...[null, 'x', '', -1, 0, 1.5, 1e12, true, [], {}, 'a'.repeat(400), 'a\0b', 'zz', '東京'].map((value) =>
      Object.fromEntries(fields.map((f) => [f, value])),
    ),
  ];
  test.each(schemas)('%s', (_name, schema) => {
    const details = new Set<string>();
    for (const input of corpus(fieldsOf(schema))) {
      const parsed = schema.safeParse(input);
      if (parsed.success) continue;
      const message = validationError(parsed.error).message;
      expect(message).toMatch(/^Invalid request: /);
      for (const part of message.slice('Invalid request: '.length).split('; ')) details.add(part);
    }
    expect(details.size).toBeGreaterThan(0);
    for (const detail of details) {
      expect(detail).toMatch(/^([\w.]+: )?[a-z]/); // a rule about several fields has no field
      expect(detail).not.toMatch(/\.$/);
      expect(detail).not.toMatch(/Invalid input|Too (small|big)|expected \w+, received/);
      expect(detail).not.toMatch(/\b1 [a-z]+s\b/);
    }
  });
});
