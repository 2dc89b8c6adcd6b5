import { Duration } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { INDEX_TOO_LARGE_METRIC, METRICS_NAMESPACE, SERVICE_NAME } from '../lambda/env';

/** The longest delay SQS allows on a message: the Lambda's delayed re-checks wait at most this long. */
const MAX_SQS_DELAY = Duration.minutes(15);

const PERIOD = Duration.minutes(5);

export interface IndexerAlarmsProps {
  readonly function: IFunction;
  readonly queue: IQueue;
  readonly deadLetterQueue: IQueue;
  /** The queue's visibility timeout: how long a failed message stays hidden before its retry. */
  readonly visibilityTimeout: Duration;
  readonly topic?: ITopic;
}

/** The alarms that say the index may be drifting: dead letters, errors, a stuck queue, and an index too large to heal. */
export class IndexerAlarms extends Construct {
  /** Any message in the dead-letter queue: events the indexer gave up on, to be redriven. */
  readonly deadLetters: Alarm;
  /** The function failed a whole invocation (a crash or a timeout, not a single failed record). */
  readonly functionErrors: Alarm;
  /** A message waited longer than a delayed re-check plus one retry could explain. */
  readonly oldestMessageAge: Alarm;
  /** A heal stopped because a root's whole index would not fit in the function's memory: raise `memorySize`. */
  readonly indexTooLarge: Alarm;

  constructor(scope: Construct, id: string, props: IndexerAlarmsProps) {
    super(scope, id);

    this.deadLetters = new Alarm(this, 'DeadLetterQueueDepth', {
      alarmDescription: 'Datastore indexer: events reached the dead-letter queue; inspect them, then redrive.',
      metric: props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: PERIOD, statistic: 'Maximum' }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });

    this.functionErrors = new Alarm(this, 'FunctionErrors', {
      alarmDescription: 'Datastore indexer: the function failed an invocation.',
      metric: props.function.metricErrors({ period: PERIOD, statistic: 'Sum' }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });

    // A healthy message is consumed within its delay (at most 15 min) and one batching window; one
    // that failed once stays hidden for a visibility timeout. Older than both means it is stuck.
    const maxHealthyAge = props.visibilityTimeout.toSeconds() + MAX_SQS_DELAY.toSeconds();
    this.oldestMessageAge = new Alarm(this, 'OldestMessageAge', {
      alarmDescription: `Datastore indexer: a queued event has waited more than ${maxHealthyAge} s.`,
      metric: props.queue.metricApproximateAgeOfOldestMessage({ period: PERIOD, statistic: 'Maximum' }),
      threshold: maxHealthyAge,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });

    // The handler's own metric (Powertools adds the service dimension); the schedule repeats the failure hourly.
    this.indexTooLarge = new Alarm(this, 'IndexTooLarge', {
      alarmDescription:
        "Datastore indexer: a root's index is too large to heal in the function's memory; raise the DatastoreIndexer memorySize prop.",
      metric: new Metric({
        namespace: METRICS_NAMESPACE,
        metricName: INDEX_TOO_LARGE_METRIC,
        dimensionsMap: { service: SERVICE_NAME },
        period: PERIOD,
        statistic: 'Sum',
      }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });

    if (props.topic) {
      const action = new SnsAction(props.topic);
      for (const alarm of this.all) {
        alarm.addAlarmAction(action);
        alarm.addOkAction(action);
      }
    }
  }

  /** Every alarm, in a fixed order. */
  get all(): Alarm[] {
    return [this.deadLetters, this.functionErrors, this.oldestMessageAge, this.indexTooLarge];
  }
}
