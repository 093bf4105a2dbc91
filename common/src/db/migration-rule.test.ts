// The expand/contract rule (migration-rule.ts, docs/adr/0124): the migrations newer than the
// previous release only expand, and the rule refuses a contract step without its marker.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MIGRATIONS_DIR } from './migrate.ts';
import {
  checkMigration,
  checkMigrations,
  compareReleases,
  loadPreviousRelease,
  splitStatements,
  type PreviousRelease,
} from './migration-rule.ts';

const previous: PreviousRelease = {
  release: 'v0.1.0',
  commit: '0'.repeat(40),
  lastMigration: 175,
  functions: ['gateway_heartbeat_v2', 'lease_acquire'],
};
const reasons = (sql: string) => checkMigration('0176_x.sql', sql, previous).map((v) => v.reason);

/** A migration that contracts what a pod of the previous release uses, in every way the rule knows. */
const VIOLATES = `-- A fixture: every contract step, none marked.
ALTER TABLE accounts DROP COLUMN legacy_note;
ALTER TABLE accounts RENAME COLUMN email TO email_address;
ALTER TABLE "Accounts" RENAME TO customers;
DROP TABLE IF EXISTS usage_history_daily, usage_history_hourly CASCADE;
ALTER TABLE balances ALTER COLUMN used_bytes TYPE numeric;
ALTER TABLE balances ALTER used_bytes SET DATA TYPE numeric, ALTER COLUMN product SET NOT NULL;
ALTER TABLE ONLY balances ADD COLUMN stripe integer NOT NULL;
ALTER TABLE balances ALTER COLUMN product DROP DEFAULT;
DROP FUNCTION gateway_heartbeat_v2(text, text, text, jsonb);
ALTER FUNCTION lease_acquire(uuid) RENAME TO lease_take;
DO $$ BEGIN EXECUTE 'x'; DROP TABLE gateway_heartbeats; END $$;
`;

describe('the migration rule', () => {
  it('refuses every contract step of an unmarked migration, with what an old pod would meet', () => {
    expect(reasons(VIOLATES).map((r) => r.split(':')[0])).toEqual([
      'drops column accounts.legacy_note',
      'renames column accounts.email',
      'renames table accounts',
      'drops table usage_history_daily',
      'drops table usage_history_hourly',
      'changes the type of column balances.used_bytes',
      'changes the type of column balances.used_bytes',
      'sets NOT NULL on column balances.product without a default',
      'adds column balances.stripe NOT NULL without a default',
      'drops the default of column balances.product',
      'drops function gateway_heartbeat_v2, which v0.1.0 calls',
      'renames function lease_acquire, which v0.1.0 calls',
      'drops table gateway_heartbeats',
    ]);
  });

  it('accepts what only expands: nullable or defaulted columns, new tables, new functions, wrappers', () => {
    const expand = `-- 0175's way: a nullable column the old release never writes, a wrapper for its function.
ALTER TABLE gateway_heartbeats ADD COLUMN exits jsonb
  CONSTRAINT gateway_heartbeats_exits_array CHECK (exits IS NULL OR jsonb_typeof(exits) = 'array');
ALTER TABLE balances ADD COLUMN stripe integer NOT NULL DEFAULT 0, ADD CONSTRAINT s CHECK (stripe >= 0);
ALTER TABLE balances ALTER COLUMN product SET DEFAULT 'basic', ALTER COLUMN product SET NOT NULL;
ALTER TABLE balances ALTER COLUMN note DROP NOT NULL, DROP CONSTRAINT balances_note_check;
ALTER TABLE balances RENAME CONSTRAINT a TO b;
CREATE TABLE scratch (hour timestamptz NOT NULL, note text);
ALTER TABLE scratch RENAME COLUMN hour TO day;
ALTER TABLE scratch ALTER COLUMN day TYPE date USING day::date;
ALTER TABLE scratch DROP COLUMN note;
DROP TABLE scratch;
DROP FUNCTION IF EXISTS billing_retired(uuid);
CREATE OR REPLACE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $body$
BEGIN DROP TABLE accounts; ALTER TABLE accounts DROP COLUMN email; END $body$;
COMMENT ON COLUMN accounts.email IS 'DROP TABLE accounts; it''s; RENAME TO x';
`;
    expect(reasons(expand)).toEqual([]);
  });

  it('accepts a contract step marked safe after the previous release or an older one, refuses one marked newer', () => {
    const marked = (release: string) => `-- Retired since ${release}.
-- contract: drop column accounts.legacy_note, safe after ${release}
ALTER TABLE accounts DROP COLUMN legacy_note;
/* The marker belongs to its statement: the next one has none. */
ALTER TABLE accounts DROP COLUMN other;`;
    expect(reasons(marked('v0.1.0'))).toEqual([expect.stringMatching(/^drops column accounts.other: /)]);
    expect(reasons(marked('v0.0.9'))).toHaveLength(1);
    expect(reasons(marked('v0.2.0'))).toEqual([
      'drops column accounts.legacy_note: marked safe after v0.2.0, but an upgrade starts from v0.1.0',
      expect.stringMatching(/^drops column accounts.other: /),
    ]);
  });

  it('splits statements outside strings, quoted names, dollar quotes and comments', () => {
    const s = splitStatements(
      `SELECT 'a;b', E'c\\';d', "x;y"; -- one; two\nSELECT $f$ ; $f$ /* ; /* ; */ */; SELECT 3`,
    );
    expect(s.map((x) => x.code)).toEqual(["select '', e'', x;y", "select ''", 'select 3']);
    expect(s[1]!.comments).toEqual(['-- one; two', '/* ; /* ; */ */']);
    expect(compareReleases('v0.10.0', 'v0.9.1')).toBe(1);
    expect(compareReleases('v1.0.0', 'v1.0.0')).toBe(0);
  });

  describe('on a migrations folder', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'migration-rule-'));
      // Before the baseline: applied by the previous release already, not held to the rule.
      await writeFile(path.join(dir, '0170_before.sql'), 'ALTER TABLE accounts DROP COLUMN a;\n');
      await writeFile(path.join(dir, '0176_violates.sql'), VIOLATES);
    });
    afterAll(() => rm(dir, { recursive: true, force: true }));

    it('fails on a fixture migration newer than the previous release that contracts', async () => {
      const violations = await checkMigrations(dir, previous);
      expect(violations).toHaveLength(13);
      expect(new Set(violations.map((v) => v.file))).toEqual(new Set(['0176_violates.sql']));
      expect(violations[0]!.statement).toBe('ALTER TABLE accounts DROP COLUMN legacy_note;');
    });

    it("the project's migrations newer than the previous release only expand", async () => {
      const recorded = await loadPreviousRelease();
      expect(recorded.release).toMatch(/^v\d+\.\d+\.\d+$/);
      expect(await checkMigrations(MIGRATIONS_DIR, recorded)).toEqual([]);
    });

    it("the rule would have refused the contract steps of the project's history, taken before it existed", async () => {
      const all = await checkMigrations(MIGRATIONS_DIR, { ...previous, lastMigration: 0 });
      expect(all).toContainEqual(
        expect.objectContaining({
          file: '0090_billing_room.sql',
          reason: expect.stringMatching(/^drops table low_bandwidth_state: /) as unknown,
        }),
      );
    });
  });
});
