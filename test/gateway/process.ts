// A gateway as its own process (gateway/src/main.ts), the way a pod runs it.
import type { ProxyGateway } from '../../gateway/src/spec.ts';

export interface GatewayProcess {
  port: number;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  output(): string;
}

/** Runs gateway/src/main.ts as its own process (a pod), on a free port; resolves once it listens. */
export async function spawnGateway(
  databaseUrl: string,
  gateway: ProxyGateway,
  env: Record<string, string> = {},
): Promise<GatewayProcess> {
  const { spawn } = await import('node:child_process');
  const { mkdtemp, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { stringify } = await import('yaml');
  const dir = await mkdtemp(path.join(tmpdir(), 'pf-gw-'));
  const file = path.join(dir, 'gateway.yaml');
  await writeFile(file, stringify(gateway));
  const child = spawn(process.execPath, [new URL('../../gateway/src/main.ts', import.meta.url).pathname], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: databaseUrl,
      PROXYFLEET_GATEWAY_CONFIG: file,
      PROXYFLEET_GATEWAY_PORT: '0',
      PROXYFLEET_GATEWAY_HOST: '127.0.0.1',
      PROXYFLEET_HEALTH_PORT: '0',
      PROXYFLEET_HEALTH_HOST: '127.0.0.1',
      PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.0/8',
      PROXYFLEET_DB_POOL_SIZE: '4',
      PROXYFLEET_DATA_DIR: dir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = /"port":(\d+)[^\n]*"msg":"gateway listening"/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    void exited.then((code) => reject(new Error(`gateway exited ${code}: ${out}`)));
    setTimeout(() => reject(new Error(`gateway did not start: ${out}`)), 20_000).unref();
  });
  return {
    port,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
