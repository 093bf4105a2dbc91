// `success: true` on every customer answer (docs/adr/0012, docs/adr/0100): the OpenAPI document
// names any /api/v1 success answer whose schema does not require it, and every customer GET is
// called to show that the answer carries what the document says. A 204 has no body to carry it.
// The answers that are not JSON (a CSV, a PDF) are in the document with their media types.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';

interface Schema {
  required?: string[];
  properties?: Record<string, { enum?: unknown[]; type?: string }>;
}
interface Operation {
  parameters?: { name: string; in: string; required?: boolean }[];
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
}
type Doc = { paths: Record<string, Record<string, Operation>> };

/** The document describes itself, and a file (an invoice's PDF) is no JSON answer: no envelope. */
const NOT_AN_ANSWER = new Set(['/api/v1/openapi.json', '/api/v1/invoices/{invoiceId}/pdf']);
/** Path and required query parameters a GET can be called with. */
const SAMPLE: Record<string, string> = { product: 'basic' };

let db: TestDatabase;
let api: TestApi;
let key: string;
let doc: Doc;

const customerOperations = () =>
  Object.entries(doc.paths)
    .filter(([path]) => path.startsWith('/api/v1/') && !NOT_AN_ANSWER.has(path))
    .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ path, method, op })));

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db);
  key = (await accountWithBandwidth(db.pool, { basic: 1e9 })).apiKey;
  doc = (await call(api.url, '/api/v1/openapi.json')).body as Doc;
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('success: true on every customer answer', () => {
  test('the OpenAPI document requires it in every /api/v1 success answer with a body', () => {
    const operations = customerOperations();
    expect(operations.length).toBeGreaterThan(20);
    const lacking = operations.flatMap(({ path, method, op }) =>
      Object.entries(op.responses)
        .filter(([status]) => /^2\d\d$/.test(status) && status !== '204')
        .filter(([, r]) => {
          const schema = r.content?.['application/json']?.schema;
          const success = schema?.properties?.success;
          return !(
            schema?.required?.includes('success') &&
            success?.enum?.length === 1 &&
            success.enum[0] === true
          );
        })
        .map(([status]) => `${method.toUpperCase()} ${path} ${status}`),
    );
    expect(lacking).toEqual([]);
  });

  test('every customer GET answers with it, as the document says', async () => {
    const required = (op: Operation) =>
      (op.parameters ?? []).filter((p) => p.in === 'query' && p.required).map((p) => p.name);
    const gets = customerOperations().filter(
      ({ method, path, op }) =>
        method === 'get' &&
        [...[...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!), ...required(op)].every((n) => n in SAMPLE),
    );
    expect(gets.length).toBeGreaterThan(8);
    const answers = await Promise.all(
      gets.map(async ({ path, op }) => {
        const query = new URLSearchParams(
          required(op).map((n): [string, string] => [n, SAMPLE[n]!]),
        ).toString();
        const res = await call(
          api.url,
          path.replace(/\{(\w+)\}/g, (_m, name: string) => SAMPLE[name]!) + (query ? `?${query}` : ''),
          { key },
        );
        return { path, status: res.status, success: (res.body as { success?: unknown }).success };
      }),
    );
    expect(answers.filter((a) => a.status !== 200 || a.success !== true)).toEqual([]);
  });

  test('the answers that are not JSON are in the document with their media types', () => {
    const media = (path: string) => Object.keys(doc.paths[path]?.get?.responses['200']?.content ?? {});
    expect(media('/api/v1/usage/history')).toEqual(['application/json', 'text/csv']);
    expect(media('/api/v1/invoices/{invoiceId}/pdf')).toEqual(['application/pdf']);
    expect(media('/admin/v1/invoices.csv')).toEqual(['text/csv']);
  });
});
