// The wrapper's route table: a method and a path pattern ('/funds/:id') to a handler, matched
// as Express's router matched them before the wrapper left it: literal segments without regard
// to case and not percent-decoded, a parameter one non-empty segment (decoded), one trailing
// slash allowed, and HEAD answered by the GET route.

export interface Route<H> {
  method: string;
  segments: string[];
  handler: H;
}

export function route<H>(method: string, pattern: string, handler: H): Route<H> {
  return { method, segments: pattern.split('/').slice(1), handler };
}

/** The segments of a path below the table's base ('' or '/…'), without one trailing slash. */
export function segmentsOf(path: string): string[] {
  const parts = path.split('/').slice(1);
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** The parameters of a path that fits the pattern (decoded, in order), or undefined. */
function fit(pattern: string[], segments: string[]): string[] | undefined {
  if (pattern.length !== segments.length) return undefined;
  const params: string[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const s = segments[i]!;
    if (p.startsWith(':')) {
      if (s === '') return undefined;
      params.push(decodeURIComponent(s)); // the server checked the whole path decodes
    } else if (p !== s.toLowerCase()) return undefined;
  }
  return params;
}

/** The route of a request and its parameters, or undefined. */
export function findRoute<H>(
  routes: Route<H>[],
  method: string,
  segments: string[],
): { handler: H; params: string[] } | undefined {
  const wanted = method === 'HEAD' ? 'GET' : method;
  for (const r of routes) {
    if (r.method !== wanted) continue;
    const params = fit(r.segments, segments);
    if (params) return { handler: r.handler, params };
  }
  return undefined;
}
