import { jest } from '@jest/globals';
import { every } from '../../gateway/activity.js';

// The sweeps of the activity log and the keys run on a timer. A sweep slower than its interval
// (many workspaces over half their budget) must not start again on top of itself: each run
// holds a connection of the pool. Fake timers: the test waits for nothing.

afterEach(() => jest.useRealTimers());

test('a tick that comes while the last run is at work is skipped; the next tick after it ends runs', async () => {
  jest.useFakeTimers();
  const releases: (() => void)[] = [];
  const work = jest.fn(() => new Promise<void>((resolve) => releases.push(resolve)));
  const stop = every(60_000, work, 'the test sweep');
  try {
    expect(work).toHaveBeenCalledTimes(1); // at once
    await jest.advanceTimersByTimeAsync(5 * 60_000);
    expect(work).toHaveBeenCalledTimes(1); // five ticks while the first run still works
    releases[0]!();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(work).toHaveBeenCalledTimes(2);
    releases[1]!();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(work).toHaveBeenCalledTimes(3);
  } finally {
    stop();
    releases.forEach((r) => r());
  }
});

test('a run that fails does not stop the next', async () => {
  jest.useFakeTimers();
  const work = jest.fn(() => Promise.reject(new Error('the database went away')));
  const stop = every(60_000, work, 'the test sweep');
  try {
    await jest.advanceTimersByTimeAsync(2 * 60_000);
    expect(work).toHaveBeenCalledTimes(3);
  } finally {
    stop();
  }
});
