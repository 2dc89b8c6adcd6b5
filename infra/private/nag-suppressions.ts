import { Stack, Validations } from 'aws-cdk-lib';
import type { Policy } from 'aws-cdk-lib/aws-iam';
import type { IConstruct } from 'constructs';
import { s3AccessStatements } from './s3-access';

/**
 * The construct id CDK gives its stack-wide bucket-notifications handler (a singleton per stack,
 * created by `addEventNotification`).
 */
const NOTIFICATIONS_HANDLER_ID = 'BucketNotificationsHandler050a0587b7544547bf325f094a3db834';

/**
 * Renders a resolved CloudFormation value the way cdk-nag names it in a finding
 * (`Fn::Join` joined, `Ref` as `<Id>`, `Fn::GetAtt` as `<Id.Attr>`), so that an acknowledgment
 * names one exact resource instead of a whole rule.
 */
function flatten(value: unknown): string {
  if (typeof value === 'string') return value.replace(/\$\{/g, '<').replace(/\}/g, '>');
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    if (Array.isArray(o['Fn::Join'])) {
      const [delimiter, items] = o['Fn::Join'] as [string, unknown[]];
      return items.map(flatten).join(delimiter);
    }
    if (Array.isArray(o['Fn::GetAtt'])) {
      const [id, attr] = o['Fn::GetAtt'] as [unknown, unknown];
      return `<${flatten(id)}.${flatten(attr)}>`;
    }
    if ('Ref' in o) return `<${flatten(o.Ref)}>`;
  }
  return JSON.stringify(value);
}

/**
 * Acknowledges, one by one, the wildcard object ARNs of the datastore policy. Each names keys
 * under one datastore root only; any other wildcard added later would still be reported.
 */
export function suppressIndexerFindings(
  policy: Policy,
  bucketArn: string,
  prefixes: readonly string[],
  namespaces: readonly string[] = [],
): void {
  const stack = Stack.of(policy);
  const reason =
    'Object ARNs end in a wildcard because index partitions and control keys are not known in advance; ' +
    'reads are confined to one configured datastore root of one bucket, writes to its internal folders (see infra/private/s3-access.ts).';
  const resources = s3AccessStatements(bucketArn, prefixes, namespaces).flatMap((s) => s.resources);
  const flats = new Set(resources.map((resource) => flatten(stack.resolve(resource))));
  for (const flat of flats) {
    if (flat.includes('*')) Validations.of(policy).acknowledge({ id: `AwsSolutions-IAM5[Resource::${flat}]`, reason });
  }
}

/**
 * Acknowledges the managed policy CDK attaches to its own bucket-notifications handler: CDK adds
 * AWSLambdaBasicExecutionRole to that role unconditionally and offers no way to replace it. The
 * handler runs only during deployments, to merge our rules into the bucket's notifications.
 */
export function suppressNotificationsHandlerFindings(scope: IConstruct): void {
  const handler = Stack.of(scope).node.tryFindChild(NOTIFICATIONS_HANDLER_ID);
  if (!handler) return;
  Validations.of(handler).acknowledge({
    id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    reason:
      "CDK's bucket-notifications custom resource handler always gets AWSLambdaBasicExecutionRole (log writes only); " +
      'it runs only at deploy time and CDK offers no way to replace that policy.',
  });
}
