// `npm run image -- --sbom --sign` (scripts/image.sh, scripts/image/trust.sh, docs/adr/0122): the
// image as an OCI archive, its manifest signed by cosign with a key pair made here, syft's SBOM
// in SPDX and CycloneDX attested for the manifest's digest. Each verification is shown to pass
// and then to fail on a manifest changed by one byte and on another key. syft and cosign come
// from scripts/install-tools.sh: without them the suite is skipped loudly, and fails under CI.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { REPO_ROOT } from './process.ts';

const run = promisify(execFile);
const TOOLS_BIN =
  process.env.PROXYFLEET_TOOLS_BIN ||
  path.join(process.env.PROXYFLEET_TOOLS_DIR ?? path.join(os.homedir(), '.cache/proxyfleet/tools'), 'bin');
const cosignBin = path.join(TOOLS_BIN, 'cosign');
const missing = ['syft', 'cosign'].filter((t) => !existsSync(path.join(TOOLS_BIN, t)));
const password = randomBytes(12).toString('hex');
const env = {
  ...process.env,
  CONTAINERS_CONF: path.join(REPO_ROOT, 'scripts/image/containers.conf'),
  COSIGN_PASSWORD: password,
};

interface Ran {
  code: number;
  out: string;
}

async function exec(
  cmd: string,
  args: string[],
  extraEnv: Record<string, string> = {},
  timeout = 120_000,
): Promise<Ran> {
  return run(cmd, args, {
    env: { ...env, ...extraEnv },
    cwd: REPO_ROOT,
    timeout,
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof err.code === 'number' ? err.code : -1,
      out: `${err.stdout ?? ''}${err.stderr ?? ''}`,
    }),
  );
}
const cosign = (args: string[]) => exec(cosignBin, args);
const image = (args: string[], extraEnv: Record<string, string> = {}) =>
  exec('bash', [path.join(REPO_ROOT, 'scripts/image.sh'), ...args], extraEnv, 900_000);

describe('npm run image -- --sign: refused before any build', () => {
  test('without PROXYFLEET_SIGNING_KEY, naming it', async () => {
    const r = await image(['--sign'], { PROXYFLEET_SIGNING_KEY: '' });
    expect(r.code).toBe(1);
    expect(r.out).toContain('--sign needs PROXYFLEET_SIGNING_KEY');
  });
  test('an unknown option', async () => {
    const r = await image(['--sbom', '--push']);
    expect(r.code).toBe(1);
    expect(r.out).toContain("unknown argument '--push'");
  });
});

function describeWithTools(name: string, fn: () => void): void {
  if (missing.length === 0) return describe(name, fn);
  const why = `"${name}" needs ${missing.join(', ')} in ${TOOLS_BIN}: run bash scripts/install-tools.sh`;
  if (process.env.CI) {
    describe(name, () =>
      test('syft and cosign are installed (CI must run the image trust tests)', () => {
        throw new Error(why);
      }),
    );
    return;
  }
  console.warn(`SKIPPED: ${why}`);
  describe.skip(name, fn);
}

describeWithTools('npm run image -- --sbom --sign', () => {
  let dir: string;
  let out: string;
  let name: string;
  let digest: string;
  let manifest: string;
  let tampered: string;
  const pub = () => path.join(dir, 'signer.pub');
  const otherPub = () => path.join(dir, 'other.pub');

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pf-image-trust-'));
    out = path.join(dir, 'out');
    for (const prefix of ['signer', 'other']) {
      const made = await exec(cosignBin, [
        'generate-key-pair',
        '--output-key-prefix',
        path.join(dir, prefix),
      ]);
      expect(made).toMatchObject({ code: 0 });
    }
    const built = await image(['--sbom', '--sign'], {
      PROXYFLEET_IMAGE_OUT: out,
      PROXYFLEET_SIGNING_KEY: path.join(dir, 'signer.key'),
    });
    if (built.code !== 0) throw new Error(`npm run image -- --sbom --sign failed:\n${built.out}`);
    const { version } = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    name = path.join(out, `proxyfleet-${version}`);
    digest = (await readFile(`${name}.digest`, 'utf8')).trim();
    manifest = `${name}.manifest.json`;
    // The manifest with one byte changed: a space added after its first "{".
    const bytes = await readFile(manifest, 'utf8');
    tampered = path.join(dir, 'tampered.manifest.json');
    await writeFile(tampered, bytes.replace('{', '{ '));
  }, 900_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('the manifest beside the archive is the one its index names, and carries the OCI annotations', async () => {
    const index = JSON.parse((await exec('tar', ['-xOf', `${name}.oci.tar`, 'index.json'])).out) as {
      manifests: { digest: string }[];
    };
    expect(index.manifests.map((m) => m.digest)).toEqual([digest]);
    const sha = (await exec('sha256sum', [manifest])).out.split(' ')[0];
    expect(`sha256:${sha}`).toBe(digest);
    const { annotations } = JSON.parse(await readFile(manifest, 'utf8')) as {
      annotations: Record<string, string>;
    };
    expect(Object.keys(annotations)).toEqual(
      expect.arrayContaining(
        ['title', 'version', 'revision', 'created', 'source', 'licenses'].map(
          (k) => `org.opencontainers.image.${k}`,
        ),
      ),
    );
  });

  test('the signature verifies with the signer key, and fails on one changed byte and on another key', async () => {
    const verify = (key: string, file: string) =>
      cosign([
        'verify-blob',
        '--key',
        key,
        '--insecure-ignore-tlog',
        '--bundle',
        `${name}.manifest.sigstore.json`,
        file,
      ]);
    const ok = await verify(pub(), manifest);
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.out).toContain('Verified OK');
    for (const refused of [await verify(pub(), tampered), await verify(otherPub(), manifest)]) {
      expect(refused.code).not.toBe(0);
      expect(refused.out).toContain('invalid signature');
    }
  });

  test('the SBOMs list the Debian packages, Node and the production npm dependencies, not the dev ones', async () => {
    const lock = JSON.parse(await readFile(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version: string }>;
    };
    const spdx = JSON.parse(await readFile(`${name}.spdx.json`, 'utf8')) as {
      spdxVersion: string;
      relationships: { spdxElementId: string; relatedSpdxElement: string; relationshipType: string }[];
      packages: { SPDXID: string; name: string; versionInfo?: string }[];
    };
    expect(spdx.spdxVersion).toBe('SPDX-2.3');
    // What the document describes: the image, by its manifest digest.
    const described = spdx.relationships.filter(
      (r) => r.spdxElementId === 'SPDXRef-DOCUMENT' && r.relationshipType === 'DESCRIBES',
    );
    expect(described).toHaveLength(1);
    const root = spdx.packages.find((p) => p.SPDXID === described[0]?.relatedSpdxElement);
    expect(root).toMatchObject({ name: 'proxyfleet', versionInfo: digest });
    const versions = (name: string) => spdx.packages.filter((p) => p.name === name).map((p) => p.versionInfo);
    expect(versions('pg')).toContain(lock.packages['node_modules/pg']?.version);
    expect(versions('yaml')).toContain(lock.packages['node_modules/yaml']?.version);
    expect(versions('libc6').length).toBeGreaterThan(0);
    expect(versions('node')).toEqual([expect.stringMatching(/^24\./)]);
    expect(versions('jest')).toEqual([]);
    expect(versions('typescript')).toEqual([]);
    const cdx = JSON.parse(await readFile(`${name}.cdx.json`, 'utf8')) as {
      bomFormat: string;
      components: { name: string; version: string }[];
    };
    expect(cdx.bomFormat).toBe('CycloneDX');
    expect(cdx.components.filter((c) => c.name === 'pg').map((c) => c.version)).toContain(
      lock.packages['node_modules/pg']?.version,
    );
  });

  test('the SPDX SBOM is attested for the manifest digest: verifies, and fails on one changed byte and on another key', async () => {
    const verify = (key: string, file: string) =>
      cosign([
        'verify-blob-attestation',
        '--key',
        key,
        '--insecure-ignore-tlog',
        '--type',
        'spdxjson',
        '--bundle',
        `${name}.spdx.sigstore.json`,
        file,
      ]);
    expect(await verify(pub(), manifest)).toMatchObject({ code: 0 });
    const changed = await verify(pub(), tampered);
    expect(changed.code).not.toBe(0);
    expect(changed.out).toContain('digests do not match');
    const otherKey = await verify(otherPub(), manifest);
    expect(otherKey.code).not.toBe(0);
    expect(otherKey.out).toContain('accepted signatures do not match threshold');
    // The statement inside: subject the manifest digest, predicate the SBOM written beside it.
    const bundle = JSON.parse(await readFile(`${name}.spdx.sigstore.json`, 'utf8')) as {
      dsseEnvelope: { payload: string };
    };
    const statement = JSON.parse(Buffer.from(bundle.dsseEnvelope.payload, 'base64').toString('utf8')) as {
      predicateType: string;
      subject: { digest: { sha256: string } }[];
      predicate: unknown;
    };
    expect(statement.predicateType).toBe('https://spdx.dev/Document');
    expect(statement.subject.map((s) => `sha256:${s.digest.sha256}`)).toEqual([digest]);
    expect(statement.predicate).toEqual(JSON.parse(await readFile(`${name}.spdx.json`, 'utf8')));
  });
});
