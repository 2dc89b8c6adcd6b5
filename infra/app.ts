#!/usr/bin/env node
// The CDK app (cdk.json runs it with `npx tsx infra/app.ts`): one DatastoreIndexerStack per shared
// bucket named in context. See the README's "Deploy" section.
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { DatastoreIndexerPropError } from './errors';
import { addIndexerStacks } from './private/app-stacks';

const app = new App();
// `cdk synth` reports every AwsSolutions finding not acknowledged with its reason (infra/private/nag-suppressions.ts).
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
try {
  addIndexerStacks(app);
} catch (e) {
  if (!(e instanceof DatastoreIndexerPropError)) throw e;
  // A usage mistake, not a bug: say what to do, without a stack trace.
  console.error(`datastore-indexer: ${e.message}`);
  process.exit(1);
}
