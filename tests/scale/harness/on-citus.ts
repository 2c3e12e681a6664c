import { useDatabases } from '../../harness/db.js';
import { createCitusDatabase, dropCitusDatabase, nodeAt } from './citus.js';

// The `on-citus` project's setup for each file of the main suite: its databases are made on the
// project's Citus cluster (the coordinator is the cluster URL's server, the workers are in
// TALLY_TEST_CITUS_WORKERS), as a deployment makes them, instead of cloned from a template
// (Citus's own connections hold a template open). The main suite's harness knows nothing of
// Citus: this file hands it the way to make and drop a database.
const coordinator = nodeAt(Number(new URL(process.env.TALLY_TEST_CLUSTER_URL!).port));
const workers = process.env.TALLY_TEST_CITUS_WORKERS!.split(',').map((port) => nodeAt(Number(port)));

useDatabases({
  create: (name) => createCitusDatabase(coordinator, workers, name),
  drop: (name) => dropCitusDatabase([coordinator, ...workers], name),
});
