// HTML built with one tagged template: every interpolated value is escaped unless it is itself
// the result of `html`, so markup can only come from this module's callers' literals.

import { defined } from '../engine/invariant.js';

export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => defined(ENTITIES[c], `the entity of ${c}`));
}

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/** html`<p>${text}</p>`: text is escaped; nested html`` fragments and arrays of them are not. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  // A template has one string more than it has values: each value is followed by its string.
  const [first = '', ...rest] = strings;
  let out = first;
  for (const [i, s] of rest.entries()) out += render(values[i]) + s;
  return new Html(out);
}
