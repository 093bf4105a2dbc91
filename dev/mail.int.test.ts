// `npm start` with no SMTP configured: the dev mail sink keeps every email as an .eml file under
// <PROXYFLEET_DATA_DIR>/mail, and `proxyfleet mail list` / `mail show <n>` read them.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { freePort } from '#test/ports.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { startEntrypoint, stopProcess, until, waitForHttp, type RunningProcess } from '#test/process.ts';
import { runCapturedCli } from '#test/cli.ts';

describe('dev mail sink', () => {
  let proc: RunningProcess | undefined;
  let db: TestDatabase | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    await stopProcess(proc);
    await db?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('keeps the new-invoice email as a file that `proxyfleet mail` lists and shows', async () => {
    db = await createTestDatabase();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pf-dev-mail-'));
    const port = await freePort();
    proc = startEntrypoint('dev/main.ts', {
      DATABASE_URL: db.url,
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(port),
      PROXYFLEET_DEV_START_GATEWAYS: 'false',
    });
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 200, 60_000);
    const mailDir = path.join(dataDir, 'mail');
    expect(proc.lines.join('\n')).toContain(`emails are kept in ${mailDir}`);

    const cli = (...argv: string[]) =>
      runCapturedCli(argv, { PROXYFLEET_DATA_DIR: dataDir, PROXYFLEET_API_URL: `http://127.0.0.1:${port}` });
    const created = JSON.parse(
      (await cli('admin', 'accounts', 'create', '--email', 'mail-sink@example.test')).out,
    ) as { id: string };
    expect(
      (await cli('admin', 'purchases', 'create', created.id, '--product', 'basic', '--gb', '2')).code,
    ).toBe(0);
    await until(
      async () => (await readdir(mailDir)).some((f) => f.endsWith('.eml')),
      'the new-invoice email in the mail directory',
      30_000,
    );

    const list = await cli('mail', 'list');
    expect(list.code).toBe(0);
    expect(list.out).toMatch(
      /^ {3}1 {2}\S+ {2}mail-sink@example\.test {2}Invoice #\d+: 2 GB of basic bandwidth\n$/,
    );
    const shown = await cli('mail', 'show', '1');
    expect(shown.out).toContain('To: mail-sink@example.test');
    expect(shown.out).toMatch(/Invoice #\d+ was issued for 2 GB of basic bandwidth: 4\.00 USD\./);
    expect(await cli('mail', 'show', '2')).toMatchObject({ code: 1 });
    expect((await cli('mail', 'bogus')).code).toBe(2);
    const invoices = JSON.parse((await cli('admin', 'invoices', 'list', created.id)).out) as {
      invoices: { source: string }[];
    };
    expect(invoices.invoices).toMatchObject([{ source: 'purchase' }]);
  }, 120_000);
});
