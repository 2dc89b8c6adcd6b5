import { Duration } from 'aws-cdk-lib';
import { Schedule } from 'aws-cdk-lib/aws-events';
import { indexerStack, logicalIdOf } from './helpers';

describe('DatastoreIndexer drift-repair schedule', () => {
  test('runs the function every hour by default', () => {
    // GIVEN / WHEN
    const { template } = indexerStack();
    const fn = logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    // THEN
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 hour)',
      State: 'ENABLED',
      Targets: [
        { Arn: { 'Fn::GetAtt': [fn, 'Arn'] }, Id: 'Target0', RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 3600 } },
      ],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'events.amazonaws.com',
      FunctionName: { 'Fn::GetAtt': [fn, 'Arn'] },
    });
  });

  test('follows the schedule prop', () => {
    const { template } = indexerStack({ schedule: Schedule.rate(Duration.minutes(15)) });
    template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(15 minutes)' });
    expect(JSON.stringify(template.findResources('AWS::Events::Rule'))).not.toContain('rate(1 hour)');
  });
});
