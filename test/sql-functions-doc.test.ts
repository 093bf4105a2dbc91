// docs/sql-functions.md is generated from migrations/functions/ and must stay equal to it, as
// docs/errors.md stays equal to the error table: a new function, a moved file or a new call that
// is not on the page fails here (rewrite the page with `npm run -s docs:sql`).
import { readFile } from 'node:fs/promises';
import { expect, test } from '@jest/globals';
import { loadFunctions } from '#common/db/migrate.ts';
import { callGraph, DOC, generatedDoc } from '../scripts/sql-functions-doc.ts';

test('docs/sql-functions.md is the call graph of the function files', async () => {
  expect(await readFile(DOC, 'utf8')).toBe(await generatedDoc());
});

test("every function file sits in its room's folder (migrations/functions/<room>/, docs/adr/0088)", async () => {
  expect((await loadFunctions()).filter((f) => f.room === undefined).map((f) => f.file)).toEqual([]);
});

test('a call is a use of another function file in the code, not in a comment', () => {
  const file = (room: string, name: string, body: string) => ({
    name,
    room,
    file: `${room}/${name}.sql`,
    sql: `-- ${name} calls charge() only in this comment\nCREATE OR REPLACE FUNCTION ${name}() ${body}`,
    checksum: '',
  });
  const graph = callGraph([
    file('billing', 'charge', 'RETURNS void AS $$ BEGIN PERFORM notify(); END $$;'),
    file('email', 'notify', 'RETURNS integer AS $$ SELECT 1 $$;'),
    file(
      'billing',
      'rearm',
      'RETURNS trigger AS $$ BEGIN RETURN NEW; END $$;\nCREATE OR REPLACE TRIGGER rearm AFTER UPDATE ON balances FOR EACH ROW EXECUTE FUNCTION rearm();',
    ),
  ]);
  expect(graph.map(({ name, calls, calledBy, triggers }) => ({ name, calls, calledBy, triggers }))).toEqual([
    { name: 'charge', calls: ['notify'], calledBy: [], triggers: [] },
    { name: 'notify', calls: [], calledBy: ['charge'], triggers: [] },
    { name: 'rearm', calls: [], calledBy: [], triggers: ['balances'] },
  ]);
});
