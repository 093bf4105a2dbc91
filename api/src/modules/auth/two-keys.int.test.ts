// A request that names two different keys, one in X-API-Key and another in Authorization: Bearer,
// is refused with 400 CONFLICTING_API_KEYS before either is looked up (docs/api.md,
// "Authentication"): it is not served as whichever header happens to win. The same key in both is
// one key, and an Authorization header that is not a bearer token is not a second key.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createNamedKey } from '#common/accounts/keys.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let mine: { id: string; key: string; named: string };
let theirs: { id: string; key: string };

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db);
  const a = await accountWithBandwidth(db.pool);
  mine = { id: a.id, key: a.apiKey, named: (await createNamedKey(db.pool, a.id, 'ci')).apiKey };
  const b = await accountWithBandwidth(db.pool);
  theirs = { id: b.id, key: b.apiKey };
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

const account = (headers: Record<string, string>) => call(api.url, '/api/v1/account', { headers });
const REFUSED = {
  status: 400,
  body: { success: false, error: 'X-API-Key and the bearer token are different keys; send one' },
};

test("two accounts' keys in one request: 400, served as neither", async () => {
  expect(await account({ 'x-api-key': mine.key, authorization: `Bearer ${theirs.key}` })).toMatchObject(
    REFUSED,
  );
  expect(await account({ 'x-api-key': theirs.key, authorization: `bearer ${mine.key}` })).toMatchObject(
    REFUSED,
  );
});

test('two keys of one account, or a valid key beside a wrong one: 400 as well', async () => {
  expect(await account({ 'x-api-key': mine.key, authorization: `Bearer ${mine.named}` })).toMatchObject(
    REFUSED,
  );
  expect(await account({ 'x-api-key': mine.key, authorization: 'Bearer svc_live_nope' })).toMatchObject(
    REFUSED,
  );
});

test('the same key in both headers, or a non-bearer Authorization beside X-API-Key: served', async () => {
  const same = await account({ 'x-api-key': mine.key, authorization: `Bearer ${mine.key}` });
  expect(same).toMatchObject({ status: 200, body: { id: mine.id } });
  const basic = await account({ 'x-api-key': mine.key, authorization: 'Basic dXNlcjpwYXNz' });
  expect(basic).toMatchObject({ status: 200, body: { id: mine.id } });
});
