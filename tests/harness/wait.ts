// Waiting for a condition instead of sleeping for a duration: on a busy machine a fixed sleep
// is either too short (the test fails) or wasted. The deadline is only a safety net that turns
// a condition that never comes into a readable failure before jest's own timeout.

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  deadlineMs = 100_000,
): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > deadlineMs) throw new Error(`gave up waiting for ${what}`);
    await pause(20);
  }
}
