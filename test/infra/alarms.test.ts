import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EventDelivery } from '../../infra/props';
import { indexerStack, logicalIdOf } from './helpers';

/** The alarms of the default stack: dead letters, errors, throttles, queue age, index too large, roots failed, loops dropped, schedule deliveries. */
const ALARMS = 8;

const TOPIC_ARN = 'arn:aws:sns:eu-west-1:123456789012:ops';

describe('DatastoreIndexer alarms', () => {
  test('alarms on any message in the dead-letter queue', () => {
    // GIVEN / WHEN
    const { template } = indexerStack();
    const dlq = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue');
    // THEN
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [dlq, 'QueueName'] } }],
      Statistic: 'Maximum',
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
  });

  test('alarms on any function error', () => {
    const { template } = indexerStack();
    const fn = logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: fn } }],
      Statistic: 'Sum',
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
    });
  });

  test('alarms when the oldest queued event outlived a delayed re-check plus one retry', () => {
    const { template } = indexerStack();
    const queue = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue');
    // visibility timeout (6 x 300 s + 1 s) + the longest SQS delay (900 s)
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [queue, 'QueueName'] } }],
      Statistic: 'Maximum',
      Threshold: 1801 + 900,
    });
  });

  test("alarms when a heal stopped because a root's index is too large for the function's memory", () => {
    // GIVEN / WHEN
    const { template } = indexerStack();
    const fn = logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    // THEN: the handler's IndexTooLarge metric, in the namespace, under the service and the function (per stack) the construct gives it
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'DatastoreIndexer',
      MetricName: 'IndexTooLarge',
      Dimensions: [
        { Name: 'FunctionName', Value: { Ref: fn } },
        { Name: 'service', Value: 'datastore-indexer' },
      ],
      Statistic: 'Sum',
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
      AlarmDescription: Match.stringLikeRegexp('memorySize'),
    });
  });

  test('without a topic, the construct makes one that every alarm notifies, and synth warns that nobody is subscribed', () => {
    // GIVEN / WHEN
    const { stack, template, indexer } = indexerStack();
    const topic = logicalIdOf(template, 'AWS::SNS::Topic', 'IndexerAlarmTopic');
    // THEN
    expect(stack.resolve(indexer.alarmTopic.topicArn)).toEqual({ Ref: topic });
    template.resourceCountIs('AWS::CloudWatch::Alarm', ALARMS);
    for (const alarm of Object.values(template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topic }]);
      expect(alarm.Properties.OKActions).toEqual([{ Ref: topic }]);
    }
    Annotations.fromStack(stack).hasWarning('/Test/Indexer/AlarmTopic', Match.stringLikeRegexp('Nobody is subscribed to the alarm topic'));
  });

  test('alarmEmail subscribes an address to the topic, and the warning goes', () => {
    const { stack, template } = indexerStack({ alarmEmail: 'ops@example.com' });
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    Annotations.fromStack(stack).hasNoWarning('*', Match.stringLikeRegexp('Nobody is subscribed'));
    expect(() => indexerStack({ alarmEmail: 'ops' })).toThrow(/^Invalid alarmEmail: "ops" is not an e-mail address/);
  });

  test('each alarm notifies a given topic on alarm and on recovery', () => {
    // GIVEN
    const { template } = indexerStack((stack) => ({ alarmTopic: Topic.fromTopicArn(stack, 'Ops', TOPIC_ARN) }));
    // THEN
    template.resourceCountIs('AWS::SNS::Topic', 0);
    template.resourceCountIs('AWS::CloudWatch::Alarm', ALARMS);
    for (const metric of [
      'ApproximateNumberOfMessagesVisible',
      'Errors',
      'Throttles',
      'ApproximateAgeOfOldestMessage',
      'IndexTooLarge',
      'RootsFailed',
      'RecursiveInvocationsDropped',
      'FailedInvocations',
    ]) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: metric,
        AlarmActions: [TOPIC_ARN],
        OKActions: [TOPIC_ARN],
      });
    }
  });
});

describe('the alarms every failure of the healing reaches', () => {
  test('a scheduled or direct repair that failed for a root: RootsFailed of this function', () => {
    const { template } = indexerStack();
    const fn = logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'DatastoreIndexer',
      MetricName: 'RootsFailed',
      Dimensions: [
        { Name: 'FunctionName', Value: { Ref: fn } },
        { Name: 'service', Value: 'datastore-indexer' },
      ],
      Statistic: 'Sum',
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
  });

  test.each(['Throttles', 'RecursiveInvocationsDropped'])('the function’s %s', (metric) => {
    const { template } = indexerStack();
    const fn = logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: metric,
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: fn } }],
      Statistic: 'Sum',
      Threshold: 1,
    });
  });

  test('EventBridge FailedInvocations of the schedule, and of object events under EventBridge delivery', () => {
    const { template } = indexerStack({ eventDelivery: EventDelivery.EVENTBRIDGE });
    for (const rule of ['IndexerDriftRepairSchedule', 'IndexerObjectEventsRule']) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/Events',
        MetricName: 'FailedInvocations',
        Dimensions: [{ Name: 'RuleName', Value: { Ref: logicalIdOf(template, 'AWS::Events::Rule', rule) } }],
        Threshold: 1,
      });
    }
    template.resourceCountIs('AWS::CloudWatch::Alarm', ALARMS + 1);
  });
});
