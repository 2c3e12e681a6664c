import { freePort } from '../../gateway/db/free-port.js';

// freePort() is called for several servers in a row (a Citus cluster's nodes, PgBouncer and its
// primary, a CLI's Postgres and HTTP ports) before any of them listens. Linux picks a closed
// port at random from the odd half of the ephemeral range (connect() takes the even half, so
// outgoing connections do not take these), and picks an earlier one again: 936 distinct ports
// in 1,000 calls on this machine's kernel before the fix. Two servers given one port race for
// it, and one fails to start.

test('never hands out one port twice in a process', async () => {
  const ports: number[] = [];
  for (let i = 0; i < 1000; i++) ports.push(await freePort());
  expect(new Set(ports).size).toBe(ports.length);
});
