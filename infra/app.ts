#!/usr/bin/env node
// The CDK app (cdk.json runs it with `npx tsx infra/app.ts`): one DatastoreIndexerStack per shared
// bucket named in context. See the README's "Deploy" section.
import { App } from 'aws-cdk-lib';
import { DatastoreIndexerPropError } from './errors';
import { readStackConfigs, type IndexerStackConfig } from './private/app-context';
import { DatastoreIndexerStack } from './stack';

const app = new App();

let configs: IndexerStackConfig[];
try {
  configs = readStackConfigs((key) => app.node.tryGetContext(key));
} catch (e) {
  if (!(e instanceof DatastoreIndexerPropError)) throw e;
  // A usage mistake, not a bug: say what to do without a stack trace.
  console.error(`datastore-indexer: ${e.message}`);
  process.exit(1);
}

for (const { stackName, ...config } of configs) {
  // Environment-agnostic: the stack deploys to the account and region of the CLI's credentials,
  // which must be the bucket's region (S3 notifies queues in its own region only).
  new DatastoreIndexerStack(app, stackName, config);
}
