// The examples of the README and docs/ as data: their fenced `sh`, `js` and `ts` blocks in order,
// each shell block cut into commands with the output the page shows for them. A `ts` block, or a
// `js` block, whose first line is a comment naming a file (`// program.ts`) is that file's text:
// the runner writes it, and a later shell block compiles or runs it as the page says. A block
// right after an HTML comment `<!-- not run: reason -->` is skipped (it starts the service, needs
// Docker, runs in a browser…). Prose, tables and other languages (json, sql, plain output) are
// ignored, so a page can grow without touching the runner.

import { present } from './present.js';

interface Command {
  /** The command as written, continuation lines and here-documents included. */
  text: string;
  /** Full-line `# …` comments right after the command: the output the page shows for it. */
  expected: string[];
}

export interface Block {
  lang: 'sh' | 'js' | 'ts';
  line: number;
  code: string;
  commands: Command[];
  /** The file a `ts` or `js` block is the text of, named on its first line (`// program.ts`). */
  file?: string;
}

const LANGS = ['sh', 'js', 'ts'] as const;
const isLang = (lang: string): lang is Block['lang'] => (LANGS as readonly string[]).includes(lang);

export function readmeBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const lineAt = (i: number): string => present(lines[i], `line ${i + 1}`);
  const blocks: Block[] = [];
  let skip = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lineAt(i);
    if (/^\s*<!--\s*not run\b/.test(line)) {
      skip = true;
      continue;
    }
    const fence = /^(\s*)```(\w*)\s*$/.exec(line);
    if (!fence) {
      if (line.trim() !== '') skip = false; // the marker holds only for the block right after it
      continue;
    }
    const indent = present(fence[1]).length;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lineAt(i)); i++) body.push(lineAt(i).slice(indent));
    const lang = fence[2] ?? '';
    if (!skip && isLang(lang)) {
      const code = body.join('\n');
      const file = lang === 'sh' ? undefined : /^\/\/ ([\w.-]+\.(?:ts|mjs|js))\s*$/.exec(body[0] ?? '')?.[1];
      blocks.push({ lang, line: start + 1, code, commands: lang === 'sh' ? shellCommands(body) : [], file });
    }
    skip = false;
  }
  return blocks;
}

function shellCommands(lines: string[]): Command[] {
  const commands: Command[] = [];
  let current: Command | undefined;
  const lineAt = (i: number): string => present(lines[i], `line ${i + 1} of a shell block`);
  for (let i = 0; i < lines.length; i++) {
    const line = lineAt(i);
    if (line.trim() === '') {
      current = undefined; // output comments belong to the command right above them
      continue;
    }
    if (/^\s*#/.test(line)) {
      if (current) current.expected.push(line.replace(/^\s*# ?/, ''));
      continue;
    }
    const text = [line];
    const heredoc = /<<-?\s*'?(\w+)'?/.exec(line)?.[1];
    const unfinished = (): boolean => {
      const last = present(text.at(-1));
      return heredoc ? last !== heredoc || text.length === 1 : last.endsWith('\\') || openQuote(text.join('\n'));
    };
    while (i + 1 < lines.length && unfinished()) text.push(lineAt(++i));
    current = { text: text.join('\n'), expected: [] };
    commands.push(current);
  }
  return commands;
}

/** Whether shell text ends inside a quoted string (a multi-line argument continues). */
function openQuote(text: string): boolean {
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") quote = undefined;
    } else if (c === '\\') {
      i++;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(text.charAt(i - 1)))) {
      while (i < text.length && text[i] !== '\n') i++; // a comment: its quotes do not count
    }
  }
  return quote !== undefined;
}

/**
 * Whether output shows what the page says: each expected line, in order, matches a whole line
 * of the output, where `…` stands for anything and `<name>` for one value.
 */
export function showsExpected(output: string, expected: string[]): boolean {
  // Postgres's JSON aggregates separate array elements by `, ` and break lines between a body's
  // rows: `[{…}, \n {…}]` and an embedded `[{…}, {…}]` read `[{…},{…}]`.
  const lines = output
    .replace(/,\s*\n\s*/g, ',')
    .replace(/([}\]]), ([{[])/g, '$1,$2')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  let at = 0;
  for (const want of expected) {
    const pattern = new RegExp(
      '^' +
        want
          .trim()
          .split(/(…|<[a-z_ ]+>)/)
          .map((part) =>
            part === '…' ? '.*' : /^<[a-z_ ]+>$/.test(part) ? '[^\\s"]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('') +
        '$',
    );
    while (at < lines.length && !pattern.test(present(lines[at]))) at++;
    if (at === lines.length) return false;
    at++;
  }
  return true;
}
