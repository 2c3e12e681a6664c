// Where each column of a view comes from. Postgres stores a view as its rewrite rule, a parsed
// query tree (pg_rewrite.ev_action); each entry of the top query's target list records the base
// relation and column it reads directly (resorigtbl/resorigcol), as PostgREST reads them. Only
// the top target list counts: subqueries, CTEs and joins inside the view have target lists of
// their own that say nothing about the view's columns.

/** A parsed pg_node_tree: `{TYPE :field value …}` objects, `( … )` lists and bare tokens. */
type NodeValue = string | NodeValue[] | NodeObject;
interface NodeObject {
  type: string;
  fields: Map<string, NodeValue[]>;
}

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  let cur = '';
  let has = false;
  const flush = () => {
    if (has) tokens.push(cur);
    cur = '';
    has = false;
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\' && i + 1 < text.length) {
      cur += text[++i];
      has = true;
    } else if (ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r') flush();
    else if (ch === '(' || ch === ')' || ch === '{' || ch === '}') {
      flush();
      tokens.push(ch);
    } else {
      cur += ch;
      has = true;
    }
  }
  flush();
  return tokens;
}

/** Parses the text of a pg_node_tree; the tokens `(){}` written by Postgres are always balanced. */
function parseNodeTree(text: string): NodeValue {
  const tokens = tokenize(text);
  let pos = 0;
  const value = (): NodeValue => {
    const t = tokens[pos++];
    if (t === '(') {
      const list: NodeValue[] = [];
      while (pos < tokens.length && tokens[pos] !== ')') list.push(value());
      pos++;
      return list;
    }
    if (t === '{') {
      const node: NodeObject = { type: tokens[pos++] ?? '', fields: new Map() };
      let field: NodeValue[] | undefined;
      for (let next = tokens[pos]; next !== undefined && next !== '}'; next = tokens[pos]) {
        if (next.startsWith(':')) {
          pos++;
          field = [];
          node.fields.set(next.slice(1), field);
        } else {
          const v = value();
          field?.push(v);
        }
      }
      pos++;
      return node;
    }
    return t ?? '';
  };
  return value();
}

export interface ViewColumnOrigin {
  /** The view's column number (attnum). */
  resno: number;
  relid: number;
  attnum: number;
}

/** The view columns that read a base column directly, from the rule's top target list. */
export function viewColumnOrigins(action: string): ViewColumnOrigin[] {
  let tree: NodeValue;
  try {
    tree = parseNodeTree(action);
  } catch {
    return []; // a tree too deep to walk: the view is served, without relationships
  }
  const query = Array.isArray(tree) ? tree[0] : tree;
  if (typeof query !== 'object' || Array.isArray(query) || query.type !== 'QUERY') return [];
  const list = query.fields.get('targetList')?.[0];
  if (!Array.isArray(list)) return [];
  const out: ViewColumnOrigin[] = [];
  for (const entry of list) {
    if (typeof entry !== 'object' || Array.isArray(entry) || entry.type !== 'TARGETENTRY') continue;
    const num = (name: string) => Number(entry.fields.get(name)?.[0]);
    if (entry.fields.get('resjunk')?.[0] === 'true') continue;
    const [resno, relid, attnum] = [num('resno'), num('resorigtbl'), num('resorigcol')];
    if (Number.isInteger(resno) && relid > 0 && attnum > 0) out.push({ resno, relid, attnum });
  }
  return out;
}
