// proxy-chain (npm) with an auth callback equivalent to the gateway's: Basic credentials checked
// against one account. Prints its port on stdout. With a certificate and key file as the next two
// arguments, over TLS (proxy-chain 3's serverType 'https', a node:https server).
import { readFileSync } from 'node:fs';
import { Server } from 'proxy-chain';

const [user, pass] = (process.argv[2] ?? 'user:pass').split(':');
const [certFile, keyFile] = process.argv.slice(3);
const tls =
  certFile && keyFile
    ? {
        serverType: 'https' as const,
        httpsOptions: { cert: readFileSync(certFile), key: readFileSync(keyFile) },
      }
    : { serverType: 'http' as const };
const server = new Server({
  port: 0,
  host: '127.0.0.1',
  verbose: false,
  ...tls,
  prepareRequestFunction: ({ username, password }) => ({
    requestAuthentication: username !== user || password !== pass,
  }),
});
await server.listen();
process.stdout.write(`${server.port}\n`);
process.on('SIGTERM', () => void server.close(true).then(() => process.exit(0)));
