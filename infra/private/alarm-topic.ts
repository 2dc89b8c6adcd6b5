import { Annotations, Aws, Validations } from 'aws-cdk-lib';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { type ITopic, Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { DatastoreIndexerPropError } from '../errors';

/** Roughly an address: something, an `@`, a domain with a dot; SNS asks the address itself to confirm. */
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * The topic the alarms notify: the one given, or one made here that only CloudWatch alarms of this account may
 * publish to (TLS only). `email` is subscribed to it; a topic made here with nobody subscribed is a synth warning,
 * since an alarm nobody reads heals nothing.
 */
export function alarmTopicFor(scope: Construct, given: ITopic | undefined, email: string | undefined): ITopic {
  if (email !== undefined && !EMAIL.test(email)) {
    throw new DatastoreIndexerPropError('alarmEmail', `${JSON.stringify(email)} is not an e-mail address`);
  }
  let topic = given;
  if (!topic) {
    const made = new Topic(scope, 'AlarmTopic', { displayName: 'Datastore indexer alarms', enforceSSL: true });
    made.addToResourcePolicy(
      new PolicyStatement({
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [made.topicArn],
        conditions: {
          ArnLike: { 'aws:SourceArn': `arn:${Aws.PARTITION}:cloudwatch:${Aws.REGION}:${Aws.ACCOUNT_ID}:alarm:*` },
          StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID },
        },
      }),
    );
    Validations.of(made).acknowledge({
      id: 'AwsSolutions-SNS2',
      reason:
        "CloudWatch alarms cannot publish to a topic under the AWS-managed SNS key, and a key of the indexer's own would cost more " +
        'than the alarm text it protects (alarm names and states, no datastore content); the topic accepts TLS only.',
    });
    if (email === undefined) {
      Annotations.of(made).addWarningV2(
        'datastore-indexer:alarmsNotifyNobody',
        'Nobody is subscribed to the alarm topic, so no alarm reaches a person: pass alarmEmail (-c alarmEmail=ops@example.com), ' +
          'or subscribe to the topic after deploying (README, "Deploy").',
      );
    }
    topic = made;
  }
  if (email !== undefined) topic.addSubscription(new EmailSubscription(email));
  return topic;
}
