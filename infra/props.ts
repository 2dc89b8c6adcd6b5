import type { Duration } from 'aws-cdk-lib';
import type { Schedule } from 'aws-cdk-lib/aws-events';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { FunctionOptions } from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { QueueProps } from 'aws-cdk-lib/aws-sqs';

/** How the bucket's object events reach the indexer's queue. */
export enum EventDelivery {
  /**
   * S3 event notifications straight to the queue, one filter per prefix, merged into the bucket's
   * existing notification configuration.
   */
  S3_NOTIFICATIONS = 's3',
  /**
   * S3 → EventBridge → the queue, for buckets whose notification configuration is owned elsewhere.
   * A bucket the app creates gets EventBridge turned on; an imported bucket must already have it.
   */
  EVENTBRIDGE = 'eventbridge',
}

/**
 * Function settings a {@link DatastoreIndexer} takes over its defaults (VPC, tracing, name, extra
 * environment, ...). What the indexer relies on is left out: its role and log group (exposed on the
 * construct), its reserved concurrency (`maxConcurrency` plus room for the schedule and a direct invoke), its
 * recursive-loop setting (docs/DESIGN.md, "Concurrency"), and memory, timeout and log retention (props of their own).
 */
export type IndexerFunctionOverrides = Omit<
  FunctionOptions,
  'role' | 'logGroup' | 'logRetention' | 'reservedConcurrentExecutions' | 'recursiveLoop' | 'memorySize' | 'timeout'
>;

/** Queue settings a {@link DatastoreIndexer} takes over its defaults; the visibility timeout and dead-letter queue are its own. */
export type IndexerQueueOverrides = Omit<QueueProps, 'visibilityTimeout' | 'deadLetterQueue'>;

/** Properties of a {@link DatastoreIndexer}. */
export interface DatastoreIndexerProps {
  /**
   * The bucket that holds the datastores: imported by name (`Bucket.fromBucketName`) or created by the app. It must
   * belong to the deploying account: every request expects that owner, and a bucket whose account is known to differ is refused.
   */
  readonly bucket: IBucket;

  /**
   * Datastore roots (key prefixes without leading or trailing `/`) to keep indexed; required unless `bucketRoot`.
   * @default - none: an error unless `bucketRoot` is true
   */
  readonly prefixes?: readonly string[];

  /**
   * Keep one datastore at the bucket root (no prefixes): the role may then read every object of the bucket.
   * @default false
   */
  readonly bucketRoot?: boolean;

  /**
   * The namespaces the indexer keeps, each as its folder relative to the bucket: `<prefix>/<namespace>`
   * (e.g. `swamp/team-a`), or `<namespace>` for a root at the bucket root. The role may write only the index,
   * partition files and manifest of a listed namespace; events and repairs of an unlisted one are counted
   * (`NamespacesUnlisted`) and logged naming this prop, and the root's own index is kept as usual. There is
   * no wildcard for every namespace: IAM's `*` crosses `/`, so one would also match data keys.
   * @default [] - no namespace is written
   */
  readonly namespaces?: readonly string[];

  /**
   * When the full drift repair runs.
   * @default Schedule.rate(Duration.hours(1))
   */
  readonly schedule?: Schedule;

  /**
   * How long the queue gathers events before invoking the function (1 s to 5 min). The shortest Lambda
   * allows for batches over 10, so a lone upload is indexed within seconds; under a burst batches grow
   * anyway while `maxConcurrency` runs are busy (docs/PERFORMANCE.md, "Freshness and cost of the event path").
   * @default Duration.seconds(1)
   */
  readonly batchingWindow?: Duration;

  /**
   * How many invocations the queue's event source mapping runs at once (2 to 1000). Concurrent runs
   * are safe: each index write happens under the datastore lock with `If-Match`, then is re-checked.
   * @default 2
   */
  readonly maxConcurrency?: number;

  /**
   * Memory of the function, in MiB (128 to 10240).
   * @default 1024
   */
  readonly memorySize?: number;

  /**
   * Timeout of the function (up to 15 min); the queue's visibility timeout follows from it.
   * @default Duration.minutes(5)
   */
  readonly timeout?: Duration;

  /**
   * How long the function's logs are kept.
   * @default RetentionDays.ONE_MONTH
   */
  readonly logRetention?: RetentionDays;

  /**
   * How object events arrive.
   * @default EventDelivery.S3_NOTIFICATIONS
   */
  readonly eventDelivery?: EventDelivery;

  /**
   * Topic that the alarms notify, on alarm and on recovery.
   * @default - a topic the construct creates (`alarmTopic` on the construct)
   */
  readonly alarmTopic?: ITopic;

  /**
   * E-mail address subscribed to the alarm topic (the address must confirm the subscription).
   * @default - nobody; synth warns when the construct made the topic and nobody is subscribed
   */
  readonly alarmEmail?: string;

  /**
   * Tags put on every resource of the construct.
   * @default - none
   */
  readonly tags?: Readonly<Record<string, string>>;

  /**
   * The KMS key that encrypts the bucket's objects, when it uses SSE-KMS.
   * @default - the bucket's own `encryptionKey`, if any; otherwise no KMS permission is granted
   */
  readonly encryptionKey?: IKey;

  /**
   * The handler's entry file, bundled by local esbuild with the options of `infra/bundling.json`.
   * @default - in a clone, `lambda/index.ts` bundled by local esbuild; from the installed package,
   * the built bundle it ships (no esbuild or Docker needed)
   */
  readonly entry?: string;

  /**
   * Overrides merged over the function's defaults, as AWS Solutions Constructs' `lambdaFunctionProps`;
   * `environment` is added to the indexer's own variables, which win on a clash.
   * @default - none
   */
  readonly functionProps?: IndexerFunctionOverrides;

  /**
   * Overrides merged over the event queue's defaults (SQS-managed encryption, TLS only), e.g. a KMS key.
   * @default - none
   */
  readonly queueProps?: IndexerQueueOverrides;

  /**
   * Overrides merged over the dead-letter queue's defaults (SQS-managed encryption, TLS only, 14 days, retained on
   * stack deletion); its redrive allow policy (only the event queue) is its own.
   * @default - none
   */
  readonly deadLetterQueueProps?: Omit<QueueProps, 'deadLetterQueue' | 'redriveAllowPolicy'>;
}
