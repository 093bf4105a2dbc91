// Ports for the servers a test or benchmark starts in other processes: chosen below the kernel's
// ephemeral range, so that nothing the kernel hands out itself (a listen on port 0, such as the
// embedded PostgreSQL's, or the source port of any outgoing connection) can take the port between
// the moment it is chosen and the moment the child listens on it. A Ctrl-C test of `npm start`
// failed on exactly that: the API port it chose was given to the embedded PostgreSQL a moment later.
import net from 'node:net';
import { ephemeralRange } from '../gateway/src/proxy/source-ports.ts';

const LOWEST = 10_000;

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * The ports already handed out in this process: a port chosen but not yet listened on is still
 * bindable, so several calls before the servers start (test/kube/env.ts: etcd's two and the API
 * server's) could otherwise get the same one.
 */
const given = new Set<number>();

/**
 * A port nobody listens on right now, outside the ephemeral range (random, checked by binding it),
 * and never one this process was given before.
 */
export async function freePort(): Promise<number> {
  const { low } = ephemeralRange();
  const high = Math.max(LOWEST + 1_000, low);
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
    if (given.has(port)) continue;
    if (await bindable(port)) {
      given.add(port);
      return port;
    }
  }
  throw new Error(`no free port found between ${LOWEST} and ${high} in 100 attempts`);
}
