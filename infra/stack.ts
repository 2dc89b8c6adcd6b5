import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Schedule } from 'aws-cdk-lib/aws-events';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { DatastoreIndexer } from './datastore-indexer';
import type { EventDelivery } from './props';

/** Properties of a {@link DatastoreIndexerStack}: one shared bucket, imported by name. */
export interface DatastoreIndexerStackProps extends StackProps {
  /** Name of the existing shared bucket; the stack must be deployed in its account and its region. */
  readonly bucketName: string;

  /**
   * Datastore roots in the bucket; required unless `bucketRoot`.
   * @default - none: an error unless `bucketRoot` is true
   */
  readonly prefixes?: readonly string[];

  /**
   * Keep one datastore at the bucket root: see `DatastoreIndexerProps.bucketRoot`.
   * @default false
   */
  readonly bucketRoot?: boolean;

  /**
   * Namespaces the indexer keeps (`<prefix>/<namespace>`): see `DatastoreIndexerProps.namespaces`.
   * @default [] - no namespace is written
   */
  readonly namespaces?: readonly string[];

  /**
   * When the drift repair runs.
   * @default Schedule.rate(Duration.hours(1))
   */
  readonly schedule?: Schedule;

  /**
   * How object events arrive.
   * @default EventDelivery.S3_NOTIFICATIONS
   */
  readonly eventDelivery?: EventDelivery;

  /**
   * How many invocations the queue runs at once.
   * @default 2
   */
  readonly maxConcurrency?: number;

  /**
   * ARN of an existing SNS topic for the alarms.
   * @default - a topic the stack creates
   */
  readonly alarmTopicArn?: string;

  /**
   * E-mail address subscribed to the alarm topic.
   * @default - nobody (synth warns when the stack made the topic)
   */
  readonly alarmEmail?: string;

  /**
   * ARN of the bucket's SSE-KMS key.
   * @default - no KMS permission (SSE-S3 buckets)
   */
  readonly kmsKeyArn?: string;

  /**
   * The handler's entry file.
   * @default - `lambda/index.ts` of this project
   */
  readonly entry?: string;
}

/** The indexer next to one existing shared bucket: what `npx cdk deploy -c bucketName=…` creates. */
export class DatastoreIndexerStack extends Stack {
  /** The indexer this stack holds. */
  readonly indexer: DatastoreIndexer;

  constructor(scope: Construct, id: string, props: DatastoreIndexerStackProps) {
    super(scope, id, {
      description: `swamp datastore indexer for s3://${props.bucketName}`,
      ...props,
    });

    this.indexer = new DatastoreIndexer(this, 'Indexer', {
      bucket: Bucket.fromBucketName(this, 'SharedBucket', props.bucketName),
      prefixes: props.prefixes,
      bucketRoot: props.bucketRoot,
      namespaces: props.namespaces,
      schedule: props.schedule,
      eventDelivery: props.eventDelivery,
      maxConcurrency: props.maxConcurrency,
      alarmTopic: props.alarmTopicArn ? Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn) : undefined,
      alarmEmail: props.alarmEmail,
      encryptionKey: props.kmsKeyArn ? Key.fromKeyArn(this, 'BucketKey', props.kmsKeyArn) : undefined,
      entry: props.entry,
    });

    // What the README's verify and clean-up steps look up.
    new CfnOutput(this, 'FunctionName', { value: this.indexer.function.functionName });
    new CfnOutput(this, 'QueueUrl', { value: this.indexer.queue.queueUrl });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.indexer.deadLetterQueue.queueUrl });
    new CfnOutput(this, 'AlarmTopicArn', { value: this.indexer.alarmTopic.topicArn });
  }
}
