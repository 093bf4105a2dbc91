import { describe, expect, it } from '@jest/globals';
import { mayUpdateGolden } from './golden.ts';

describe('golden files', () => {
  it('are updated on request on a developer machine only', () => {
    expect(mayUpdateGolden({})).toBe(false);
    expect(mayUpdateGolden({ UPDATE_GOLDEN: '1' })).toBe(true);
    expect(mayUpdateGolden({ UPDATE_GOLDEN: '1', CI: 'false' })).toBe(true);
    expect(() => mayUpdateGolden({ UPDATE_GOLDEN: '1', CI: 'true' })).toThrow(/refused under CI/);
    expect(mayUpdateGolden({ CI: 'true' })).toBe(false);
  });
});
