import { connect, createServer, type Server, type Socket } from 'node:net';

// A TCP proxy in front of Postgres that can stop passing bytes on, both ways, and start again:
// a database connection that hangs without closing (a stalled backend, a network that drops
// packets). Only connections whose startup message names `applicationName` stall, the ones
// made before stall() as well as after. It also keeps every byte it passed on to Postgres, for a
// test of what the database is sent (and so could log).

export interface StallProxy {
  /** postgres://… of the target with the proxy's port. */
  url: string;
  stall(): void;
  resume(): void;
  /** Every byte any connection sent on to Postgres so far. */
  sent(): Buffer;
  close(): Promise<void>;
}

export async function stallProxy(targetUrl: string, applicationName: string): Promise<StallProxy> {
  const target = new URL(targetUrl);
  let stalled = false;
  const matching = new Set<[Socket, Socket]>();
  const open = new Set<Socket>();
  const sent: Buffer[] = [];
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    for (const s of pair) open.add(s);
    const end = () => {
      matching.delete(pair);
      for (const s of pair) {
        open.delete(s);
        s.destroy();
      }
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    // The first bytes are the startup message, with application_name in plain text.
    client.once('data', (first: Buffer) => {
      if (first.includes(Buffer.from(applicationName))) matching.add(pair);
      sent.push(first);
      upstream.write(first);
      client.on('data', (chunk: Buffer) => sent.push(chunk));
      client.pipe(upstream);
      upstream.pipe(client);
      if (stalled && matching.has(pair)) for (const s of pair) s.pause();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: Object.assign(new URL(targetUrl), { port: String(port), hostname: '127.0.0.1' }).toString(),
    stall() {
      stalled = true;
      for (const pair of matching) for (const s of pair) s.pause();
    },
    resume() {
      stalled = false;
      for (const pair of matching) for (const s of pair) s.resume();
    },
    sent: () => Buffer.concat(sent),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
