import { existsSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { packageRoot } from '../../gateway/paths.js';
import { allPages, page } from '../harness/docs.js';

// The README and docs/ link to one another by topic: every relative link must reach a file of the
// repository and, with a #fragment, a heading of that page (GitHub's anchors), so that moving a
// section does not leave a reader at a dead link.

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

/** The anchors of a page's headings, outside code blocks. */
function anchors(text: string): Set<string> {
  const found = new Set<string>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence;
    const m = /^#{1,6} (.+)$/.exec(line);
    if (!fence && m) found.add(anchor(m[1]!));
  }
  return found;
}

describe('the links of the README and docs/', () => {
  it('reads headings as GitHub anchors them', () => {
    expect(anchor('Safe retries: `Idempotency-Key`')).toBe('safe-retries-idempotency-key');
    expect(anchor('Functions: `/rest/v1/rpc/{function}`')).toBe('functions-restv1rpcfunction');
  });

  it.each([...allPages(), 'CONTRIBUTING.md'].map((p) => [p]))(
    '%s links only to files and headings that exist',
    (path) => {
      const text = page(path).replace(/```[\s\S]*?```/g, '');
      const dead: string[] = [];
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue; // an absolute URL
        const [file, fragment] = target!.split('#');
        const resolved = file ? normalize(join(dirname(path), file)) : path;
        if (!existsSync(join(packageRoot, resolved))) dead.push(target!);
        else if (fragment !== undefined && resolved.endsWith('.md') && !anchors(page(resolved)).has(fragment))
          dead.push(target!);
      }
      expect(dead).toEqual([]);
    },
  );
});
