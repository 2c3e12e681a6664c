import { httpContext } from '../../gateway/engine/request/http-context.js';

// What SQL reads of a call that has no HTTP request of its own (an MCP tool call), and of the
// Cookie header PostgREST's way.

describe('httpContext', () => {
  const call = (relation: string, http?: { headers: Record<string, string>; path?: string }) =>
    httpContext({ method: 'POST', relation, query: new URLSearchParams(), headers: {}, http });

  it('gives a call without an HTTP request no headers or cookies, and the path /rest/v1 would have', () => {
    expect(call('rpc/fund_summary')).toEqual({
      headers: '{}',
      cookies: '{}',
      method: 'POST',
      path: '/rpc/fund_summary',
    });
    expect(call('my table').path).toBe('/my%20table');
    expect(call('').path).toBe('/');
  });

  it('reads cookies as PostgREST does: leading spaces dropped, values as sent, the last of a name twice', () => {
    const { cookies, headers } = call('t', { headers: { cookie: ' a=1;  b="x;y"; a=2;=3;flag', 'x-a': 'b' } });
    expect(JSON.parse(cookies)).toEqual({ a: '2', b: '"x', 'y"': '', flag: '' });
    expect(JSON.parse(headers)).toEqual({ 'x-a': 'b' });
  });
  it('leaves the credentials out of the headers: a database logging parameters would log them', () => {
    const { headers } = call('t', {
      headers: { authorization: 'Bearer x.y.z', 'proxy-authorization': 'Basic eA==', apikey: 'k', 'x-a': 'b' },
    });
    expect(JSON.parse(headers)).toEqual({ 'x-a': 'b' });
  });
});
