/** The crash-point table of `npm run chaos`: `repair` killed right after each S3 step of a publish, on each layout. */
import { spawn } from 'node:child_process';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { LOCK_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { isInternalKey } from '../../lambda/lib/keys';
import { CHAOS_LAYOUTS, type ChaosLayout, SwampClient, emptyClientStats, readTruth } from './clients';
import { NO_FAULTS, startFaultProxy } from './fault-proxy';
import { CRASH_STEPS, type CrashStep, stepOf } from './kills';
import { type Rng, seededRng } from './rng';
import { CLI, type SerialMoto, startSerialMoto, useLocalAwsEnv } from './setup';

/** One crash point: the indexer killed right after `step` on a root of `layout`, then what a client and the next run saw. */
export interface CrashPointRow {
  readonly layout: ChaosLayout;
  readonly step: CrashStep;
  /** False when the run never reached that step (nothing to publish there, e.g. no shard in a monolith). */
  readonly killed: boolean;
  /** How long a client then waited for the lock. */
  readonly clientWaitMs: number;
  readonly nextExit: number | null;
  /** After the next run: the layout's truth equals the listing, no lock, no publish intent. */
  readonly healed: boolean;
  readonly detail: string[];
}

/** Kills `repair` right after each S3 step of a publish, on each layout; a client then pushes and the next run must finish the work. */
export async function runCrashPoints(log: (line: string) => void = () => undefined): Promise<CrashPointRow[]> {
  useLocalAwsEnv();
  const moto = await startSerialMoto();
  const direct = new S3Store(createS3Client({ endpoint: moto.endpoint, forcePathStyle: true, region: 'us-east-1' }), 'crash-points');
  const rows: CrashPointRow[] = [];
  const rng = seededRng(42);
  try {
    await direct.client.send(new CreateBucketCommand({ Bucket: direct.bucket }));
    for (const layout of CHAOS_LAYOUTS) {
      for (const step of CRASH_STEPS) {
        const row = await crashPoint(direct, moto, rng, layout, step);
        rows.push(row);
        log(
          `${layout} ${step}: killed ${row.killed}, client waited ${(row.clientWaitMs / 1000).toFixed(1)} s, next run exit ${row.nextExit}, ${row.detail.length ? row.detail.join('; ') : 'healed'}`,
        );
      }
    }
    return rows;
  } finally {
    direct.client.destroy();
    moto.stop();
  }
}

/** One root of `layout` with work for the indexer; `repair` killed after `step`; a client pushes; the next `repair` must heal it. */
async function crashPoint(direct: S3Store, moto: SerialMoto, rng: Rng, layout: ChaosLayout, step: CrashStep): Promise<CrashPointRow> {
  const root = `${layout}-${step}`;
  const base = `${root}/`;
  if (layout === 'dual-write') await direct.put(base + SHARD_META_KEY, JSON.stringify({ version: 1, partitions: [] }));
  if (layout === 'shard-first') await direct.put(base + SHARD_META_KEY, JSON.stringify({ version: 2, partitions: [], commitSeq: 0 }));
  const stats = emptyClientStats();
  const client = new SwampClient(direct, root, layout, `c-${step}`, seededRng(rng.int(2 ** 31)), stats, new Map());
  await client.push();
  await client.push();
  // Work for the indexer: objects no index holds, in partitions the index already has and new ones.
  for (let i = 0; i < 3; i++) await direct.put(`${base}logs/oob-${i}.log`, 'x'.repeat(i + 1));
  await direct.put(`${base}files/oob file.txt`, 'y');
  const proxy = await startFaultProxy(moto.endpoint, rng, NO_FAULTS);
  let killed = false;
  const child = spawn(
    process.execPath,
    [CLI, 'repair', '--bucket', direct.bucket, '--prefix', root, '--endpoint', proxy.endpoint, '--force-path-style'],
    {
      env: { ...process.env },
      stdio: 'ignore',
    },
  );
  proxy.onAnswered = (r) => {
    if (stepOf(r) === step && !killed) {
      killed = true;
      child.kill('SIGKILL');
    }
  };
  await new Promise((r) => child.once('exit', r));
  await proxy.close();
  await client.push();
  const clientWaitMs = stats.lockWaitsMs[stats.lockWaitsMs.length - 1] ?? -1;
  const next = spawn(
    process.execPath,
    [CLI, 'repair', '--bucket', direct.bucket, '--prefix', root, '--endpoint', moto.endpoint, '--force-path-style'],
    { env: { ...process.env }, stdio: 'ignore' },
  );
  const nextExit = await new Promise<number | null>((r) => next.once('exit', (c) => r(c)));
  const detail = await healedDetail(direct, base, layout);
  return { layout, step, killed, clientWaitMs, nextExit, healed: detail.length === 0 && nextExit === 0, detail };
}

/** What keeps the root at `base` from being healed: the truth against the listing, a lock or publish intent left. */
export async function healedDetail(direct: S3Store, base: string, layout: ChaosLayout): Promise<string[]> {
  const detail: string[] = [];
  const truth = await readTruth(direct, base, layout);
  if (truth.problem) detail.push(truth.problem);
  const listed = new Map<string, number>();
  for await (const page of direct.listPages({ prefix: base })) {
    for (const o of page.objects) {
      const rel = o.key.slice(base.length);
      if (o.key.startsWith(`${base}_control/datastore-indexer/publishing/`)) detail.push(`intent left: ${o.key}`);
      if (rel === LOCK_KEY) detail.push('lock left');
      if (!isInternalKey(rel)) listed.set(rel, o.size);
    }
  }
  for (const [rel, size] of listed) if (truth.entries.get(rel)?.size !== size) detail.push(`${rel}: not indexed at ${size} B`);
  for (const rel of truth.entries.keys()) if (!listed.has(rel)) detail.push(`${rel}: indexed, not in S3`);
  return detail;
}
