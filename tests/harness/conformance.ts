import request from 'supertest';
import { setUpBlog, type BlogSuite } from './suite.js';
import { TEST_API_KEY } from './rest.js';

// The conformance fixture (tests/fixtures/conformance.sql) served alone as schema `conf`, with
// the blog fixture's roles; and a GET helper that sends the publishable key.

export function setUpConformance(env: Record<string, string> = {}): Promise<BlogSuite> {
  return setUpBlog(['conformance.sql'], { TALLY_DB_SCHEMAS: 'conf', ...env });
}

export function getter(suite: () => BlogSuite) {
  return (path: string, headers: Record<string, string> = {}) =>
    request(suite().t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, ...headers });
}
