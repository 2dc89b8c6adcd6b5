import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { RemovalPolicy, type Stack } from 'aws-cdk-lib';
import { Annotations, Match, type Template } from 'aws-cdk-lib/assertions';
import { Bucket, BucketEncryption } from 'aws-cdk-lib/aws-s3';
import { EventDelivery } from '../../infra/props';
import { indexerStack, logicalIdOf } from './helpers';

const newBucket = (stack: Stack): Bucket =>
  new Bucket(stack, 'Shared', { encryption: BucketEncryption.S3_MANAGED, removalPolicy: RemovalPolicy.RETAIN });

/** The queue configurations the notifications custom resource will merge into the bucket. */
function queueConfigurations(template: Template): { Events: string[]; Filter?: unknown; QueueArn: unknown }[] {
  const [notifications] = Object.values(template.findResources('Custom::S3BucketNotifications'));
  return notifications.Properties.NotificationConfiguration.QueueConfigurations;
}

const prefixFilter = (prefix: string): unknown => ({ Key: { FilterRules: [{ Name: 'prefix', Value: prefix }] } });

describe('S3 notifications (the default)', () => {
  test('an imported bucket gets created/removed rules per prefix, merged into its existing ones', () => {
    // GIVEN / WHEN
    const { template } = indexerStack({ prefixes: ['swamp', 'infra'] });
    const queueArn = { 'Fn::GetAtt': [logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue'), 'Arn'] };
    // THEN: Managed false is the custom resource's merge mode (keeps notifications it did not add)
    template.resourceCountIs('Custom::S3BucketNotifications', 1);
    template.hasResourceProperties('Custom::S3BucketNotifications', { BucketName: 'shared-bucket', Managed: false });
    expect(queueConfigurations(template)).toEqual([
      { Events: ['s3:ObjectCreated:*'], Filter: prefixFilter('swamp/'), QueueArn: queueArn },
      { Events: ['s3:ObjectRemoved:*'], Filter: prefixFilter('swamp/'), QueueArn: queueArn },
      { Events: ['s3:ObjectCreated:*'], Filter: prefixFilter('infra/'), QueueArn: queueArn },
      { Events: ['s3:ObjectRemoved:*'], Filter: prefixFilter('infra/'), QueueArn: queueArn },
    ]);
    template.resourceCountIs('AWS::Events::Rule', 1); // only the schedule
  });

  test('a bucket the app creates gets the same rules, managed by the stack', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] }, newBucket);
    const bucket = logicalIdOf(template, 'AWS::S3::Bucket', 'Shared');
    template.hasResourceProperties('Custom::S3BucketNotifications', { BucketName: { Ref: bucket }, Managed: true });
    expect(queueConfigurations(template).map((c) => [c.Events, c.Filter])).toEqual([
      [['s3:ObjectCreated:*'], prefixFilter('swamp/')],
      [['s3:ObjectRemoved:*'], prefixFilter('swamp/')],
    ]);
  });

  test('the bucket root gets one unfiltered rule per event type', () => {
    const { template } = indexerStack();
    const configs = queueConfigurations(template);
    expect(configs.map((c) => c.Events)).toEqual([['s3:ObjectCreated:*'], ['s3:ObjectRemoved:*']]);
    expect(configs.every((c) => c.Filter === undefined)).toBe(true);
  });

  test('S3 may send to the queue, only on behalf of this bucket of this account', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: 's3.amazonaws.com' },
            Action: 'sqs:SendMessage',
            Condition: {
              ArnLike: { 'aws:SourceArn': { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::shared-bucket']] } },
              StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
            },
          }),
        ]),
      },
    });
  });
});

describe('EventBridge delivery', () => {
  test('a rule forwards created/deleted objects under each prefix of this bucket to the queue', () => {
    // GIVEN / WHEN
    const { template } = indexerStack({ prefixes: ['swamp', 'infra'], eventDelivery: EventDelivery.EVENTBRIDGE });
    const queue = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue');
    const rule = logicalIdOf(template, 'AWS::Events::Rule', 'IndexerObjectEvents');
    // THEN
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: Match.exact({
        source: ['aws.s3'],
        'detail-type': ['Object Created', 'Object Deleted'],
        detail: { bucket: { name: ['shared-bucket'] }, object: { key: [{ prefix: 'swamp/' }, { prefix: 'infra/' }] } },
      }),
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [queue, 'Arn'] } })],
    });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: 'events.amazonaws.com' },
            Condition: {
              ArnLike: { 'aws:SourceArn': { 'Fn::GetAtt': [rule, 'Arn'] } },
              StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
            },
          }),
        ]),
      },
    });
  });

  test('an imported bucket is not touched (no notification resource), with a warning to turn EventBridge on', () => {
    const { stack, template } = indexerStack({ prefixes: ['swamp'], eventDelivery: EventDelivery.EVENTBRIDGE });
    template.resourceCountIs('Custom::S3BucketNotifications', 0);
    Annotations.fromStack(stack).hasWarning(
      '/Test/Indexer/ObjectEvents',
      Match.stringLikeRegexp('bucket shared-bucket sends events to EventBridge'),
    );
  });

  test('a bucket the app creates raises no such warning', () => {
    const { stack } = indexerStack({ eventDelivery: EventDelivery.EVENTBRIDGE, alarmEmail: 'ops@example.com' }, newBucket);
    Annotations.fromStack(stack).hasNoWarning('*', Match.stringLikeRegexp('EventBridge'));
  });

  test('a bucket the app creates gets EventBridge turned on', () => {
    const { template } = indexerStack({ prefixes: ['swamp'], eventDelivery: EventDelivery.EVENTBRIDGE }, newBucket);
    template.hasResourceProperties('Custom::S3BucketNotifications', {
      NotificationConfiguration: Match.exact({ EventBridgeConfiguration: {} }),
    });
  });

  test('the bucket root matches every key of the bucket', () => {
    const { template } = indexerStack({ eventDelivery: EventDelivery.EVENTBRIDGE });
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: { detail: Match.exact({ bucket: { name: ['shared-bucket'] } }) },
    });
  });
});

describe("CDK's notifications handler, which the merge relies on", () => {
  test('in unmanaged mode reads the bucket configuration and keeps rules it did not add', () => {
    // GIVEN: the handler source this aws-cdk-lib ships (an upgrade that changed it must be re-checked)
    const cdkLib = path.dirname(require.resolve('aws-cdk-lib/package.json'));
    const source = readFileSync(path.join(cdkLib, 'custom-resource-handlers/dist/aws-s3/notifications-resource-handler/index.py'), 'utf8');
    // THEN
    expect(source).toMatch(/if managed:\s*\n\s*config = handle_managed/);
    expect(source).toMatch(
      /def handle_unmanaged[\s\S]*existing_notifications = s3\.get_bucket_notification_configuration\(Bucket=bucket\)/,
    );
    expect(source).toMatch(/notifications\[t\] = external \+ incoming/);
  });
});
