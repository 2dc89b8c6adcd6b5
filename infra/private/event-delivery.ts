import { Annotations, Aws, Duration } from 'aws-cdk-lib';
import { Rule } from 'aws-cdk-lib/aws-events';
import {
  Bucket,
  BucketNotificationDestinationType,
  EventType,
  type BucketNotificationDestinationConfig,
  type IBucket,
  type IBucketNotificationDestination,
  type NotificationKeyFilter,
} from 'aws-cdk-lib/aws-s3';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct, type IConstruct } from 'constructs';
import { keyRoots } from './s3-access';
import { allowServiceToSend } from './service-grants';

/** How long EventBridge keeps retrying an object event before it goes to the dead-letter queue: the schedule repairs hourly anyway. */
const EVENT_MAX_AGE = Duration.hours(2);
/** EventBridge's retries of one object event within `EVENT_MAX_AGE`. */
const EVENT_RETRY_ATTEMPTS = 20;

/**
 * The queue as the destination of S3 notifications, sent only for this bucket of this account (`aws:SourceArn`
 * and `aws:SourceAccount`: a bucket ARN names no account, so the ARN alone would let another account's bucket of
 * that name send). CDK's `SqsDestination` checks the ARN alone, and lets S3 use a queue key with no condition.
 */
class QueueDestination implements IBucketNotificationDestination {
  private granted = false;

  constructor(
    private readonly queue: IQueue,
    private readonly account: string,
  ) {}

  bind(_scope: Construct, bucket: IBucket): BucketNotificationDestinationConfig {
    if (!this.granted) allowServiceToSend(this.queue, 's3.amazonaws.com', bucket.bucketArn, this.account);
    this.granted = true;
    // S3 sends a test message when the configuration is put: the queue policy and key policy must exist first.
    const dependencies: IConstruct[] = [this.queue];
    if (this.queue.encryptionMasterKey) dependencies.push(this.queue.encryptionMasterKey);
    return { arn: this.queue.queueArn, type: BucketNotificationDestinationType.QUEUE, dependencies };
  }
}

/** The object events that change what an index must hold. */
const EVENT_TYPES = [EventType.OBJECT_CREATED, EventType.OBJECT_REMOVED] as const;

/**
 * S3 notifications to the queue: one rule per event type and prefix (`p/`), or one unfiltered
 * rule per event type at the bucket root.
 *
 * `addEventNotification` goes through CDK's `Custom::S3BucketNotifications`. For an imported bucket
 * it runs with `Managed: false`: it reads the bucket's current configuration and adds ours to it,
 * and on delete removes only the rules this stack added, so other consumers keep theirs.
 */
export function deliverS3Notifications(bucket: IBucket, queue: IQueue, prefixes: readonly string[], account: string): void {
  const destination = new QueueDestination(queue, account);
  const filters: NotificationKeyFilter[][] = prefixes.length ? keyRoots(prefixes).map((prefix) => [{ prefix }]) : [[]];
  for (const filter of filters) {
    for (const type of EVENT_TYPES) bucket.addEventNotification(type, destination, ...filter);
  }
}

/**
 * S3 → EventBridge → the queue, for buckets whose notification configuration belongs to someone
 * else. A bucket this app creates gets EventBridge turned on here; an imported bucket is left as
 * it is, and its owner must turn EventBridge on (see the README). An event EventBridge cannot deliver
 * is retried, then kept in the dead-letter queue (whose alarm fires) rather than dropped.
 */
export class EventBridgeDelivery extends Construct {
  /** The rule that forwards the bucket's object events to the queue. */
  readonly rule: Rule;

  constructor(
    scope: Construct,
    id: string,
    bucket: IBucket,
    queues: { readonly queue: IQueue; readonly deadLetterQueue: IQueue },
    prefixes: readonly string[],
    account: string,
  ) {
    super(scope, id);
    if (bucket instanceof Bucket) {
      bucket.enableEventBridgeNotification();
    } else {
      // Nothing here can tell whether it is on; without it the queue stays silent.
      Annotations.of(this).addWarningV2(
        'datastore-indexer:eventBridgeOnImportedBucket',
        `Object events arrive only if bucket ${bucket.bucketName} sends events to EventBridge: turn it on in the S3 console (Properties, Amazon EventBridge) if it is off.`,
      );
    }
    this.rule = new Rule(this, 'Rule', {
      description: 'Datastore indexer: object events of the shared bucket to the indexer queue',
      eventPattern: {
        source: ['aws.s3'],
        detailType: ['Object Created', 'Object Deleted'],
        detail: {
          bucket: { name: [bucket.bucketName] },
          ...(prefixes.length ? { object: { key: keyRoots(prefixes).map((prefix) => ({ prefix })) } } : {}),
        },
      },
    });
    const rule = this.rule;
    rule.addTarget({
      bind: () => {
        // CDK's SqsQueue target checks the rule's ARN, or with a queue key the account alone: both here, on both queues.
        // A key policy naming this rule would close a cycle (rule → queue → key → rule): it names the account's rules.
        const anyRule = `arn:${Aws.PARTITION}:events:${Aws.REGION}:${account}:rule/*`;
        allowServiceToSend(queues.queue, 'events.amazonaws.com', rule.ruleArn, account, anyRule);
        allowServiceToSend(queues.deadLetterQueue, 'events.amazonaws.com', rule.ruleArn, account, anyRule);
        return {
          arn: queues.queue.queueArn,
          targetResource: queues.queue,
          deadLetterConfig: { arn: queues.deadLetterQueue.queueArn },
          retryPolicy: { maximumRetryAttempts: EVENT_RETRY_ATTEMPTS, maximumEventAgeInSeconds: EVENT_MAX_AGE.toSeconds() },
        };
      },
    });
  }
}
