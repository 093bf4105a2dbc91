// The Dockerfile, built for real by a daemonless builder from Debian (podman, else buildah), then
// the image's gateway entrypoint started with no configuration: it must refuse to start naming the
// missing variable (exit 2), which proves the image holds the sources, the production
// dependencies and a Node that runs them.
//
// Where the build cannot run, the suite says exactly why and is skipped with a loud warning; with
// PROXYFLEET_REQUIRE_IMAGE_BUILD=1 (a CI that has a registry) it fails instead. On the
// development sandbox of this round the base image cannot be pulled (registry-1.docker.io does not
// resolve) and containers cannot start (crun: setrlimit RLIMIT_NOFILE: Operation not permitted).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, test } from '@jest/globals';
import { REPO_ROOT } from './process.ts';

const run = promisify(execFile);
const BASE_IMAGE = 'docker.io/library/node:24-slim';
const TAG = `localhost/proxyfleet-image-test:${process.pid}`;
const PULL_TIMEOUT_MS = 120_000;

async function which(tool: string): Promise<boolean> {
  return run('sh', ['-c', `command -v ${tool}`]).then(
    () => true,
    () => false,
  );
}

/** The builder to use, or why none can build here. */
async function builder(): Promise<{ tool: string } | { why: string }> {
  const tool = (await which('podman')) ? 'podman' : (await which('buildah')) ? 'buildah' : undefined;
  if (!tool) return { why: 'neither podman nor buildah is installed (apt-get install podman)' };
  const present = await run(
    tool,
    tool === 'podman' ? ['image', 'exists', BASE_IMAGE] : ['inspect', '--type', 'image', BASE_IMAGE],
  ).then(
    () => true,
    () => false,
  );
  if (!present) {
    try {
      await run(tool, ['pull', '--quiet', BASE_IMAGE], { timeout: PULL_TIMEOUT_MS });
    } catch (err) {
      const detail = String((err as { stderr?: string }).stderr ?? (err as Error).message)
        .trim()
        .split('\n')
        .pop();
      return { why: `${tool} cannot pull the base image ${BASE_IMAGE}: ${detail}` };
    }
  }
  return { tool };
}

const found = await builder();

function describeImage(name: string, fn: (tool: string) => void): void {
  if ('tool' in found) {
    describe(name, () => fn(found.tool));
    return;
  }
  const why = `image build test "${name}" cannot run here: ${found.why}`;
  if (process.env.PROXYFLEET_REQUIRE_IMAGE_BUILD === '1') {
    describe(name, () => {
      test('the image can be built (PROXYFLEET_REQUIRE_IMAGE_BUILD=1)', () => {
        throw new Error(why);
      });
    });
    return;
  }
  console.warn(`SKIPPED: ${why}`);
  describe.skip(name, () => fn(''));
}

describeImage('the Dockerfile', (tool) => {
  test('builds, and the gateway entrypoint in it refuses to start without its configuration', async () => {
    // chroot isolation: RUN steps need no OCI runtime (crun/runc), which a container sandbox lacks.
    const build =
      tool === 'podman'
        ? ['build', '--isolation', 'chroot', '-t', TAG, '.']
        : ['bud', '--isolation', 'chroot', '-t', TAG, '.'];
    await run(tool, build, { cwd: REPO_ROOT, timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
    try {
      const smoke = await run('podman', [
        'run',
        '--rm',
        '--network',
        'none',
        TAG,
        'node',
        'gateway/src/main.ts',
      ]).then(
        (r) => ({ code: 0, out: r.stdout + r.stderr }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({
          code: err.code,
          out: `${err.stdout ?? ''}${err.stderr ?? ''}`,
        }),
      );
      expect(smoke.out).toContain('PROXYFLEET_GATEWAY_CONFIG');
      expect(smoke.code).toBe(2);
    } finally {
      await run(tool, ['rmi', '-f', TAG]).catch(() => undefined);
    }
  }, 900_000);
});
