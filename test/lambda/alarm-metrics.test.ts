/**
 * A failed scheduled repair reaches a person: the bundled handler, run against moto, counts `RootsFailed` for a
 * root it could not heal (the invocation itself succeeds), and the stack's alarm watches exactly that metric:
 * the same namespace, name and dimensions, the function's name among them.
 */
import { indexerStack, logicalIdOf } from '../infra/helpers';
import { type LogLine, handlerEnv, invoke, loadHandler, scheduledEvent } from '../helpers/lambda';
import { uniqueBucketName } from '../helpers/s3';

/** The name Lambda gives the function at run time, and the stack gives it in the template. */
const FUNCTION_NAME = 'datastore-indexer-prod';

interface EmfLine extends LogLine {
  readonly _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
}

describe('a scheduled repair whose root fails', () => {
  test('emits RootsFailed, under the namespace, name and dimensions the RootsFailed alarm watches', async () => {
    // GIVEN a handler whose bucket does not exist, so every root's repair fails
    const lambda = loadHandler(handlerEnv({ bucket: uniqueBucketName('gone'), prefixes: 'swamp,infra', functionName: FUNCTION_NAME }));
    // WHEN the schedule runs
    const run = await invoke<{ roots: { root: string; status: string }[] }>(lambda, scheduledEvent());
    // THEN the invocation succeeds (so Errors stays 0), each root failed, and RootsFailed counts them
    expect(run.result.roots.map((r) => r.status)).toEqual(['failed', 'failed']);
    expect(run.metric('RootsFailed').reduce((a, b) => a + b, 0)).toBe(2);
    const emitted = run.lines.filter((l): l is EmfLine => l._aws !== undefined && 'RootsFailed' in l);
    const blob = emitted[0]._aws.CloudWatchMetrics[0];

    // AND the stack's RootsFailed alarm watches that very metric
    const { template } = indexerStack({ prefixes: ['swamp', 'infra'], functionProps: { functionName: FUNCTION_NAME } });
    const fn = logicalIdOf(template, 'AWS::Lambda::Function', 'IndexerFunction');
    expect(template.findResources('AWS::Lambda::Function')[fn].Properties.FunctionName).toBe(FUNCTION_NAME);
    const [alarm] = Object.values(template.findResources('AWS::CloudWatch::Alarm', { Properties: { MetricName: 'RootsFailed' } }));
    const dimensions = alarm.Properties.Dimensions as { Name: string; Value: unknown }[];
    expect(alarm.Properties.Namespace).toBe(blob.Namespace);
    expect(blob.Metrics.map((m) => m.Name)).toContain(alarm.Properties.MetricName);
    expect(dimensions.map((d) => d.Name).sort()).toEqual([...blob.Dimensions[0]].sort());
    // Each dimension's value: the service as written, the function's name through its Ref.
    const emittedValues = Object.fromEntries(blob.Dimensions[0].map((name) => [name, emitted[0][name]]));
    const alarmValues = Object.fromEntries(
      dimensions.map((d) => [d.Name, JSON.stringify(d.Value) === JSON.stringify({ Ref: fn }) ? FUNCTION_NAME : d.Value]),
    );
    expect(alarmValues).toEqual(emittedValues);
    expect(alarm.Properties.AlarmActions).toHaveLength(1);
  });
});
