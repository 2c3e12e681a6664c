import { paramsRefusal } from '../../mcp/server.js';

// The check both transports run before the SDK's Server sees a request (http.ts, and stdio's
// connectChecked): the method is the client's, whatever it names.

const request = (method: string, params?: unknown) => ({
  jsonrpc: '2.0' as const,
  id: 1,
  method,
  ...(params === undefined ? {} : { params: params as Record<string, unknown> }),
});

describe('paramsRefusal', () => {
  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'foo/bar'])(
    'leaves %s to the Server (Method not found), without throwing',
    (method) => {
      expect(paramsRefusal(request(method, {}))).toBeUndefined();
    },
  );

  it('refuses params of the wrong shape for the methods it knows', () => {
    expect(paramsRefusal(request('tools/call', { name: 5 }))).toMatchObject({ id: 1, error: { code: -32602 } });
    expect(paramsRefusal(request('tools/call', { name: 'list_expenses', arguments: {} }))).toBeUndefined();
  });
});
