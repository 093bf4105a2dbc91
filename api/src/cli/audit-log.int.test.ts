// `npx proxyfleet admin audit-log <accountId>`: the admin API's audit log from a shell.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail } from '#test/fixtures.ts';
import { useCli } from '#test/cli.ts';

const { cli } = useCli();

interface Page {
  entries: { action: string; actor: { kind: string; id: string }; details: Record<string, unknown> }[];
  nextCursor: string | null;
}

describe('proxyfleet admin audit-log', () => {
  test('prints the entries newest first, pages with --limit and --cursor', async () => {
    const created = await cli('admin', 'accounts', 'create', '--email', exampleEmail());
    const account = JSON.parse(created.out) as { id: string; apiKey: string };
    expect((await cli('admin', 'accounts', 'suspend', account.id)).code).toBe(0);
    expect((await cli('admin', 'accounts', 'reactivate', account.id)).code).toBe(0);

    const all = await cli('admin', 'audit-log', account.id);
    expect(all.code).toBe(0);
    const page = JSON.parse(all.out) as Page;
    expect(page.entries.map((e) => e.action)).toEqual([
      'account.reactivated',
      'account.suspended',
      'account.created',
    ]);
    expect(page.entries[0]!.actor).toMatchObject({ kind: 'admin', id: 'admin-token' });
    expect(page.nextCursor).toBeNull();
    expect(all.out).not.toContain(account.apiKey);

    const first = JSON.parse((await cli('admin', 'audit-log', account.id, '--limit', '2')).out) as Page;
    expect(first.entries.map((e) => e.action)).toEqual(['account.reactivated', 'account.suspended']);
    const rest = JSON.parse(
      (await cli('admin', 'audit-log', account.id, '--limit', '2', '--cursor', first.nextCursor!)).out,
    ) as Page;
    expect(rest).toMatchObject({ entries: [{ action: 'account.created' }], nextCursor: null });
  });

  test("a bad cursor or account exits 1 with the API's message; a missing id is a usage error", async () => {
    const account = JSON.parse((await cli('admin', 'accounts', 'create', '--email', exampleEmail())).out) as {
      id: string;
    };
    expect(await cli('admin', 'audit-log', account.id, '--cursor', 'nope')).toMatchObject({
      code: 1,
      err: 'error 400: Invalid request: cursor: must be a nextCursor this API returned\n',
    });
    expect(await cli('admin', 'audit-log', '00000000-0000-4000-8000-000000000000')).toMatchObject({
      code: 1,
      err: 'error 404: Account not found\n',
    });
    expect(await cli('admin', 'audit-log')).toMatchObject({
      code: 2,
      err: expect.stringContaining('expected accountId'),
    });
    expect((await cli('admin', 'audit-log', account.id, 'extra')).code).toBe(2);
    expect((await cli('admin', 'audit-log', '--help')).out).toContain('--cursor');
  });
});
