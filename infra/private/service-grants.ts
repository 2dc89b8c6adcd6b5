import { Annotations } from 'aws-cdk-lib';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';

/**
 * Lets an AWS service (S3, EventBridge) send to `queue` on behalf of one source of one account: `aws:SourceArn`
 * and `aws:SourceAccount` on the queue policy and, for a KMS queue, on the key policy too, so that no other
 * account's bucket or rule can use the service as a confused deputy. `keySourceArn` is the ARN (pattern) the key
 * policy names, when naming the source itself there would close a reference cycle (a rule targeting the queue).
 */
export function allowServiceToSend(queue: IQueue, service: string, sourceArn: string, account: string, keySourceArn = sourceArn): void {
  const principal = new ServicePrincipal(service);
  const sameAccount = { StringEquals: { 'aws:SourceAccount': account } };
  queue.addToResourcePolicy(
    new PolicyStatement({
      principals: [principal],
      actions: ['sqs:SendMessage'],
      resources: [queue.queueArn],
      conditions: { ArnLike: { 'aws:SourceArn': sourceArn }, ...sameAccount },
    }),
  );
  const key = queue.encryptionMasterKey;
  if (!key) return;
  const statement = new PolicyStatement({
    principals: [principal],
    actions: ['kms:GenerateDataKey*', 'kms:Decrypt'],
    resources: ['*'],
    conditions: { ArnLike: { 'aws:SourceArn': keySourceArn }, ...sameAccount },
  });
  if (!key.addToResourcePolicy(statement, true).statementAdded) {
    Annotations.of(queue).addWarningV2(
      'datastore-indexer:queueKeyPolicy',
      `The queue's key is imported, so its policy cannot be changed here: let ${service} use it with ${JSON.stringify(statement.toStatementJson())}`,
    );
  }
}
