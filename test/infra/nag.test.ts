import { type Stack, Validations } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { EventDelivery } from '../../infra/props';
import { appStack, indexerStack } from './helpers';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const TOPIC_ARN = 'arn:aws:sns:eu-west-1:123456789012:ops';

/** AwsSolutions findings left after the acknowledgments, as `rule at path` lines. */
function findings(stack: Stack): string[] {
  const report = new AwsSolutionsChecks().validateScope(stack);
  return report.violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
}

describe('cdk-nag AwsSolutions', () => {
  test.each([
    ['the default stack', {}],
    ['the bucket root', { prefixes: [] }],
    ['EventBridge delivery', { eventDelivery: EventDelivery.EVENTBRIDGE }],
    ['a KMS bucket key and an alarm topic', { kmsKeyArn: KEY_ARN, alarmTopicArn: TOPIC_ARN }],
  ])('reports nothing unacknowledged for %s', (_name, props) => {
    // GIVEN
    const { stack } = appStack(props);
    // WHEN / THEN
    expect(findings(stack)).toEqual([]);
  });

  test("acknowledges only the wildcard object ARNs of each prefix and CDK's handler policy, each with a reason", () => {
    // GIVEN
    const { stack } = appStack({ prefixes: ['swamp', 'infra'] });
    // WHEN
    const acks = stack.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
      .flatMap((m) => Object.entries(m.data as Record<string, string>))
      .map(([id, reason]) => [id.replace(/^annotation::/i, ''), reason] as const);
    // THEN
    const bucket = 'arn:<AWS::Partition>:s3:::shared-bucket';
    const wildcards = ['swamp', 'infra'].flatMap((p) => [`${p}/*`, `${p}/_index/*.json`, `${p}/_control/datastore-indexer/*`]);
    expect(acks.map(([id]) => id).sort()).toEqual(
      [
        ...wildcards.map((w) => `AwsSolutions-IAM5[Resource::${bucket}/${w}]`),
        'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        // The alarm topic the stack makes: CloudWatch alarms cannot publish under the AWS-managed SNS key.
        'AwsSolutions-SNS2',
      ].sort(),
    );
    expect(acks.filter(([, reason]) => reason.trim().length < 40)).toEqual([]);
  });

  test('still reports a wildcard nobody acknowledged (the check is live)', () => {
    // GIVEN: one extra wildcard object grant on the indexer's role
    const { stack, indexer } = indexerStack({ prefixes: ['swamp'] });
    indexer.function.addToRolePolicy(new PolicyStatement({ actions: ['s3:GetObject'], resources: ['arn:aws:s3:::other-bucket/*'] }));
    // THEN
    expect(findings(stack)).toEqual([expect.stringMatching(/^AwsSolutions-IAM5\[Resource::arn:aws:s3:::other-bucket\/\*\] at /)]);
  });
});
