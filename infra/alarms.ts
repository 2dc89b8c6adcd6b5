import { Duration } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, type IMetric, Metric, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IRule } from 'aws-cdk-lib/aws-events';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { FUNCTION_DIMENSION, INDEX_TOO_LARGE_METRIC, METRICS_NAMESPACE, ROOTS_FAILED_METRIC, SERVICE_NAME } from '../lambda/env';

/** The longest delay SQS allows on a message: the Lambda's delayed re-checks wait at most this long. */
const MAX_SQS_DELAY = Duration.minutes(15);

const PERIOD = Duration.minutes(5);

/** Properties of {@link IndexerAlarms}. */
export interface IndexerAlarmsProps {
  /** The indexer function whose errors, throttles and handler metrics are watched. */
  readonly function: IFunction;
  /** The queue of object events, whose oldest message is watched. */
  readonly queue: IQueue;
  /** The dead-letter queue: any message in it alarms. */
  readonly deadLetterQueue: IQueue;
  /** The queue's visibility timeout: how long a failed message stays hidden before its retry. */
  readonly visibilityTimeout: Duration;
  /** The rules whose failed deliveries (`FailedInvocations`) alarm, by construct id: the schedule, and EventBridge delivery when used. */
  readonly rules: Readonly<Record<string, IRule>>;
  /** The topic every alarm notifies, on alarm and on recovery. */
  readonly topic: ITopic;
}

/** One alarm that fires on a count of at least 1 in 5 minutes. */
function anyOf(scope: Construct, id: string, metric: IMetric, description: string): Alarm {
  return new Alarm(scope, id, {
    alarmDescription: `Datastore indexer: ${description}`,
    metric,
    threshold: 1,
    evaluationPeriods: 1,
    comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: TreatMissingData.NOT_BREACHING,
  });
}

/** The alarms that say the index may be drifting, each sent to the topic: every way the healing can fail reaches a person. */
export class IndexerAlarms extends Construct {
  /** Any message in the dead-letter queue: events the indexer gave up on, to be redriven (docs/RELIABILITY.md runbook). */
  readonly deadLetters: Alarm;
  /** The function failed a whole invocation (a crash or a timeout, not a single failed record). */
  readonly functionErrors: Alarm;
  /** Lambda refused to run the function: its reserved concurrency was used up. */
  readonly throttles: Alarm;
  /** A message waited longer than a delayed re-check plus one retry could explain. */
  readonly oldestMessageAge: Alarm;
  /** A heal stopped because a root's whole index would not fit in the function's memory: raise `memorySize`. */
  readonly indexTooLarge: Alarm;
  /** A scheduled or direct repair failed for a root (the invocation itself succeeds, so `Errors` stays 0). */
  readonly rootsFailed: Alarm;
  /** Lambda stopped a chain of the function's own messages as a recursive loop. */
  readonly recursiveInvocationsDropped: Alarm;
  /** EventBridge could not deliver to a target, per rule id (the schedule's repair; object events under EventBridge delivery). */
  readonly failedInvocations: Readonly<Record<string, Alarm>>;

  constructor(scope: Construct, id: string, props: IndexerAlarmsProps) {
    super(scope, id);
    const fn = props.function;
    // The handler's own metrics carry the service and the function's name (a per-stack dimension), see lambda/env.ts.
    const handlerMetric = (metricName: string): Metric =>
      new Metric({
        namespace: METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service: SERVICE_NAME, [FUNCTION_DIMENSION]: fn.functionName },
        period: PERIOD,
        statistic: 'Sum',
      });

    this.deadLetters = anyOf(
      this,
      'DeadLetterQueueDepth',
      props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: PERIOD, statistic: 'Maximum' }),
      'events reached the dead-letter queue; see "The DLQ alarm fired" in docs/RELIABILITY.md, then redrive.',
    );
    this.functionErrors = anyOf(
      this,
      'FunctionErrors',
      fn.metricErrors({ period: PERIOD, statistic: 'Sum' }),
      'the function failed an invocation.',
    );
    this.throttles = anyOf(
      this,
      'FunctionThrottles',
      fn.metricThrottles({ period: PERIOD, statistic: 'Sum' }),
      'Lambda throttled the function: its reserved concurrency was used up (direct invokes on top of the queue and the schedule).',
    );

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

    // The schedule repeats this failure hourly: retries cannot help, only more memory can.
    this.indexTooLarge = anyOf(
      this,
      'IndexTooLarge',
      handlerMetric(INDEX_TOO_LARGE_METRIC),
      "a root's index is too large to heal in the function's memory; raise the DatastoreIndexer memorySize prop.",
    );
    this.rootsFailed = anyOf(
      this,
      'RootsFailed',
      handlerMetric(ROOTS_FAILED_METRIC),
      'a scheduled or direct repair failed for a root; its log line "root failed" names the root and the error.',
    );
    this.recursiveInvocationsDropped = anyOf(
      this,
      'RecursiveInvocationsDropped',
      fn.metric('RecursiveInvocationsDropped', { period: PERIOD, statistic: 'Sum' }),
      "Lambda stopped a chain of the function's own queue messages as a recursive loop; the schedule repairs what it dropped.",
    );
    const failed: Record<string, Alarm> = {};
    for (const [ruleId, rule] of Object.entries(props.rules)) {
      failed[ruleId] = anyOf(
        this,
        `${ruleId}FailedInvocations`,
        new Metric({
          namespace: 'AWS/Events',
          metricName: 'FailedInvocations',
          dimensionsMap: { RuleName: rule.ruleName },
          period: PERIOD,
          statistic: 'Sum',
        }),
        `EventBridge could not deliver to the target of rule ${ruleId}.`,
      );
    }
    this.failedInvocations = failed;

    const action = new SnsAction(props.topic);
    for (const alarm of this.all) {
      alarm.addAlarmAction(action);
      alarm.addOkAction(action);
    }
  }

  /** Every alarm, in a fixed order. */
  get all(): Alarm[] {
    return [
      this.deadLetters,
      this.functionErrors,
      this.throttles,
      this.oldestMessageAge,
      this.indexTooLarge,
      this.rootsFailed,
      this.recursiveInvocationsDropped,
      ...Object.values(this.failedInvocations),
    ];
  }
}
