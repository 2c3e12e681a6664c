import type { jest } from '@jest/globals';

// The request log as a test sees it: the fields of each 'request' line logged while a spy on
// the process logger's `info` was in place.

type RequestLine = { route?: string; status?: number; workspace_id?: string };

export function requestLines(info: jest.SpiedFunction<(...args: never[]) => unknown>): RequestLine[] {
  return info.mock.calls
    .filter((args) => (args as unknown[])[1] === 'request')
    .map((args) => (args as unknown[])[0] as RequestLine);
}
