/**
 * The Lambda's environment contract: the variables the construct sets and the handler reads, and the
 * names its logs and metrics go under. `infra/` and `lambda/handler/` both take them from here.
 */

/** The variables the construct sets for the handler. */
export const INDEXER_ENV = {
  /** The shared bucket. */
  bucket: 'DATASTORE_BUCKET',
  /** The datastore roots, comma-separated; empty for the bucket root. */
  prefixes: 'DATASTORE_PREFIXES',
  /** The namespaces the role may write, `<prefix>/<ns>` comma-separated; unset: every namespace is written. */
  namespaces: 'DATASTORE_NAMESPACES',
  /** Where delayed re-checks and repair continuations are sent. */
  queueUrl: 'DATASTORE_QUEUE_URL',
  /** The account that must own the bucket: sent as S3's expected bucket owner on every request. */
  bucketOwner: 'DATASTORE_BUCKET_OWNER',
  /** Powertools' service name of logs and metrics. */
  serviceName: 'POWERTOOLS_SERVICE_NAME',
  /** Powertools' CloudWatch namespace of metrics. */
  metricsNamespace: 'POWERTOOLS_METRICS_NAMESPACE',
} as const;

/** Variables the handler also reads, set by hand (tuning, tests, S3-compatible stores); the construct leaves them unset. */
export const TUNING_ENV = {
  recheckDelaySeconds: 'DATASTORE_RECHECK_DELAY_SECONDS',
  finishDelaySeconds: 'DATASTORE_FINISH_DELAY_SECONDS',
  lockWaitSeconds: 'DATASTORE_LOCK_WAIT_SECONDS',
  repairReserveSeconds: 'DATASTORE_REPAIR_RESERVE_SECONDS',
  forcePathStyle: 'DATASTORE_FORCE_PATH_STYLE',
  endpoint: 'AWS_ENDPOINT_URL_S3',
} as const;

/** Variables the Lambda runtime sets that the handler reads (through the library): neither the construct nor a user sets them. */
export const RUNTIME_ENV = {
  /** The function's memory in MiB: the memory budget of a full heal (`memoryBudget`). */
  functionMemory: 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  /** The function's name: the per-stack dimension of the handler's metrics (`FUNCTION_DIMENSION`). */
  functionName: 'AWS_LAMBDA_FUNCTION_NAME',
} as const;

/** Service name in Powertools logs and metrics; the same name as the command and the README. */
export const SERVICE_NAME = 'datastore-indexer';

/** CloudWatch namespace of the Lambda's Powertools metrics. */
export const METRICS_NAMESPACE = 'DatastoreIndexer';

/**
 * The dimension, next to `service`, of every handler metric: the function's name, so that two stacks in one
 * account and region count apart and each alarms on its own.
 */
export const FUNCTION_DIMENSION = 'FunctionName';

/** The metric a heal stopped by `IndexTooLargeError` counts; the construct alarms on it. */
export const INDEX_TOO_LARGE_METRIC = 'IndexTooLarge';

/** The metric a scheduled or direct repair counts for each root it could not heal; the construct alarms on it. */
export const ROOTS_FAILED_METRIC = 'RootsFailed';
