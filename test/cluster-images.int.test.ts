// How `npm run cluster -- up` loads an image into containerd (scripts/cluster.sh load_image) and
// checks it by digest (docs/adr/0093). The script's own functions run in bash; podman and ctr are
// stand-ins on PATH that answer as containerd 1.6's ctr does, because the failure is an ordering
// the real containerd produces only now and then (about one check in ten on a loaded machine):
// the image's name listed with more names after it, written a moment later.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { REPO_ROOT } from './process.ts';

const REF = 'localhost/proxyfleet:9.9.9';
const ID = 'fd3cb7569c39a9ae98b987161dfefdaeac2913f831df803c45f23aa5ec6bee19';
const OTHER = 'e596864f57dad39476cecad2fc5febcfca5eddc116452230d55f666d49ba1b17';
const MANIFEST = 'sha256:88c84ca0be59b410fdd312570a098183067f4e1ae562f8c6fbe95c661dd56113';

// containerd after an import: `images ls -q` names the image, then (a second later, so that a
// reader that stops at the match has gone) CRI's sha256:<id> name; `images check` and `content
// get` describe the image whose config digest is $STUB_CONFIG. With STUB_TAKES=0 the import
// reads the archive and records nothing. Each import appends a line to imports.log.
const CTR = `#!/usr/bin/env bash
dir="$(dirname "$0")"
while [ "$#" -gt 0 ] && [ "$1" != images ] && [ "$1" != content ]; do shift; done
imported() { [ -f "$dir/imported" ]; }
case "$1 $2" in
  "images import") cat >/dev/null; echo import >> "$dir/imports.log"; [ "\${STUB_TAKES:-1}" = 1 ] && touch "$dir/imported"; echo "unpacking ${REF} (${MANIFEST})...done" ;;
  "images ls")
    if imported; then echo "${REF}"; fi
    sleep 1
    echo "sha256:${OTHER}" ;;
  "images check")
    echo "REF TYPE DIGEST STATUS SIZE UNPACKED"
    if imported && [ "$3" = "name==${REF}" ]; then
      echo "${REF} application/vnd.docker.distribution.manifest.v2+json ${MANIFEST} complete (13/13) 415.7 MiB/415.7 MiB true"
    fi ;;
  "content get") printf '{"schemaVersion":2,"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:%s","size":4809},"layers":[]}' "\${STUB_CONFIG:-${ID}}" ;;
  *) echo "stand-in ctr: unexpected $*" >&2; exit 2 ;;
esac
`;
const PODMAN = `#!/usr/bin/env bash
case "$1 $2" in
  "image inspect") echo "${ID}" ;;
  "save --format") head -c 65536 /dev/zero ;;
  *) echo "stand-in podman: unexpected $*" >&2; exit 2 ;;
esac
`;

interface Ran {
  code: number;
  out: string;
}

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pf-cluster-images-'));
  await writeFile(path.join(dir, 'ctr'), CTR);
  await writeFile(path.join(dir, 'podman'), PODMAN);
  await chmod(path.join(dir, 'ctr'), 0o755);
  await chmod(path.join(dir, 'podman'), 0o755);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function loadImage(env: Record<string, string> = {}): Promise<Ran> {
  const script = `source scripts/cluster.sh; set -euo pipefail; load_image ${REF}`;
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-c', script],
      {
        cwd: REPO_ROOT,
        timeout: 60_000,
        env: {
          ...process.env,
          ...env,
          PATH: `${dir}:${process.env.PATH ?? ''}`,
          PROXYFLEET_CLUSTER_DIR: path.join(dir, 'state'),
        },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

const imports = async () => (await readFile(path.join(dir, 'imports.log'), 'utf8')).trim().split('\n').length;

describe('cluster up: loading an image into containerd', () => {
  test('takes an image containerd lists with names after it, once, and stamps its ID', async () => {
    const ran = await loadImage();
    expect(ran.out).not.toContain('did not take');
    expect(ran.code).toBe(0);
    expect(await imports()).toBe(1);
    const stamp = await readFile(path.join(dir, 'state/keep/images/localhost_proxyfleet_9.9.9.id'), 'utf8');
    expect(stamp.trim()).toBe(ID);
    // Stamped and verified: the next `up` imports nothing.
    expect((await loadImage()).code).toBe(0);
    expect(await imports()).toBe(1);
  }, 60_000);

  test('an import containerd does not keep: imported twice, then an error naming the image and what containerd lists', async () => {
    const ran = await loadImage({ STUB_TAKES: '0' });
    expect(ran.code).toBe(1);
    expect(await imports()).toBe(2);
    expect(ran.out).toContain(
      `cluster: error: containerd did not take ${REF} (podman's image sha256:${ID}): ` +
        `containerd (namespace k8s.io) has no image ${REF}; it lists: sha256:${OTHER}`,
    );
  }, 60_000);

  test('another image under the name: the error names both image IDs', async () => {
    const ran = await loadImage({ STUB_CONFIG: OTHER });
    expect(ran.code).toBe(1);
    expect(ran.out).toContain(
      `containerd's ${REF} is image sha256:${OTHER} (manifest ${MANIFEST}), podman's is sha256:${ID}`,
    );
  }, 60_000);
});
