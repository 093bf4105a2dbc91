// `npx proxyfleet admin invoices ...`: settling invoices and exporting them from a shell.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail } from '#test/fixtures.ts';
import { useCli } from '#test/cli.ts';

const { cli } = useCli();

describe('proxyfleet admin invoices', () => {
  test('pays, voids, lists by status and exports CSV; a second settlement of the other kind is refused', async () => {
    const account = JSON.parse((await cli('admin', 'accounts', 'create', '--email', exampleEmail())).out) as {
      id: string;
    };
    const buy = async (gb: string) =>
      JSON.parse(
        (await cli('admin', 'purchases', 'create', account.id, '--product', 'basic', '--gb', gb)).out,
      ) as { id: string };
    const first = await buy('1');
    const second = await buy('2');
    expect(JSON.parse((await cli('admin', 'invoices', 'pay', first.id)).out)).toMatchObject({
      status: 'paid',
    });
    expect(JSON.parse((await cli('admin', 'invoices', 'void', second.id)).out)).toMatchObject({
      status: 'void',
    });
    expect(await cli('admin', 'invoices', 'pay', second.id)).toMatchObject({
      code: 1,
      err: 'error 409: This invoice is already void\n',
    });
    const paid = JSON.parse(
      (await cli('admin', 'invoices', 'all', '--status', 'paid', '--account', account.id)).out,
    );
    expect(paid.invoices.map((i: { id: string }) => i.id)).toEqual([first.id]);
    const csv = await cli('admin', 'invoices', 'export', '--account', account.id);
    expect(csv.code).toBe(0);
    expect(csv.out.split('\r\n')[0]).toMatch(/^number,id,accountId,/);
    expect(csv.out).toContain(`${first.id},${account.id}`);
  });
});
