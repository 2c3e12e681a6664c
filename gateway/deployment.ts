// What Tally adds to the engine, which serves any database and knows no app: its wording of a
// constraint error (the field rules of fields.ts) and its description of /rest/v1 (the OpenAPI
// documents of rest/openapi.ts). Every gateway of the service is made with these.

import type { GatewayOptions } from './engine/gateway.js';
import { constraintMessage } from './fields.js';
import { describeSchema } from './rest/openapi.js';

export const GATEWAY_OPTIONS: GatewayOptions = {
  describeConstraint: constraintMessage,
  describe: describeSchema,
};
