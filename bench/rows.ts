/**
 * What the benchmark times against an S3 endpoint: a bare ListObjectsV2 loop (the floor), a full heal
 * with either lister, and rclone listing the same root.
 */
import { spawnSync } from 'node:child_process';
import { DeleteObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { DatastoreRoot } from '../lambda/lib/scope';
import type { Lister } from '../lambda/lib/list';
import { INDEX_KEY, LOCK_KEY, manifestKeyOf, partitionKeyOf, rootBase } from '../lambda/lib/names';
import { S3Store } from '../lambda/lib/s3';
import { createS3Client } from '../lambda/lib/s3-client';
import { healRoot } from '../lambda/lib/heal';
import { isInternalKey, partitionOf } from '../lambda/lib/keys';
import { parseIndex } from '../lambda/lib/index-file';
import { parallelLister } from '../lambda/lib/parallel-list';
import { timed } from './child-cpu';
import { meterDepth } from './depth';
import type { LoadReading } from './load';

/** One timed run: seconds, what was seen, and requests sent. */
export interface Timing {
  readonly seconds: number;
  readonly objects: number;
  readonly requests: number;
  /** Extra figures of the run (listing and publish time of a heal). */
  readonly detail?: Record<string, number>;
  /** What else ran on the machine meanwhile. */
  readonly load?: LoadReading;
}

/** Where the root under test lives. */
export interface Target {
  readonly endpoint: string;
  readonly bucket: string;
  /** Root prefix without slashes. */
  readonly prefix: string;
}

/** The raw floor: the SDK's own ListObjectsV2 loop, one page after another, doing nothing with the keys. */
export async function rawSequential(target: Target): Promise<Timing> {
  const client = new S3Client({ endpoint: target.endpoint, forcePathStyle: true, region: process.env.AWS_REGION ?? 'us-east-1' });
  try {
    const started = performance.now();
    const cpu = process.cpuUsage();
    let objects = 0;
    let requests = 0;
    let token: string | undefined;
    do {
      const out = await client.send(
        new ListObjectsV2Command({ Bucket: target.bucket, Prefix: `${target.prefix}/`, ContinuationToken: token }),
      );
      requests++;
      objects += out.KeyCount ?? 0;
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
    const used = process.cpuUsage(cpu);
    const cpuMs = (used.user + used.system) / 1000;
    return { seconds: (performance.now() - started) / 1000, objects, requests, detail: { cpuMs, listCpuMsPerPage: cpuMs / requests } };
  } finally {
    client.destroy();
  }
}

/** Removes the root's index and lock, so the next heal finds an unindexed root: it lists, builds and publishes. */
export async function unindex(target: Target): Promise<void> {
  const client = createS3Client({ endpoint: target.endpoint, forcePathStyle: true });
  try {
    const base = rootBase({ bucket: target.bucket, prefix: target.prefix });
    for (const key of [INDEX_KEY, LOCK_KEY]) await client.send(new DeleteObjectCommand({ Bucket: target.bucket, Key: base + key }));
  } finally {
    client.destroy();
  }
}

/**
 * A full heal (mode repair) of an unindexed root, as the command and the Lambda run it; the index it
 * publishes is removed again afterwards, so every row lists the same objects. `indexed`: the root's index
 * is healed where it stands (the caller drifted it), and kept.
 */
export async function heal(
  target: Target,
  lister: Lister,
  options: { readonly keep?: boolean; readonly indexed?: boolean } = {},
): Promise<Timing> {
  if (!options.indexed) await unindex(target);
  const root: DatastoreRoot = { bucket: target.bucket, prefix: target.prefix };
  const store = new S3Store(createS3Client({ endpoint: target.endpoint, forcePathStyle: true }), target.bucket);
  const meter = meterDepth(store, process.env.BENCH_TRACE === '1');
  let listingDepth = 0;
  let listingCpuMs = 0;
  const measured: Lister = async function* (s, prefix, hint) {
    const cpu = process.cpuUsage();
    yield* lister(s, prefix, hint);
    const used = process.cpuUsage(cpu);
    listingCpuMs = (used.user + used.system) / 1000;
    listingDepth = meter.depth();
  };
  try {
    const started = performance.now();
    const cpu = process.cpuUsage();
    // Keys named per kind as the Lambda's heals name them (its SAMPLE_KEYS).
    const report = await healRoot(store, root, { mode: 'repair', lister: measured, keys: 20 });
    const used = process.cpuUsage(cpu);
    const seconds = (performance.now() - started) / 1000;
    const scope = report.scopes.find((s) => !s.namespace);
    if (!scope?.published) throw new Error(`the heal of s3://${target.bucket}/${target.prefix} published nothing`);
    return {
      seconds,
      objects: report.objectsSeen,
      requests: store.requestTotal(),
      detail: {
        listingS: report.listingMs / 1000,
        publishS: scope.publishMs / 1000,
        entries: scope.entries,
        lists: store.requests.ListObjectsV2 ?? 0,
        listingDepth,
        publishDepth: meter.depth() - listingDepth,
        cpuMs: (used.user + used.system) / 1000,
        listCpuMsPerPage: listingCpuMs / Math.max(1, store.requests.ListObjectsV2 ?? 0),
      },
    };
  } finally {
    if (meter.trace)
      process.stderr.write(
        `${meter.trace.map((t) => `${t.depth}\t${t.op}\t${t.sentMs.toFixed(0)}\t${t.doneMs.toFixed(0)}\t${t.input}`).join('\n')}\n`,
      );
    store.client.destroy();
    if (!options.keep && !options.indexed) await unindex(target);
  }
}

/** Makes the root shard-first: a version-2 manifest that lists no partition, as a `migrate-index` of an empty root leaves. */
export async function makeShardFirst(target: Target): Promise<void> {
  const root: DatastoreRoot = { bucket: target.bucket, prefix: target.prefix };
  const store = new S3Store(createS3Client({ endpoint: target.endpoint, forcePathStyle: true }), target.bucket);
  try {
    await store.put(manifestKeyOf({ root }), JSON.stringify({ version: 2, partitions: [], commitSeq: 1 }));
  } finally {
    store.client.destroy();
  }
}

/**
 * Lists the root (in parallel) against every partition file the manifest lists: `partitionsEqualListing` is
 * 1 when each listed object with a partition has an entry of its size in its partition file and no file
 * holds anything else, else 0; `partitionFiles` and `entriesChecked` say how much was compared. A file is
 * read when the listing first reaches its partition and let go once the listing has matched all of it, so
 * a root of any size is checked in the memory of its open partitions.
 */
export async function partitionsEqualListing(target: Target): Promise<Record<string, number>> {
  const root: DatastoreRoot = { bucket: target.bucket, prefix: target.prefix };
  const base = rootBase(root);
  const store = new S3Store(createS3Client({ endpoint: target.endpoint, forcePathStyle: true }), target.bucket);
  try {
    const meta = JSON.parse((await store.get(manifestKeyOf({ root })))!.body.toString('utf8')) as { partitions: string[] };
    const listed = new Set(meta.partitions);
    const open = new Map<string, Map<string, number>>();
    let mismatches = 0;
    let entriesChecked = 0;
    const read = async (partition: string): Promise<Map<string, number>> => {
      const sizes = new Map<string, number>();
      const parsed = parseIndex((await store.get(partitionKeyOf({ root }, partition)))?.body ?? '');
      if (!parsed.ok) mismatches++;
      else for (const [key, entry] of parsed.index.entries) partitionOf(key) === partition ? sizes.set(key, entry.size) : mismatches++;
      entriesChecked += sizes.size;
      return sizes;
    };
    for await (const page of parallelLister({ etags: false })(store, base)) {
      for (const object of page.objects) {
        const rel = object.key.slice(base.length);
        const partition = isInternalKey(rel) ? undefined : partitionOf(rel);
        if (partition === undefined) continue;
        let sizes = open.get(partition);
        if (!sizes) {
          sizes = listed.delete(partition) ? await read(partition) : new Map();
          open.set(partition, sizes);
        }
        if (sizes.get(rel) !== object.size) mismatches++;
        sizes.delete(rel);
      }
    }
    for (const sizes of open.values()) mismatches += sizes.size;
    // Files of partitions the listing never reached must hold nothing.
    for (const partition of listed) mismatches += (await read(partition)).size;
    return { partitionsEqualListing: mismatches === 0 ? 1 : 0, partitionFiles: meta.partitions.length, entriesChecked };
  } finally {
    store.client.destroy();
  }
}

/** How rclone is asked to list: `--fast-list` (one recursive walk) or a directory walk with `checkers` in parallel. */
export type RcloneMode = { readonly fastList: true } | { readonly checkers: number };

/** True when an `rclone` binary answers on the PATH. */
export function rcloneVersion(): string | undefined {
  const probe = spawnSync('rclone', ['version'], { encoding: 'utf8' });
  return probe.status === 0 ? probe.stdout.split('\n')[0].trim() : undefined;
}

/** `base` plus an rclone remote named `bench` for the target (path-style S3, ListObjectsV2). */
export function rcloneEnv(target: Target, base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...base,
    RCLONE_CONFIG_BENCH_TYPE: 's3',
    RCLONE_CONFIG_BENCH_PROVIDER: 'Other',
    RCLONE_CONFIG_BENCH_ENDPOINT: target.endpoint,
    RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID ?? 'bench',
    RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY ?? 'bench',
    RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE: 'true',
    RCLONE_CONFIG_BENCH_LIST_VERSION: '2',
  };
}

/**
 * `rclone lsjson -R --files-only` of the root through a remote configured from the environment
 * (`RCLONE_CONFIG_BENCH_*`, S3 provider Other, path style, ListObjectsV2, 1,000 keys a page),
 * with the listing's own times (`--use-server-modtime`, no HeadObject per file), as fast as rclone goes.
 */
export async function rcloneList(target: Target, mode: RcloneMode): Promise<Timing> {
  const env = rcloneEnv(target, process.env);
  delete env.AWS_CA_BUNDLE;
  const args = ['lsjson', '-R', '--files-only', '--no-mimetype', '--use-server-modtime', '--s3-list-chunk', '1000'];
  if ('fastList' in mode) args.push('--fast-list');
  else args.push('--checkers', String(mode.checkers));
  args.push(`bench:${target.bucket}/${target.prefix}`);
  const run = await timed('rclone', args, env);
  // One object per line between "[" and "]".
  const lines = run.stdout.split('\n').filter((line) => line.length > 0).length;
  return { seconds: run.seconds, objects: Math.max(0, lines - 2), requests: 0, detail: { childCpuMs: (run.userS + run.sysS) * 1000 } };
}
