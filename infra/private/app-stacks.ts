import type { App } from 'aws-cdk-lib';
import { DatastoreIndexerStack } from '../stack';
import { readStackConfigs } from './app-context';

/**
 * Adds one DatastoreIndexerStack per bucket named in the app's context.
 *
 * Stacks are environment-agnostic: they deploy to the account and region of the CLI's credentials,
 * which must be the bucket's region (S3 notifies queues in its own region only).
 *
 * @throws DatastoreIndexerPropError naming the missing or invalid context key
 */
export function addIndexerStacks(app: App): DatastoreIndexerStack[] {
  return readStackConfigs((key) => app.node.tryGetContext(key)).map(
    ({ stackName, ...config }) => new DatastoreIndexerStack(app, stackName, config),
  );
}
