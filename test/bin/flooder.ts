// A connection flooder for the flood test (a child process: one process's descriptors cannot
// hold 25,000 sockets here). Usage: flooder.ts PORT LOCAL_ADDRESS COUNT. Opens COUNT idle
// connections in batches, prints one JSON line {open, closed}, then holds them until killed or
// until its stdin closes.
import net from 'node:net';

const [port, localAddress, count] = [Number(process.argv[2]), process.argv[3]!, Number(process.argv[4])];
const sockets: net.Socket[] = [];
const connect = () =>
  new Promise<void>((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    s.on('error', () => undefined);
    s.once('connect', () => resolve());
    s.once('close', () => resolve());
    sockets.push(s);
  });
for (let i = 0; i < count; i += 500)
  await Promise.all(Array.from({ length: Math.min(500, count - i) }, connect));
await new Promise((r) => setTimeout(r, 200));
const open = sockets.filter((s) => !s.destroyed).length;
process.stdout.write(`${JSON.stringify({ open, closed: count - open })}\n`);
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
