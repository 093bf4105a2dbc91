// `npx proxyfleet admin subscriptions ...`: an account's subscriptions from a shell.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail } from '#test/fixtures.ts';
import { useCli } from '#test/cli.ts';

const { cli } = useCli();

describe('proxyfleet admin subscriptions', () => {
  test('creates a plan and an ISP rental, changes, turns renewal off, cancels and lists', async () => {
    const account = JSON.parse((await cli('admin', 'accounts', 'create', '--email', exampleEmail())).out) as {
      id: string;
    };
    const plan = await cli(
      'admin',
      'subscriptions',
      'create-plan',
      account.id,
      '--product',
      'basic',
      '--gb',
      '50',
    );
    expect(plan.code).toBe(0);
    const planId = (JSON.parse(plan.out) as { id: string }).id;
    const isp = await cli(
      'admin',
      'subscriptions',
      'create-isp',
      account.id,
      '--country',
      'us',
      '--count',
      '2',
    );
    expect(JSON.parse(isp.out)).toMatchObject({ kind: 'isp_proxy', proxyCount: 2, price: 10 });
    const changed = await cli(
      'admin',
      'subscriptions',
      'change',
      account.id,
      planId,
      '--gb',
      '25',
      '--renew',
      'off',
    );
    expect(JSON.parse(changed.out)).toMatchObject({ gbPerPeriod: 25, price: 50, autoRenew: false });
    const cancelled = await cli('admin', 'subscriptions', 'cancel', account.id, planId);
    expect(JSON.parse(cancelled.out)).toMatchObject({ status: 'cancelled' });
    const list = JSON.parse((await cli('admin', 'subscriptions', 'list', account.id)).out) as {
      subscriptions: { kind: string; status: string }[];
    };
    expect(list.subscriptions.map((s) => [s.kind, s.status])).toEqual([
      ['bandwidth_plan', 'cancelled'],
      ['isp_proxy', 'active'],
    ]);
    // A bad amount: the API's reason, exit 1.
    const bad = await cli(
      'admin',
      'subscriptions',
      'create-plan',
      account.id,
      '--product',
      'basic',
      '--gb',
      '0',
    );
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('gbPerPeriod');
  });
});
