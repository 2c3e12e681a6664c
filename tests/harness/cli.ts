import { spawn, type ChildProcess } from 'node:child_process';
import { packageRoot } from '../../gateway/paths.js';

// Runs the `tally` command line from source (through tsx), as a user would run the bin.

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  lastLine: string;
}

/** Where the command runs: the checkout from source through tsx, or a build's directory laid out as the Docker image is. */
export interface CliFrom {
  cwd: string;
  entry: string[];
}
const SOURCE: CliFrom = { cwd: packageRoot, entry: ['--import', 'tsx', 'gateway/cli/main.ts'] };
const args = (argv: string[]): string[] => [...SOURCE.entry, ...argv];

export function tally(argv: string[], env: Record<string, string | undefined>, input?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args(argv), {
      cwd: packageRoot,
      env: { ...process.env, NODE_OPTIONS: '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const lines = stdout.trimEnd().split('\n');
      resolve({ code, stdout, stderr, lastLine: lines[lines.length - 1] ?? '' });
    });
    child.stdin.end(input ?? '');
  });
}

/**
 * Starts a long-running command (`tally up`) and resolves once its output matches `ready`.
 * `output` keeps growing after that: a line logged after the ready line (the log is written in
 * batches) is there too, where a copy taken at resolve time lost it.
 */
export function tallyServer(
  argv: string[],
  env: Record<string, string | undefined>,
  ready: RegExp,
  from: CliFrom = SOURCE,
): Promise<{ child: ChildProcess; readonly output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...from.entry, ...argv], {
      cwd: from.cwd,
      env: { ...process.env, NODE_OPTIONS: '', ...env },
    });
    let output = '';
    // A safety net only: a first start (initdb, migrations, seed) on a busy machine takes minutes.
    const timer = setTimeout(
      () => reject(new Error(`timed out waiting for ${ready}; output so far:\n${output}`)),
      240_000,
    );
    const onData = (d: Buffer): void => {
      output += d;
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve({
          child,
          get output() {
            return output;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('close', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before it was ready:\n${output}`));
    });
  });
}

/**
 * The exit code of `child`. A child still running at the deadline (a safety net only: a stop
 * takes seconds) is a bug: it is killed and the wait fails, where the test would hang.
 */
export function exited(child: ChildProcess, deadlineMs = 120_000): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`process ${child.pid} had not exited ${deadlineMs / 1000} s after it was told to stop`));
    }, deadlineMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}
