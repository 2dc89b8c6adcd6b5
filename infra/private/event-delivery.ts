import { Annotations } from 'aws-cdk-lib';
import { Rule } from 'aws-cdk-lib/aws-events';
import { SqsQueue } from 'aws-cdk-lib/aws-events-targets';
import { Bucket, EventType, type IBucket, type NotificationKeyFilter } from 'aws-cdk-lib/aws-s3';
import { SqsDestination } from 'aws-cdk-lib/aws-s3-notifications';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { keyRoots } from './s3-access';

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
export function deliverS3Notifications(bucket: IBucket, queue: IQueue, prefixes: readonly string[]): void {
  const destination = new SqsDestination(queue);
  const filters: NotificationKeyFilter[][] = prefixes.length ? keyRoots(prefixes).map((prefix) => [{ prefix }]) : [[]];
  for (const filter of filters) {
    for (const type of EVENT_TYPES) bucket.addEventNotification(type, destination, ...filter);
  }
}

/**
 * S3 → EventBridge → the queue, for buckets whose notification configuration belongs to someone
 * else. A bucket this app creates gets EventBridge turned on here; an imported bucket is left as
 * it is, and its owner must turn EventBridge on (see the README).
 */
export class EventBridgeDelivery extends Construct {
  /** The rule that forwards the bucket's object events to the queue. */
  readonly rule: Rule;

  constructor(scope: Construct, id: string, bucket: IBucket, queue: IQueue, prefixes: readonly string[]) {
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
      targets: [new SqsQueue(queue)],
    });
  }
}
