// jest hooks for API integration tests: a test database and an API on it for the whole file.
import { afterAll, beforeAll } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../test/db.ts';
import { startTestApi, type TestApi } from './testing.ts';

export interface ApiFixture {
  db: TestDatabase;
  api: TestApi;
}

/** Starts both before the file's tests and stops them after; read the fields inside tests. */
export function useTestApi(options: Parameters<typeof startTestApi>[1] = {}): ApiFixture {
  const fixture = {} as ApiFixture;
  beforeAll(async () => {
    fixture.db = await createTestDatabase();
    fixture.api = await startTestApi(fixture.db, options);
  });
  afterAll(async () => {
    await fixture.api?.close();
    await fixture.db?.drop();
  });
  return fixture;
}
