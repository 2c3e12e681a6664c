import { pino } from 'pino';
import { isoTime } from '../../gateway/engine/log.js';

// The log's timestamp makes the date and time to the second once a second, then adds the
// milliseconds. It must write what pino's own isoTime writes, at every instant.

const pinos = (now: number): string => `,"time":"${new Date(now).toISOString()}"`;

test('writes what pino.stdTimeFunctions.isoTime writes, to the millisecond', () => {
  const start = Date.UTC(2026, 10, 28, 23, 59, 58, 990);
  for (let now = start; now < start + 2_100; now += 1) expect(isoTime(now)).toBe(pinos(now));
  for (const now of [0, 999, 1_000, Date.UTC(1999, 11, 31, 23, 59, 59, 999), Date.UTC(2100, 0, 1), Date.now()])
    expect(isoTime(now)).toBe(pinos(now));
  expect(pino.stdTimeFunctions.isoTime()).toMatch(/^,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/);
});
