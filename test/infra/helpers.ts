import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { Bucket, type IBucket } from 'aws-cdk-lib/aws-s3';
import { DatastoreIndexer } from '../../infra/datastore-indexer';
import type { DatastoreIndexerProps } from '../../infra/props';
import { DatastoreIndexerStack, type DatastoreIndexerStackProps } from '../../infra/stack';

/** Stand-in handler: unit tests check the template, not the bundle (the synth test does that). */
export const STUB_ENTRY = path.join(__dirname, 'fixtures', 'handler.ts');

export const BUCKET_NAME = 'shared-bucket';

const outdirs: string[] = [];
if (typeof afterAll === 'function')
  afterAll(() => {
    for (const dir of outdirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

/**
 * An app whose stacks skip asset bundling: the same switch `cdk deploy --exclusively` uses, so the
 * function keeps its real NodejsFunction props while no esbuild runs. Its cloud assembly goes to a
 * temporary folder removed after the test file (an App without `outdir` leaves a `cdk.out*` folder per synth).
 */
export function unbundledApp(context: Record<string, unknown> = {}): App {
  const outdir = mkdtempSync(path.join(tmpdir(), 'indexer-cdk-test-'));
  outdirs.push(outdir);
  return new App({ outdir, context: { 'aws:cdk:bundling-stacks': [], ...context } });
}

/**
 * A stack holding one DatastoreIndexer over an imported bucket (or the bucket `makeBucket` builds);
 * `props` may be a function of the stack, for props that are constructs themselves.
 */
export function indexerStack(
  props: Partial<DatastoreIndexerProps> | ((stack: Stack) => Partial<DatastoreIndexerProps>) = {},
  makeBucket: (stack: Stack) => IBucket = (stack) => Bucket.fromBucketName(stack, 'Shared', BUCKET_NAME),
): { stack: Stack; indexer: DatastoreIndexer; template: Template } {
  const stack = new Stack(unbundledApp(), 'Test');
  const extra = typeof props === 'function' ? props(stack) : props;
  // Without prefixes a test means the bucket root, which takes the explicit choice.
  const root = extra.prefixes?.length ? {} : { bucketRoot: true };
  const indexer = new DatastoreIndexer(stack, 'Indexer', { bucket: makeBucket(stack), entry: STUB_ENTRY, ...root, ...extra });
  return { stack, indexer, template: Template.fromStack(stack) };
}

/** The app's stack for one bucket, unbundled. */
export function appStack(props: Partial<DatastoreIndexerStackProps> = {}): { stack: DatastoreIndexerStack; template: Template } {
  const stack = new DatastoreIndexerStack(unbundledApp(), 'DatastoreIndexer-test', {
    bucketName: BUCKET_NAME,
    prefixes: ['swamp', 'infra'],
    entry: STUB_ENTRY,
    ...(props.prefixes && !props.prefixes.length ? { bucketRoot: true } : {}),
    ...props,
  });
  return { stack, template: Template.fromStack(stack) };
}

/** `arn:${Partition}:s3:::<bucket><suffix>` as an imported bucket renders it. */
export function importedArn(suffix = ''): unknown {
  return { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:s3:::${BUCKET_NAME}${suffix}`]] };
}

/** The one resource of a type, failing when there is not exactly one. */
export function only(template: Template, type: string): { logicalId: string; Properties: Record<string, unknown> } {
  const found = template.findResources(type);
  const ids = Object.keys(found);
  if (ids.length !== 1) throw new Error(`expected one ${type}, found ${ids.length}`);
  return { logicalId: ids[0], Properties: found[ids[0]].Properties as Record<string, unknown> };
}

/** Properties of the one resource of `type` whose logical id starts with `prefix`. */
export function propsOf(template: Template, type: string, prefix: string): Record<string, unknown> {
  return template.findResources(type)[logicalIdOf(template, type, prefix)].Properties as Record<string, unknown>;
}

/** Logical id of the resource of `type` whose id starts with `prefix`. */
export function logicalIdOf(template: Template, type: string, prefix: string): string {
  const ids = Object.keys(template.findResources(type)).filter((id) => id.startsWith(prefix));
  if (ids.length !== 1) throw new Error(`expected one ${type} named ${prefix}*, found ${ids.join(', ') || 'none'}`);
  return ids[0];
}
