import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../gateway/paths.js';

// The documentation as tests read it: the README and the pages of docs/, each topic in one page.
// A test that holds a page to the code (the configuration table, the error codes, the MCP tools)
// reads it here, by the page and heading that hold the topic.

/** The text of a page of the repository (`README.md`, `docs/rest.md`). */
export function page(path: string): string {
  return readFileSync(join(packageRoot, path), 'utf8');
}

/** Every page: the README, then docs/ in name order. */
export function allPages(): string[] {
  const docs = readdirSync(join(packageRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

/**
 * The section of `path` under `heading` (a whole line, `## Citus`), up to the next heading of the
 * same or a higher level. Throws when the page has no such heading: a test must not pass on
 * an empty section.
 */
export function section(path: string, heading: string): string {
  const text = page(path);
  const lines = text.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`${path} has no heading "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  let end = start + 1;
  let fence = false;
  for (; end < lines.length; end++) {
    const line = lines[end]!;
    if (/^\s*```/.test(line)) fence = !fence;
    const m = /^(#+) /.exec(line);
    if (!fence && m && m[1]!.length <= level) break;
  }
  return lines.slice(start, end).join('\n');
}
