// GET /api/v1/locations and generate's refusal of targets nothing serves (docs/adr/0100): the
// places come from the plan's endpoint row as the operator and `npm start` write it from the
// ProxyGateway's exits; "*" serves every country; a plan whose gateways said nothing refuses nothing.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { upsertGatewayEndpoint, type ServedLocation } from '#common/gateway-endpoints.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let key: string;

const endpoint = (plan: string, locations: ServedLocation[] | null) =>
  upsertGatewayEndpoint(
    db.pool,
    { plan: plan as 'basic', host: `${plan}.example.test`, port: 1000, locations },
    'test',
  );
const locations = (query: string) => call(api.url, `/api/v1/locations${query}`, { key });
const generate = (target: Record<string, unknown>, provider = 'basic') =>
  call(api.url, '/api/v1/proxies/generate', {
    key,
    body: { provider, sessionType: 'rotating', count: 1, ...target },
  });

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db);
  key = (await accountWithBandwidth(db.pool, { basic: 1e9, advanced: 1e9, light: 1e9 })).apiKey;
  await endpoint('basic', [
    { country: 'us', state: 'texas', city: 'dallas' },
    { country: 'us', state: 'texas', city: 'austin' },
    { country: 'us' },
    { country: 'de' },
  ]);
  await endpoint('advanced', [{ country: '*' }]);
  await endpoint('light', null);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('GET /api/v1/locations', () => {
  test("a plan's countries, states and cities, sorted", async () => {
    expect(await locations('?product=basic')).toMatchObject({
      status: 200,
      body: {
        success: true,
        product: 'basic',
        known: true,
        everyCountry: false,
        countries: [
          { country: 'de', states: [] },
          { country: 'us', states: [{ state: 'texas', cities: ['austin', 'dallas'] }] },
        ],
      },
    });
  });

  test('a "*" exit serves every country and says so; a plan whose gateways said nothing says that', async () => {
    expect((await locations('?product=advanced')).body).toMatchObject({ known: true, everyCountry: true });
    expect((await locations('?product=light')).body).toMatchObject({
      known: false,
      everyCountry: false,
      countries: [],
    });
    expect((await locations('?product=mobile')).body).toMatchObject({ known: false, countries: [] });
  });

  test.each([
    ['', 'product: '],
    ['?product=premium', 'product: must be one of light, basic, advanced, mobile, datacenter'],
    ['?product=basic&country=us', 'country: unknown field'],
  ])('400 in the spec format for %j', async (query, message) => {
    const res = await locations(query);
    expect(res).toMatchObject({ status: 400, body: { success: false } });
    expect(res.body.error).toContain(message);
  });
});

describe('generate refuses a target nothing serves', () => {
  test.each([
    [{ country: 'us' }],
    [{ country: 'de' }],
    [{ country: 'us', state: 'texas' }],
    [{ country: 'us', state: 'texas', city: 'dallas' }],
  ])('serves %j', async (target) => {
    expect((await generate(target)).status).toBe(200);
  });

  test.each([
    [{ country: 'fr' }, 'country fr'],
    [{ country: 'us', state: 'ohio' }, 'country us, state ohio'],
    [{ country: 'us', state: 'texas', city: 'houston' }, 'country us, state texas, city houston'],
    [{ country: 'de', state: 'bavaria' }, 'country de, state bavaria'],
  ])('400 for %j, naming it and pointing at /locations', async (target, named) => {
    expect(await generate(target)).toMatchObject({
      status: 400,
      body: {
        success: false,
        error: `No basic exit serves ${named}; see GET /api/v1/locations?product=basic`,
      },
    });
  });

  test('a "*" exit serves any country; a plan whose gateways said nothing refuses nothing', async () => {
    expect((await generate({ country: 'jp' }, 'advanced')).status).toBe(200);
    expect((await generate({ country: 'jp' }, 'light')).status).toBe(200);
  });
});
