/**
 * The CDK construct, as the package exports it (`s3-datastore-indexer/infra`): add one
 * `DatastoreIndexer` to your own app, or deploy the ready-made `DatastoreIndexerStack`.
 * Needs `aws-cdk-lib` and `constructs` in the app (peer dependencies).
 */
export { INDEXER_ENV, METRICS_NAMESPACE, SERVICE_NAME } from '../lambda/env';
export { DatastoreIndexer } from './datastore-indexer';
export { DatastoreIndexerPropError } from './errors';
export { type DatastoreIndexerProps, EventDelivery, type IndexerFunctionOverrides, type IndexerQueueOverrides } from './props';
export { DatastoreIndexerStack, type DatastoreIndexerStackProps } from './stack';
export { IndexerAlarms, type IndexerAlarmsProps } from './alarms';
