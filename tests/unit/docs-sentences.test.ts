import { allPages, page } from '../harness/docs.js';

// The README and docs/ are written in sentences a reader takes in at once: no sentence of their
// prose has more than 50 words. Prose is what is left without code blocks, tables, headings and
// HTML; each paragraph and each list item is read on its own. A code span is one word, and a
// sentence ends at `.`, `!` or `?` before a word that does not start in lower case (not at "e.g.").

const MAX_WORDS = 50;

/** The paragraphs and list items of a page, each joined into one line. */
function prose(text: string): string[] {
  const blocks: string[] = [];
  let lines: string[] = [];
  const flush = (): void => {
    if (lines.length) blocks.push(lines.join(' '));
    lines = [];
  };
  let fence = false;
  for (const raw of text.split('\n')) {
    if (/^\s*```/.test(raw)) fence = !fence;
    const line = raw.replace(/^\s*>\s?/, '').trim(); // a quote's text is prose too
    if (fence || /^```/.test(line) || line === '' || /^[|#<]|^!\[/.test(line)) {
      flush();
      continue;
    }
    const item = /^([-*+]|\d+\.) /.exec(line);
    if (item) flush();
    lines.push(item ? line.slice(item[0].length) : line);
  }
  flush();
  return blocks;
}

/** A block's sentences, each as its words (a code span, however long, is one word). */
function sentences(block: string): string[][] {
  const words = block.match(/(?:(`+)[\s\S]*?\1|[^\s`])+/g) ?? [];
  const found: string[][] = [];
  let current: string[] = [];
  words.forEach((word, i) => {
    current.push(word);
    const next = words[i + 1];
    const ends = /[.!?][)"'*_]*$/.test(word) && !/\b(e\.g|i\.e|etc|vs|cf)\.$/i.test(word);
    if (ends && !/^[a-z]/.test(next ?? '')) {
      found.push(current);
      current = [];
    }
  });
  if (current.length) found.push(current);
  return found;
}

const long = (text: string): string[] =>
  prose(text)
    .flatMap(sentences)
    .filter((s) => s.length > MAX_WORDS)
    .map((s) => `${s.length} words: ${s.slice(0, 12).join(' ')} …`);

describe('the sentences of the README and docs/', () => {
  it('splits prose at sentence ends only', () => {
    const text = [
      '# A heading of no interest.',
      'One, e.g. `a. B` counts as one word. Two? Three! Then 3.5 stays whole.',
      '',
      '```sh',
      'echo not. Prose.',
      '```',
      '| a table. | Not prose. |',
      '- An item; the next',
      '  line of it.',
      '- Another item.',
    ].join('\n');
    expect(
      prose(text)
        .flatMap(sentences)
        .map((s) => s.join(' ')),
    ).toEqual([
      'One, e.g. `a. B` counts as one word.',
      'Two?',
      'Three!',
      'Then 3.5 stays whole.',
      'An item; the next line of it.',
      'Another item.',
    ]);
    expect(long(`${'word '.repeat(49)}end.`)).toEqual([]);
    expect(long(`Start ${'word '.repeat(49)}end.`)).toEqual([
      '51 words: Start word word word word word word word word word word word …',
    ]);
  });

  it.each(allPages().map((p) => [p]))('%s has no sentence over 50 words', (path) => {
    expect(long(page(path))).toEqual([]);
  });
});
