// What Tally adds to the engine, which serves any database and knows no app: its wording of
// database errors (a constraint by the field rules of fields.ts; a read-only token; a row of
// another workspace) and its description of /rest/v1 (the OpenAPI documents of
// rest/openapi.ts). Every gateway of the service is made with these.

import type { GatewayOptions } from './engine/run.js';
import { READ_ONLY_HINT, ROW_SECURITY_HINT } from './errors.js';
import { constraintMessage } from './fields.js';
import { describeSchema } from './rest/openapi.js';

export const GATEWAY_OPTIONS: GatewayOptions = {
  describeConstraint: constraintMessage,
  readOnlyHint: READ_ONLY_HINT,
  rowSecurityHint: ROW_SECURITY_HINT,
  describe: describeSchema,
};
