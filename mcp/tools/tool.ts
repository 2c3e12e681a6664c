import type { AuthContext } from '../../gateway/engine/call.js';
import type { Scope } from '../../gateway/auth/workspace-token.js';
import type { financeFields, JsonSchema } from '../../gateway/fields.js';
import type { Lookups } from '../../gateway/lookups.js';
import type { TableClient } from '../gateway-client.js';

// What a tool is: its name, description, hints, argument and result schemas and handler, and
// tool<Args>() that holds its schema to its arguments' type. Each tool is a thin translation
// into one or a few gateway calls under the caller's role and workspace claim: RLS, scopes,
// revocation and the API switch hold as on the REST surfaces. Input schemas are built from the
// field rules of gateway/fields.ts, the wrapper's.

interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export interface RateLimitLeft {
  limit: number;
  remaining: number;
  reset_at: string;
}

/** Who calls, as a tool sees it. */
export interface McpCaller {
  auth: AuthContext;
  scope: Scope;
  /** Counts this many requests more against the token's rate limit; absent where nothing is limited (stdio). */
  charge?(hits: number): Promise<void>;
  /** What is left of the token's rate limit; absent where nothing is limited (stdio). */
  rateLimit?(): Promise<RateLimitLeft>;
}

export interface ToolContext {
  db: TableClient;
  caller: McpCaller;
  lookups: Lookups;
}

export interface ToolResult {
  structured: Record<string, unknown>;
  /** One line for a person; the records follow it as JSON in the same text block. */
  summary: string;
}

type Fields = ReturnType<typeof financeFields>;

/** A tool as the server lists and calls it: arguments validated against its input schema first. */
export interface Tool {
  name: string;
  title: string;
  description: string;
  annotations: ToolAnnotations;
  /**
   * The tool creates records: it takes an `idempotency_key` argument besides its own (the server
   * adds it to the schema and sends it as the Idempotency-Key of the tool's POSTs), which makes
   * a repeated call answer the first call's records and write nothing.
   */
  creates?: true;
  /** The arguments a call must give. */
  required: readonly string[];
  /** The arguments' schemas; the object is closed (an unknown argument is an error). */
  input(fields: Fields, lookups: Lookups): Record<string, JsonSchema>;
  output: Record<string, JsonSchema>;
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult>;
}

/** A tool whose arguments are `A`: its schema names exactly A's keys, and `required` exactly its required ones. */
interface ToolSpec<A, R extends readonly string[], P> extends Omit<Tool, 'required' | 'input' | 'run'> {
  required: R;
  input(fields: Fields, lookups: Lookups): P;
  run(args: A, ctx: ToolContext): Promise<ToolResult>;
}

type RequiredKeys<A> = { [K in keyof A]-?: undefined extends A[K] ? never : K }[keyof A] & string;
type Missing<A, R extends readonly string[]> = Exclude<RequiredKeys<A>, R[number]>;
type Optional<A, R extends readonly string[]> = Exclude<R[number], RequiredKeys<A>>;
type Unknown<A, P> = Exclude<keyof P, keyof A>;
/** `unknown` when the spec agrees with A, else a property whose name says what is wrong (a compile error). */
type Agrees<A, R extends readonly string[], P> = ([Missing<A, R>] extends [never]
  ? unknown
  : { required_misses: Missing<A, R> }) &
  ([Optional<A, R>] extends [never] ? unknown : { required_names_an_optional_argument: Optional<A, R> }) &
  ([Unknown<A, P>] extends [never] ? unknown : { input_names_an_unknown_argument: Unknown<A, P> });

/**
 * A tool with typed arguments: `tool<Args>()({...})`. The compiler holds its schema to `Args`
 * (every argument has a schema, none more; `required` lists exactly the arguments that are not
 * optional), and `run` gets `Args`: the server validated the call against that schema before.
 */
export const tool =
  <A>() =>
  <const R extends readonly (keyof A & string)[], P extends { [K in keyof A]-?: JsonSchema }>(
    spec: ToolSpec<A, R, P> & Agrees<A, R, P>,
  ): Tool =>
    spec as unknown as Tool;

/** Read tools are what a read-only token sees. */
export const isReadTool = (tool: Tool): boolean => tool.annotations.readOnlyHint === true;

// The hints say only what differs from MCP's defaults (readOnlyHint false, destructiveHint true,
// idempotentHint false, openWorldHint true). idempotentHint tells a host it may repeat a call
// on its own (after a lost answer): true only where a repeat of the same arguments cannot write
// again.
export const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
// A repeat without idempotency_key records a second time; with the same key it writes nothing
// (Tool.creates, the description says so), but the hint is about the arguments a host repeats.
export const CREATE: ToolAnnotations = { destructiveHint: false, openWorldHint: false };
// Sets the given fields to the given values: a repeat finds them so and changes nothing.
export const UPDATE: ToolAnnotations = { destructiveHint: false, idempotentHint: true, openWorldHint: false };
// A repeat finds the record gone and is refused.
export const DELETE: ToolAnnotations = { idempotentHint: true, openWorldHint: false };
// An undo may delete (the undo of a create), and undo_changes since a moment repeated would undo
// the first call's own undos: MCP's defaults.
export const UNDO: ToolAnnotations = { openWorldHint: false };
