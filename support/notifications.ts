/** S3 notifications into SQS, as moto delivers them: the wiring the Lambda tests, the chaos suite and the demo share. */
import { PutBucketNotificationConfigurationCommand, type S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';

/** A queue: its URL, and its ARN (what an SQS record names as its event source). */
export interface Queue {
  readonly url: string;
  readonly arn: string;
}

/** Creates the queue `queueName` and has `bucket` send it every ObjectCreated/ObjectRemoved event. */
export async function notifyQueue(s3: S3Client, sqs: SQSClient, bucket: string, queueName: string): Promise<Queue> {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: queueName }));
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }));
  await s3.send(
    new PutBucketNotificationConfigurationCommand({
      Bucket: bucket,
      NotificationConfiguration: {
        QueueConfigurations: [{ QueueArn: Attributes!.QueueArn!, Events: ['s3:ObjectCreated:*', 's3:ObjectRemoved:*'] }],
      },
    }),
  );
  return { url: QueueUrl!, arn: Attributes!.QueueArn! };
}
