import { Match } from 'aws-cdk-lib/assertions';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { indexerStack, logicalIdOf } from './helpers';

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
    // THEN: the handler's IndexTooLarge metric, in the namespace and under the service the construct gives it
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'DatastoreIndexer',
      MetricName: 'IndexTooLarge',
      Dimensions: [{ Name: 'service', Value: 'datastore-indexer' }],
      Statistic: 'Sum',
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
      AlarmDescription: Match.stringLikeRegexp('memorySize'),
    });
  });

  test('has no actions without a topic', () => {
    const { template } = indexerStack();
    template.resourceCountIs('AWS::CloudWatch::Alarm', 4);
    for (const alarm of Object.values(template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toBeUndefined();
      expect(alarm.Properties.OKActions).toBeUndefined();
    }
  });

  test('each alarm notifies the topic on alarm and on recovery', () => {
    // GIVEN
    const { template } = indexerStack((stack) => ({ alarmTopic: Topic.fromTopicArn(stack, 'Ops', TOPIC_ARN) }));
    // THEN
    template.resourceCountIs('AWS::CloudWatch::Alarm', 4);
    for (const metric of ['ApproximateNumberOfMessagesVisible', 'Errors', 'ApproximateAgeOfOldestMessage', 'IndexTooLarge']) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: metric,
        AlarmActions: [TOPIC_ARN],
        OKActions: [TOPIC_ARN],
      });
    }
  });
});
