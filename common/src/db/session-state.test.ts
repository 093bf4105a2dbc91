// Behind a transaction pooler (docs/adr/0068) a pooled connection is a different server session
// from one transaction to the next: session state set on it (SET, set_config(..., false), a
// session advisory lock, LISTEN, a temporary table, a prepared statement or a held cursor) is
// lost, or lands on another client's transaction. Only the session connections may hold any:
// the change feed (LISTEN), the migrator and the worker's leader (session locks, SET). This test
// fails when product code or a migration starts using session state anywhere else.
import { describe, expect, it } from '@jest/globals';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from '#test/process.ts';

/** Session state in SQL; transaction-scoped forms (SET LOCAL, pg_advisory_xact_lock) are fine. */
const SESSION_STATE: [string, RegExp][] = [
  [
    'a session SET',
    /(?:^|[;'"`(]\s*|\bEXECUTE\s+')SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b)(?:SESSION\s+)?[a-z_.]+\s*(?:=|\bTO\b)/i,
  ],
  ['set_config', /\bset_config\s*\(/i],
  ['a session advisory lock', /\bpg_(?:try_)?advisory_lock(?:_shared)?\s*\(/i],
  ['LISTEN', /(?:^|['"`;]\s*)LISTEN\s/i],
  ['a temporary table', /\bCREATE\s+(?:GLOBAL\s+|LOCAL\s+)?TEMP(?:ORARY)?\s+TABLE/i],
  ['PREPARE', /(?:^|['"`;]\s*)PREPARE\s+[a-z_]/i],
  ['a cursor held past its transaction', /\bWITH\s+HOLD\b/i],
  ['a named prepared statement', /\bquery\s*\(\s*\{[^}]*\bname\s*:/],
];

/** The session connections, which keep their session (session URL, a dedicated client). */
const ALLOWED: Record<string, string[]> = {
  'common/src/db/changes.ts': ['LISTEN'],
  'common/src/db/migrate.ts': ['a session SET', 'a session advisory lock'],
  'worker/src/leader.ts': ['a session SET', 'a session advisory lock'],
};

const SOURCE_TREES = ['api/src', 'common/src', 'gateway/src', 'worker/src', 'controllers/src', 'dev'];

async function files(dir: string, keep: (file: string) => boolean): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await files(rel, keep)));
    else if (keep(rel)) out.push(rel);
  }
  return out;
}

function findings(text: string, file: string): string[] {
  const allowed = ALLOWED[file] ?? [];
  return SESSION_STATE.filter(([what, re]) => !allowed.includes(what) && re.test(text)).map(
    ([what]) => `${file}: ${what}`,
  );
}

describe('session state behind a transaction pooler', () => {
  it('is held only by the session connections (product code and migrations)', async () => {
    const sources = (
      await Promise.all(
        SOURCE_TREES.map((tree) => files(tree, (f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))),
      )
    ).flat();
    const migrations = await files('migrations', (f) => f.endsWith('.sql'));
    expect(sources.length).toBeGreaterThan(100);
    expect(migrations.length).toBeGreaterThan(10);
    const found: string[] = [];
    for (const file of [...sources, ...migrations])
      found.push(...findings(await readFile(path.join(REPO_ROOT, file), 'utf8'), file));
    expect(found).toEqual([]);
  });

  it('recognises each kind it looks for, and not its transaction-scoped form', () => {
    const flagged = (sql: string) => findings(`client.query('${sql}')`, 'x.ts').length > 0;
    for (const sql of [
      'SET statement_timeout = 0',
      'SET SESSION search_path TO x',
      "SELECT set_config('a.b', 'c', false)",
      'SELECT pg_advisory_lock(1)',
      'SELECT pg_try_advisory_lock(1)',
      'LISTEN proxyfleet_changes',
      'CREATE TEMP TABLE t (x int)',
      'PREPARE q AS SELECT 1',
      'DECLARE c CURSOR WITH HOLD FOR SELECT 1',
    ])
      expect([sql, flagged(sql)]).toEqual([sql, true]);
    expect(findings("pool.query({ name: 'q', text: 'SELECT 1' })", 'x.ts')).toHaveLength(1);
    for (const sql of [
      'SET LOCAL statement_timeout = 0',
      'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE',
      'SELECT pg_advisory_xact_lock(1)',
      'UPDATE balances SET used_bytes = 1',
      'INSERT INTO x VALUES (1) ON CONFLICT (id) DO UPDATE SET y = 2',
    ])
      expect([sql, flagged(sql)]).toEqual([sql, false]);
  });
});
