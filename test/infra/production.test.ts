/**
 * Ready for a production account: the synthesised template of each delivery (S3 notifications, EventBridge, a KMS
 * queue) alarms to a person, lets services act only for this account, pins the bucket owner and keeps what an
 * operator needs after a `cdk destroy`.
 */
import { Stack } from 'aws-cdk-lib';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { DatastoreIndexer } from '../../infra/datastore-indexer';
import type { DatastoreIndexerProps } from '../../infra/props';
import { EventDelivery } from '../../infra/props';
import { STUB_ENTRY, indexerStack, logicalIdOf, propsOf, unbundledApp } from './helpers';

type Statement = { Principal?: { Service?: string | string[] }; Condition?: Record<string, Record<string, unknown>> };

const DELIVERIES: [string, (stack: Stack) => Partial<DatastoreIndexerProps>][] = [
  ['S3 delivery', () => ({ prefixes: ['swamp'] })],
  ['EventBridge delivery', () => ({ prefixes: ['swamp'], eventDelivery: EventDelivery.EVENTBRIDGE })],
  [
    'a KMS queue',
    (stack) => ({
      prefixes: ['swamp'],
      queueProps: { encryption: QueueEncryption.KMS, encryptionMasterKey: new Key(stack, 'QueueKey', { enableKeyRotation: true }) },
    }),
  ],
  [
    'a KMS queue under EventBridge delivery',
    (stack) => ({
      prefixes: ['swamp'],
      eventDelivery: EventDelivery.EVENTBRIDGE,
      queueProps: { encryption: QueueEncryption.KMS, encryptionMasterKey: new Key(stack, 'QueueKey', { enableKeyRotation: true }) },
    }),
  ],
];

/** Every statement of every resource policy in the template: queues, keys, topics. */
function resourcePolicyStatements(template: Template): { where: string; statement: Statement }[] {
  const found: { where: string; statement: Statement }[] = [];
  const documents: [string, string][] = [
    ['AWS::SQS::QueuePolicy', 'PolicyDocument'],
    ['AWS::SNS::TopicPolicy', 'PolicyDocument'],
    ['AWS::KMS::Key', 'KeyPolicy'],
  ];
  for (const [type, field] of documents) {
    for (const [id, resource] of Object.entries(template.findResources(type))) {
      for (const statement of (resource.Properties[field] as { Statement: Statement[] }).Statement) found.push({ where: id, statement });
    }
  }
  return found;
}

describe.each(DELIVERIES)('a production stack with %s', (_name, props) => {
  const { template } = indexerStack(props);

  test('every alarm notifies someone, on alarm and on recovery', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms.length).toBeGreaterThanOrEqual(8);
    for (const alarm of alarms) {
      expect(alarm.Properties.AlarmActions).toHaveLength(1);
      expect(alarm.Properties.OKActions).toHaveLength(1);
    }
  });

  test('every service-principal statement holds aws:SourceAccount (and aws:SourceArn)', () => {
    const services = resourcePolicyStatements(template).filter(({ statement }) => statement.Principal?.Service !== undefined);
    expect(services.length).toBeGreaterThan(0);
    for (const { where, statement } of services) {
      expect({ where, condition: statement.Condition }).toEqual({
        where,
        condition: {
          ArnLike: { 'aws:SourceArn': expect.anything() },
          StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
        },
      });
    }
  });

  test('every S3 statement of the role holds s3:ResourceAccount', () => {
    const document = propsOf(template, 'AWS::IAM::Policy', 'IndexerDatastoreAccess').PolicyDocument as { Statement: Statement[] };
    for (const statement of document.Statement) {
      expect(statement.Condition?.StringEquals).toEqual({ 's3:ResourceAccount': { Ref: 'AWS::AccountId' } });
    }
  });

  test('the log group and the dead-letter queue outlive the stack', () => {
    const dlq = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue');
    const logs = logicalIdOf(template, 'AWS::Logs::LogGroup', 'IndexerLogGroup');
    for (const [type, id] of [
      ['AWS::SQS::Queue', dlq],
      ['AWS::Logs::LogGroup', logs],
    ]) {
      expect(template.findResources(type)[id]).toMatchObject({ DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
    }
  });

  test('the dead-letter queue takes redrives from the event queue alone', () => {
    const queue = propsOf(template, 'AWS::SQS::Queue', 'IndexerQueue') as { QueueName: string };
    expect(propsOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue').RedriveAllowPolicy).toEqual({
      redrivePermission: 'byQueue',
      sourceQueueArns: [
        {
          'Fn::Join': [
            '',
            ['arn:', { Ref: 'AWS::Partition' }, ':sqs:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, `:${queue.QueueName}`],
          ],
        },
      ],
    });
  });

  test('reserves concurrency above the queue runs', () => {
    expect(propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction').ReservedConcurrentExecutions).toBe(4);
  });
});

describe('EventBridge delivery', () => {
  test("the rule's target keeps what it cannot deliver in the dead-letter queue, after retries", () => {
    const { template } = indexerStack({ prefixes: ['swamp'], eventDelivery: EventDelivery.EVENTBRIDGE });
    const queue = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue');
    const dlq = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue');
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: Match.objectLike({ source: ['aws.s3'] }),
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [queue, 'Arn'] },
          DeadLetterConfig: { Arn: { 'Fn::GetAtt': [dlq, 'Arn'] } },
          RetryPolicy: { MaximumRetryAttempts: 20, MaximumEventAgeInSeconds: 7200 },
        }),
      ],
    });
  });
});

describe('the bucket owner', () => {
  test('tags from props reach the resources', () => {
    const { template } = indexerStack({ prefixes: ['swamp'], tags: { team: 'platform' } });
    template.hasResourceProperties('AWS::SQS::Queue', { Tags: Match.arrayWith([{ Key: 'team', Value: 'platform' }]) });
    template.hasResourceProperties('AWS::Lambda::Function', { Tags: Match.arrayWith([{ Key: 'team', Value: 'platform' }]) });
  });

  test('a bucket of another account is refused at synth, naming the prop', () => {
    const stack = new Stack(unbundledApp(), 'Elsewhere', { env: { account: '111111111111', region: 'eu-west-1' } });
    const bucket = Bucket.fromBucketAttributes(stack, 'Theirs', { bucketName: 'theirs', account: '222222222222' });
    expect(() => new DatastoreIndexer(stack, 'Indexer', { bucket, prefixes: ['swamp'], entry: STUB_ENTRY })).toThrow(
      /^Invalid bucket: belongs to account 222222222222, but the stack deploys to 111111111111/,
    );
  });

  test('a bucket account known only to the app is checked by a CloudFormation rule, and is the expected owner', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] }, (stack) =>
      Bucket.fromBucketAttributes(stack, 'Shared', { bucketName: 'shared-bucket', account: '222222222222' }),
    );
    const rules = (template.toJSON() as { Rules?: Record<string, { Assertions: unknown[] }> }).Rules ?? {};
    expect(Object.values(rules)).toContainEqual({
      Assertions: [{ Assert: { 'Fn::Equals': [{ Ref: 'AWS::AccountId' }, '222222222222'] }, AssertDescription: expect.any(String) }],
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ DATASTORE_BUCKET_OWNER: '222222222222' }) },
    });
  });
});
