// proxy-chain (npm) with an auth callback equivalent to the gateway's: Basic credentials checked
// against one account. Prints its port on stdout.
import { Server } from 'proxy-chain';

const [user, pass] = (process.argv[2] ?? 'user:pass').split(':');
const server = new Server({
  port: 0,
  host: '127.0.0.1',
  verbose: false,
  prepareRequestFunction: ({ username, password }) => ({
    requestAuthentication: username !== user || password !== pass,
  }),
});
await server.listen();
process.stdout.write(`${server.port}\n`);
process.on('SIGTERM', () => void server.close(true).then(() => process.exit(0)));
