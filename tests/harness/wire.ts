import { connect, createServer, type Server, type Socket } from 'node:net';

// A TCP proxy in front of Postgres that reads the protocol both ways and counts what a client
// (a Tally server) costs the database, exactly, whatever the machine's load: the statements it
// ran, the statements Postgres had to parse, the round trips the client waited for, and the
// transactions that committed. Nothing here is timed.
//
// How each is read from the wire (PostgreSQL's frontend/backend protocol, version 3):
// - a statement is a simple Query ('Q') or an Execute ('E') of the extended protocol;
// - a parse is a Parse ('P') or a simple Query ('Q', parsed and planned at every call): a
//   prepared statement is parsed once per connection and then only bound ('B'), so a parse per
//   request is a statement Postgres parses and plans every time;
// - a round trip is a burst of messages the client sent when it had no answer outstanding (every
//   Sync or Query it had sent was answered by a ReadyForQuery, 'Z'): pipelined statements are one;
// - a commit is a CommandComplete ('C') tagged COMMIT, or a statement run outside a transaction
//   block (a ReadyForQuery 'I' before and after it, without an error): Postgres commits those alone.
// Connections are told apart by the application_name of their startup message.

export interface WireCounts {
  statements: number;
  parses: number;
  roundTrips: number;
  commits: number;
  rollbacks: number;
}

const zero = (): WireCounts => ({ statements: 0, parses: 0, roundTrips: 0, commits: 0, rollbacks: 0 });

interface WireConnection {
  applicationName: string;
  counts: WireCounts;
  /** The text of every statement run, in order (Parse texts looked up by statement name). */
  log: string[];
}

export interface WireProxy {
  /** The target URL with the proxy's host and port. */
  url: string;
  connections: readonly WireConnection[];
  /** The counts of the connections whose application_name `include` accepts (every one by default). */
  total(include?: (applicationName: string) => boolean): WireCounts;
  /** The text of every statement the matching connections ran, for messages. */
  statementLog(include?: (applicationName: string) => boolean): string[];
  /** No statement sent through the proxy waits for its answer. */
  idle(): boolean;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;

/** Splits a stream into protocol messages; the first `untyped` messages have no type byte. */
class Framer {
  private buffer: Buffer = Buffer.alloc(0);
  constructor(private untyped: number) {}

  /** Expect one more untyped message (a startup message after a refused SSL request). */
  expectUntyped(): void {
    this.untyped++;
  }

  *messages(chunk: Buffer): Generator<{ type: string; body: Buffer }> {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.untyped > 0) {
        if (this.buffer.length < 4) return;
        const length = this.buffer.readInt32BE(0);
        if (this.buffer.length < length) return;
        const body = this.buffer.subarray(4, length);
        this.buffer = this.buffer.subarray(length);
        this.untyped--;
        yield { type: '', body };
        continue;
      }
      if (this.buffer.length < 5) return;
      const length = this.buffer.readInt32BE(1);
      if (this.buffer.length < length + 1) return;
      const type = String.fromCharCode(this.buffer[0]!);
      const body = this.buffer.subarray(5, length + 1);
      this.buffer = this.buffer.subarray(length + 1);
      yield { type, body };
    }
  }
}

const cstring = (body: Buffer, from = 0): string => {
  const end = body.indexOf(0, from);
  return body.toString('utf8', from, end < 0 ? body.length : end);
};

/** The startup message's application_name (pairs of C strings after the protocol version). */
function applicationNameOf(startup: Buffer): string {
  const parts = startup.subarray(4).toString('utf8').split('\0');
  const i = parts.indexOf('application_name');
  return i >= 0 ? (parts[i + 1] ?? '') : '';
}

/** One client connection through the proxy: what it sent and what Postgres answered. */
class Conversation implements WireConnection {
  applicationName = '';
  counts = zero();
  log: string[] = [];
  private readonly fromClient = new Framer(1);
  private readonly fromServer = new Framer(0);
  private awaitingSslByte = false;
  private ready = false;
  /** Syncs and Queries sent and not answered by a ReadyForQuery yet. */
  outstanding = 0;
  private status = 'I';
  /** Statements run since the last ReadyForQuery, and whether one of them failed. */
  private ranSinceReady = 0;
  private failed = false;
  private readonly named = new Map<string, string>();
  private unnamed = '';
  private bound = '';

  client(chunk: Buffer): void {
    let burst = false;
    for (const { type, body } of this.fromClient.messages(chunk)) {
      if (type === '') {
        const code = body.readInt32BE(0);
        if (code === SSL_REQUEST || code === GSS_REQUEST) {
          this.awaitingSslByte = true;
          this.fromClient.expectUntyped();
        } else this.applicationName = applicationNameOf(body);
        continue;
      }
      if (!this.ready) continue; // authentication
      if (!burst && this.outstanding === 0 && type !== 'X') {
        this.counts.roundTrips++;
        burst = true;
      }
      if (type === 'Q') {
        this.outstanding++;
        this.counts.statements++;
        this.counts.parses++;
        this.ranSinceReady++;
        this.log.push(cstring(body));
      } else if (type === 'P') {
        this.counts.parses++;
        const name = cstring(body);
        const text = cstring(body, name.length + 1);
        if (name === '') this.unnamed = text;
        else this.named.set(name, text);
      } else if (type === 'B') {
        const portal = cstring(body);
        const statement = cstring(body, portal.length + 1);
        this.bound = statement === '' ? this.unnamed : (this.named.get(statement) ?? statement);
      } else if (type === 'E') {
        this.counts.statements++;
        this.ranSinceReady++;
        this.log.push(this.bound);
      } else if (type === 'S') this.outstanding++;
    }
  }

  server(chunk: Buffer): void {
    if (this.awaitingSslByte && chunk.length > 0) {
      // The answer to an SSL or GSS request is one byte ('N': go on in plain text; this proxy
      // only reads plain connections).
      this.awaitingSslByte = false;
      chunk = chunk.subarray(1);
    }
    for (const { type, body } of this.fromServer.messages(chunk)) {
      if (type === 'C') {
        const tag = cstring(body);
        if (tag === 'COMMIT') this.counts.commits++;
        else if (tag === 'ROLLBACK') this.counts.rollbacks++;
      } else if (type === 'E') this.failed = true;
      else if (type === 'Z') {
        const status = String.fromCharCode(body[0]!);
        if (!this.ready) this.ready = true;
        else {
          this.outstanding = Math.max(0, this.outstanding - 1);
          // Statements run in no transaction block are a transaction each, committed alone.
          if (this.status === 'I' && status === 'I' && this.ranSinceReady > 0) {
            if (this.failed) this.counts.rollbacks++;
            else if (!/^\s*(COMMIT|ROLLBACK|END|ABORT)\b/i.test(this.log.at(-1) ?? '')) this.counts.commits++;
          }
        }
        this.status = status;
        this.ranSinceReady = 0;
        this.failed = false;
      }
    }
  }
}

function add(into: WireCounts, from: WireCounts): void {
  for (const k of Object.keys(into) as (keyof WireCounts)[]) into[k] += from[k];
}

/** Starts a counting proxy in front of the Postgres at `targetUrl`. */
export async function wireProxy(targetUrl: string): Promise<WireProxy> {
  const target = new URL(targetUrl);
  const conversations: Conversation[] = [];
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    upstream.setNoDelay(true);
    const talk = new Conversation();
    conversations.push(talk);
    for (const s of [client, upstream]) open.add(s);
    const end = () => {
      for (const s of [client, upstream]) {
        open.delete(s);
        s.destroy();
      }
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.on('data', (chunk: Buffer) => {
      talk.client(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      talk.server(chunk);
      client.write(chunk);
    });
  });
  server.on('connection', (s) => s.setNoDelay(true));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const matching = (include?: (name: string) => boolean) =>
    conversations.filter((c) => !include || include(c.applicationName));
  return {
    url: Object.assign(new URL(targetUrl), { port: String(port), hostname: '127.0.0.1' }).toString(),
    connections: conversations,
    total(include) {
      const sum = zero();
      for (const c of matching(include)) add(sum, c.counts);
      return sum;
    },
    statementLog(include) {
      return matching(include).flatMap((c) => c.log);
    },
    idle: () => conversations.every((c) => c.outstanding === 0),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
