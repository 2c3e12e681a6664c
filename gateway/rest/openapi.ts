// GET /rest/v1/: the OpenAPI description of the exposed relations and functions as the caller's
// role may use them (reads, writes and rpc/*), asked of Postgres under that role by the gateway
// call (the root's plan): OpenAPI 3.1 (openapi31.ts) for the tools that take 3.x, and the same
// in Swagger 2.0 (swagger20.ts), what PostgREST serves and so what its clients expect.

import type { DescribeSchema } from '../engine/response/index.js';
import { openApi31 } from './openapi31.js';
import { swagger20Of } from './swagger20.js';

/** The root's Accept for OpenAPI 3.1: the OpenAPI Initiative's media type. */
const OPENAPI_31 = /(^|,)\s*application\/vnd\.oai\.openapi\+json\s*(;|,|$)/i;

/**
 * The root's answer (GatewayOptions.describe): the schema as the caller's role may use it, which
 * the gateway call asked of Postgres in the caller's transaction, as Swagger 2.0, or as OpenAPI
 * 3.1 when Accept asks for the OpenAPI Initiative's media type. Anything else gets Swagger 2.0,
 * which PostgREST serves there and its clients read.
 */
export const describeSchema: DescribeSchema = (described, accept) => {
  const v31 = OPENAPI_31.test(accept ?? '');
  return {
    status: 200,
    headers: {
      'Content-Type': v31 ? 'application/vnd.oai.openapi+json; version=3.1' : 'application/openapi+json; charset=utf-8',
      Vary: 'Accept',
    },
    body: JSON.stringify(v31 ? openApi31(described) : swagger20Of(openApi31(described))),
  };
};
