import { Duration, Names, RemovalPolicy, Stack, Tags } from 'aws-cdk-lib';
import { type IRule, Rule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { Policy, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Function as CdkFunction, type FunctionOptions, RecursiveLoop } from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Queue, QueueEncryption, RedrivePermission } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { INDEXER_ENV, METRICS_NAMESPACE, SERVICE_NAME } from '../lambda/env';
import { IndexerAlarms } from './alarms';
import { alarmTopicFor } from './private/alarm-topic';
import { bucketAccount } from './private/bucket-account';
import { BUILT_BUNDLE_CONTEXT, DEFAULT_ENTRY, FROM_SOURCES, LAMBDA_RUNTIME, nodejsBundling, shippedBundleCode } from './private/bundling';
import { deliverS3Notifications, EventBridgeDelivery } from './private/event-delivery';
import { suppressIndexerFindings, suppressNotificationsHandlerFindings } from './private/nag-suppressions';
import { kmsAccessStatement, s3AccessStatements } from './private/s3-access';
import { resolveProps } from './private/validate';
import { EventDelivery, type DatastoreIndexerProps } from './props';

/**
 * Receives a failing event gets before it goes to the dead-letter queue (Lambda's advice for SQS: at
 * least 5). Each failed receive hides the event for a whole visibility timeout, so 10 receives span
 * 10 x (6 x timeout + window): about 5 h at the defaults, far longer than a client holds the lock or a
 * throttle lasts (docs/DESIGN.md, "Concurrency").
 */
export const MAX_RECEIVE_COUNT = 10;

/**
 * Invocations the function may run beyond the queue's `maxConcurrency`: the schedule and one direct invoke. The
 * reserved concurrency is their sum, so that the queue's runs are never throttled and nothing else runs more.
 */
export const CONCURRENCY_BEYOND_QUEUE = 2;

/** Events per invocation: the most SQS allows with a batching window is 10 000; 1 000 keeps a batch well under 6 MB. */
const BATCH_SIZE = 1000;

/**
 * Keeps the index of every swamp datastore in one shared bucket true.
 *
 * Object events reach an encrypted queue (through S3 notifications or EventBridge), a single
 * function folds them into the indexes, and a schedule runs a full drift repair. The queue feeds at most
 * `maxConcurrency` runs at once (2 by default); runs on the same index serialise on the datastore lock.
 *
 * @example
 * new DatastoreIndexer(this, 'Indexer', {
 *   bucket: Bucket.fromBucketName(this, 'Shared', 'my-shared-bucket'),
 *   prefixes: ['swamp', 'infra'],
 * });
 */
export class DatastoreIndexer extends Construct {
  /** The indexer function. */
  readonly function: CdkFunction;
  /** The function's role: S3, queue and log permissions are granted to it alone. */
  readonly role: Role;
  /** The function's log group. */
  readonly logGroup: LogGroup;
  /** The queue of object events (and of the function's own delayed re-checks). */
  readonly queue: Queue;
  /** Where an event goes after `MAX_RECEIVE_COUNT` failed receives, or when EventBridge cannot deliver it. */
  readonly deadLetterQueue: Queue;
  /** The rule that runs the drift repair. */
  readonly scheduleRule: Rule;
  /** The rule that forwards object events, under EventBridge delivery. */
  readonly deliveryRule?: Rule;
  /** The topic every alarm notifies: the `alarmTopic` prop, or one made here. */
  readonly alarmTopic: ITopic;
  /** Every alarm of the indexer, each notifying `alarmTopic`. */
  readonly alarms: IndexerAlarms;

  constructor(scope: Construct, id: string, props: DatastoreIndexerProps) {
    super(scope, id);
    const config = resolveProps(props);
    const { bucket } = props;
    const account = bucketAccount(this, bucket);
    for (const [key, value] of Object.entries(props.tags ?? {})) Tags.of(this).add(key, value);

    // A name of its own, so that the dead-letter queue's redrive allow policy can name it without a reference cycle.
    const queueName = props.queueProps?.queueName ?? `${Names.uniqueResourceName(this, { maxLength: 73 })}-events`;
    const queueArn = `arn:${Stack.of(this).partition}:sqs:${Stack.of(this).region}:${Stack.of(this).account}:${queueName}`;
    // Kept on stack deletion: the events it holds are the ones the indexer gave up on.
    this.deadLetterQueue = new Queue(this, 'DeadLetterQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy: RemovalPolicy.RETAIN,
      ...props.deadLetterQueueProps,
      redriveAllowPolicy: {
        redrivePermission: RedrivePermission.BY_QUEUE,
        sourceQueues: [Queue.fromQueueArn(this, 'EventQueueRef', queueArn)],
      },
    });

    // Lambda's advice for SQS sources: at least 6x the function timeout, plus the batching window,
    // so a message is never redelivered while an invocation may still be working on it.
    const visibilityTimeout = Duration.seconds(6 * config.timeout.toSeconds() + config.batchingWindow.toSeconds());
    this.queue = new Queue(this, 'Queue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      ...props.queueProps,
      queueName,
      visibilityTimeout,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: MAX_RECEIVE_COUNT },
    });

    // An explicit role and log group: log writes are granted on this log group only, instead of
    // the account-wide AWSLambdaBasicExecutionRole managed policy.
    const role = new Role(this, 'ServiceRole', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: 'Datastore indexer function',
    });
    this.role = role;
    // Kept on stack deletion, so that the logs of what happened before are still there to read.
    const logGroup = new LogGroup(this, 'LogGroup', {
      retention: config.logRetention,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.logGroup = logGroup;
    logGroup.grantWrite(role);

    const { environment: extraEnvironment, ...overrides } = props.functionProps ?? {};
    const options: FunctionOptions = {
      description: 'Keeps the swamp datastore indexes of one bucket true',
      architecture: Architecture.ARM_64,
      ...overrides,
      memorySize: config.memorySize,
      timeout: config.timeout,
      // Above the event source mapping's maxConcurrency, so its runs are never throttled (a throttled batch would
      // use up a receive); the rest bounds what direct invokes can start. Concurrent runs on one index are safe.
      reservedConcurrentExecutions: config.maxConcurrency + CONCURRENCY_BEYOND_QUEUE,
      // The function's own messages (finishes, re-checks, repair continuations) form chains longer than Lambda's
      // loop detection allows; each kind is bounded in the handler (docs/DESIGN.md, "Concurrency").
      recursiveLoop: RecursiveLoop.ALLOW,
      role,
      logGroup,
      environment: {
        ...extraEnvironment,
        [INDEXER_ENV.bucket]: bucket.bucketName,
        [INDEXER_ENV.prefixes]: config.prefixes.join(','),
        [INDEXER_ENV.namespaces]: config.namespaces.join(','),
        [INDEXER_ENV.queueUrl]: this.queue.queueUrl,
        [INDEXER_ENV.bucketOwner]: account,
        [INDEXER_ENV.serviceName]: SERVICE_NAME,
        [INDEXER_ENV.metricsNamespace]: METRICS_NAMESPACE,
        NODE_OPTIONS: '--enable-source-maps',
      },
    };
    // From sources (a clone, or an `entry` of the app's own) local esbuild bundles the handler; the
    // installed package has no sources and deploys the bundle it ships, byte for byte, as a clone
    // does when the context asks for the built bundle.
    const builtBundle = [true, 'true'].includes(this.node.tryGetContext(BUILT_BUNDLE_CONTEXT));
    this.function =
      props.entry !== undefined || (FROM_SOURCES && !builtBundle)
        ? new NodejsFunction(this, 'Function', {
            ...options,
            entry: props.entry ?? DEFAULT_ENTRY,
            handler: 'handler',
            runtime: LAMBDA_RUNTIME,
            bundling: nodejsBundling(),
          })
        : new CdkFunction(this, 'Function', { ...options, code: shippedBundleCode(), handler: 'index.handler', runtime: LAMBDA_RUNTIME });

    this.function.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: BATCH_SIZE,
        maxBatchingWindow: config.batchingWindow,
        reportBatchItemFailures: true,
        // Lambda stops polling at this many runs instead of invoking and being throttled.
        maxConcurrency: config.maxConcurrency,
      }),
    );
    // The function sends itself delayed re-checks, repair continuations and finishes of its own publishes:
    // SendMessage alone (it has the queue's URL, so no GetQueueUrl), plus the key a KMS-encrypted queue needs.
    this.queue.grant(this.function, 'sqs:SendMessage');
    this.queue.encryptionMasterKey?.grant(this.function, 'kms:GenerateDataKey', 'kms:Decrypt');

    const access = new Policy(this, 'DatastoreAccess', {
      statements: s3AccessStatements(bucket.bucketArn, config.prefixes, config.namespaces, account),
    });
    const key = props.encryptionKey ?? bucket.encryptionKey;
    if (key) access.addStatements(kmsAccessStatement(key.keyArn));
    access.attachToRole(role);
    // The function must not run (from the queue or the schedule) before it may touch the bucket.
    this.function.node.addDependency(access);

    if (config.eventDelivery === EventDelivery.EVENTBRIDGE) {
      const queues = { queue: this.queue, deadLetterQueue: this.deadLetterQueue };
      this.deliveryRule = new EventBridgeDelivery(this, 'ObjectEvents', bucket, queues, config.prefixes, account).rule;
    } else {
      deliverS3Notifications(bucket, this.queue, config.prefixes, account);
      suppressNotificationsHandlerFindings(this);
    }

    this.scheduleRule = new Rule(this, 'DriftRepairSchedule', {
      description: 'Datastore indexer: full drift repair of every datastore root',
      schedule: config.schedule,
      // A repair older than the next one is pointless: retry briefly, then let the next run do it.
      targets: [new LambdaFunction(this.function, { retryAttempts: 2, maxEventAge: Duration.hours(1) })],
    });

    this.alarmTopic = alarmTopicFor(this, props.alarmTopic, props.alarmEmail);
    const rules: Record<string, IRule> = { Schedule: this.scheduleRule };
    if (this.deliveryRule) rules.ObjectEvents = this.deliveryRule;
    this.alarms = new IndexerAlarms(this, 'Alarms', {
      function: this.function,
      queue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
      visibilityTimeout,
      rules,
      topic: this.alarmTopic,
    });

    suppressIndexerFindings(access, bucket.bucketArn, config.prefixes, config.namespaces);
  }
}
