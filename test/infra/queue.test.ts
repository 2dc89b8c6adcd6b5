import { Duration } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import { indexerStack, logicalIdOf, propsOf } from './helpers';

describe('DatastoreIndexer queues', () => {
  test('both queues are encrypted with SQS-managed keys and refuse plain HTTP', () => {
    // GIVEN / WHEN
    const { template } = indexerStack();
    // THEN
    for (const prefix of ['IndexerQueue', 'IndexerDeadLetterQueue']) {
      const id = logicalIdOf(template, 'AWS::SQS::Queue', prefix);
      expect(propsOf(template, 'AWS::SQS::Queue', prefix).SqsManagedSseEnabled).toBe(true);
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: id }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Action: 'sqs:*',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        },
      });
    }
  });

  test('sends a message to the dead-letter queue after 10 failed receives', () => {
    const { template } = indexerStack();
    const dlq = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue');
    expect(propsOf(template, 'AWS::SQS::Queue', 'IndexerQueue').RedrivePolicy).toEqual({
      deadLetterTargetArn: { 'Fn::GetAtt': [dlq, 'Arn'] },
      maxReceiveCount: 10,
    });
    expect(propsOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue').MessageRetentionPeriod).toBe(14 * 24 * 3600);
  });

  test('hides a received message for at least 6x the function timeout, plus the batching window', () => {
    // GIVEN
    const { template } = indexerStack({ timeout: Duration.minutes(2), batchingWindow: Duration.seconds(20) });
    // THEN
    const visibility = propsOf(template, 'AWS::SQS::Queue', 'IndexerQueue').VisibilityTimeout as number;
    const timeout = propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction').Timeout as number;
    expect(visibility).toBeGreaterThanOrEqual(6 * timeout);
    expect(visibility).toBe(6 * 120 + 20);
  });

  test('feeds the function in batches of up to 1000 gathered over 1 s, reporting item failures', () => {
    const { template } = indexerStack();
    const queue = logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue');
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [queue, 'Arn'] },
      BatchSize: 1000,
      MaximumBatchingWindowInSeconds: 1,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: 2 },
    });
  });

  test("the maximum concurrency follows the prop, and Lambda's bounds are enforced", () => {
    const { template } = indexerStack({ maxConcurrency: 5 });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { ScalingConfig: { MaximumConcurrency: 5 } });
    expect(() => indexerStack({ maxConcurrency: 1 })).toThrow(/Invalid maxConcurrency: must be a whole number from 2 to 1000, got 1/);
  });

  test('a failing event outlives a busy lock or a throttle: 10 receives, each hidden for 6x the timeout plus the window', () => {
    const { template } = indexerStack();
    const visibility = propsOf(template, 'AWS::SQS::Queue', 'IndexerQueue').VisibilityTimeout as number;
    const receives = (propsOf(template, 'AWS::SQS::Queue', 'IndexerQueue').RedrivePolicy as { maxReceiveCount: number }).maxReceiveCount;
    // Clients hold the lock for one push (a dead holder blocks for its 30 s TTL); hours are far beyond either.
    expect(visibility * receives).toBeGreaterThanOrEqual(4 * 3600);
  });

  test('the batching window follows the prop', () => {
    const { template } = indexerStack({ batchingWindow: Duration.seconds(90) });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { MaximumBatchingWindowInSeconds: 90 });
  });

  test('exposes the function, the queue and the dead-letter queue', () => {
    const { indexer, template } = indexerStack();
    const resolve = (x: string): unknown => indexer.function.stack.resolve(x);
    expect(resolve(indexer.queue.queueArn)).toEqual({ 'Fn::GetAtt': [logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue'), 'Arn'] });
    expect(resolve(indexer.deadLetterQueue.queueArn)).toEqual({
      'Fn::GetAtt': [logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerDeadLetterQueue'), 'Arn'],
    });
    expect(resolve(indexer.function.functionName)).toEqual({ Ref: logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction') });
  });
});
