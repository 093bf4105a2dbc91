// The benchmark's origin: a raw TCP server answering canned HTTP/1.1 keep-alive responses, so the
// origin costs as little CPU as possible (the notes used nginx; this machine has none).
// GET /1k -> 1 KiB, GET /1m -> 1 MiB. Requests have no bodies. Prints its port on stdout.
import net from 'node:net';

const body1k = Buffer.alloc(1024, 97);
const body1m = Buffer.alloc(1024 * 1024, 98);
const response = (body: Buffer) =>
  Buffer.concat([
    Buffer.from(
      `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n`,
    ),
    body,
  ]);
const r1k = response(body1k);
const r1m = response(body1m);

const server = net.createServer({ noDelay: true }, (socket) => {
  socket.on('error', () => socket.destroy());
  let pending = '';
  socket.on('data', (chunk: Buffer) => {
    pending += chunk.toString('latin1');
    let end: number;
    while ((end = pending.indexOf('\r\n\r\n')) >= 0) {
      const line = pending.slice(0, pending.indexOf('\r\n'));
      pending = pending.slice(end + 4);
      socket.write(line.includes('/1m') ? r1m : r1k);
    }
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as net.AddressInfo;
  process.stdout.write(`${address.port}\n`);
});
