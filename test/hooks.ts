// jest's hooks, from the globals jest gives every test file. Not imported from @jest/globals,
// which throws when loaded outside jest: test support is also loaded by processes the tests spawn
// (test/bin/exit-ports-load.ts) and by the benchmarks (loadtest/bench-api.ts imports test/api.ts).
import type { afterAll, beforeAll } from '@jest/globals';

export const jestHooks = () =>
  globalThis as unknown as { beforeAll: typeof beforeAll; afterAll: typeof afterAll };
