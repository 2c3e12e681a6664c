// The one error shape of every surface, PostgREST's: {code, message, details, hint}, with an
// HTTP status. Nothing else (no stack, no SQL text) ever reaches a client.

export interface ErrorBody {
  code: string;
  message: string;
  details: string | null;
  hint: string | null;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: string | null = null,
    readonly hint: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): ErrorBody {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint };
  }
}

/** A 500 that says nothing about the internals; the cause is logged, never sent. */
export function internalError(): ApiError {
  return new ApiError(500, 'PGRST000', 'Internal server error', null, 'This is a bug in Tally; the server log has the details');
}
