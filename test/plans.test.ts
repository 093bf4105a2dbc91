// The plan capabilities are stated once (common/src/products.ts); the gateway's credential
// grammars, which parse what the API generates, must agree with them plan by plan.
import { describe, expect, test } from '@jest/globals';
import { PLAN_CAPABILITIES, PRODUCTS } from '#common/products.ts';
import { GRAMMARS } from '#common/credentials.ts';

describe('plan capabilities', () => {
  test.each(PRODUCTS)('%s: the gateway grammar reads exactly what the table says', (plan) => {
    const can = PLAN_CAPABILITIES[plan];
    const grammar = GRAMMARS[plan];
    const keys = grammar.slots.map((slot) => slot.key);
    expect(grammar.side).toBe(can.side);
    expect(keys.includes('state') && keys.includes('city')).toBe(can.place);
    const minutes = keys.find((k) => k === 'lifetime' || k === 'sessionduration');
    expect(minutes).toBe(can.sessionMinutes);
  });
});
