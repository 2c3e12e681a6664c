#!/usr/bin/env node
// The `tally` command line's entry. It imports nothing statically: an ES module's imports are
// all loaded before its first line runs, and on an older Node some of them fail to load
// (node:crypto's `hash` came in 20.12) with an error that names no version. So the version is
// checked first, in one line, and only then are the commands loaded.

const MINIMUM = [20, 12] as const;
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < MINIMUM[0] || (major === MINIMUM[0] && minor < MINIMUM[1])) {
  process.stderr.write(
    `tally: Node.js ${MINIMUM.join('.')} or later is needed; this is ${process.versions.node} (${process.execPath})\n`,
  );
  process.exit(1);
}
await import('./commands.js');
