/**
 * What a chaos run stands on: a serialised moto, the bucket with its three roots and notification queue,
 * this run's own copy of the bundles, the cast (clients, out-of-band writer, seeded generators) and the
 * fault proxies the indexer talks to S3 through; and taking it all down again.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SHARD_META_KEY } from '../../lambda/lib/names';
import { S3Store } from '../../lambda/lib/s3';
import { createS3Client } from '../../lambda/lib/s3-client';
import { freePort } from '../../support/moto';
import { notifyQueue } from '../../support/notifications';
import { sleep } from '../../support/sleep';
import {
  type ChaosLayout,
  type ClientKind,
  type ClientStats,
  OutOfBandWriter,
  type Published,
  SwampClient,
  emptyClientStats,
} from './clients';
import { type FaultProxy, type FaultRates, NO_FAULTS, startFaultProxy } from './fault-proxy';
import { Killer } from './kills';
import { type ChaosOptions, type ChaosReport, emptyReport } from './report';
import { type Rng, seededRng } from './rng';

const ROOT = join(__dirname, '..', '..');
/** The built command and Lambda bundle (`npm run bundle`). */
export const CLI = join(ROOT, 'dist', 'cli', 'cli.js');
const BUNDLE = join(ROOT, 'dist', 'lambda', 'index.js');

/** The run's three roots, one per layout. */
export const ROOTS = ['mono', 'dual', 'shard'];
export const LAYOUT_OF: Record<string, ChaosLayout> = { mono: 'monolith', dual: 'dual-write', shard: 'shard-first' };
/**
 * Who writes each root besides the out-of-band writer: the monolith root, clients of the 2026.04 release
 * (unconditional writes under the lock); the others, current clients under the lock and a lockless one (a
 * current client's serve handler). Older clients are not mixed with lockless ones: their unconditional
 * writes would erase the lockless client's entries whatever the indexer does.
 */
const KINDS_OF: Record<string, { readonly locked: ClientKind; readonly lockless: number }> = {
  mono: { locked: 'older', lockless: 0 },
  dual: { locked: 'current', lockless: 1 },
  shard: { locked: 'current', lockless: 1 },
};

const FAULT_RATES: FaultRates = { slowdown: 0.04, reset: 0.02, 'drop-answer': 0.03, delay: 0.02 };

/** Local credentials and region for the SDK, and no instance-metadata lookups: every request goes to loopback. */
export function useLocalAwsEnv(): void {
  process.env.AWS_ACCESS_KEY_ID ??= 'testing';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'testing';
  process.env.AWS_REGION ??= 'us-east-1';
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
}

export interface SerialMoto {
  readonly endpoint: string;
  stop(): void;
}

/** A moto server with its requests serialised (test/chaos/serial_moto.py). */
export async function startSerialMoto(): Promise<SerialMoto> {
  const port = await freePort();
  const child = spawn('python3', [join(__dirname, 'serial_moto.py'), String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`serial moto exited: ${stderr}`);
    try {
      if ((await fetch(`${endpoint}/moto-api/`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`serial moto did not start: ${stderr}`);
    await sleep(100);
  }
  return { endpoint, stop: () => void child.kill('SIGKILL') };
}

/** What every part of one run shares. */
export interface ChaosRun {
  readonly options: ChaosOptions;
  readonly log: (line: string) => void;
  /** The run's seeded generator: the cast's generators and the loops' pauses are drawn from it. */
  readonly rng: Rng;
  readonly faults: boolean;
  readonly kills: boolean;
  /** This run's copy of the bundles (beside dist/, so node_modules resolve): a rebuild meanwhile cannot tear them. */
  readonly own: string;
  readonly cli: string;
  readonly bundle: string;
  readonly moto: SerialMoto;
  /** The bucket, straight to moto (no faults). */
  readonly direct: S3Store;
  readonly sqs: SQSClient;
  readonly report: ChaosReport;
  /** Fault proxies still open. */
  readonly proxies: FaultProxy[];
  /** `repair` processes still running. */
  readonly children: Set<ChildProcess>;
  /** The Lambda's worker process (see `startLambda`), stopped with the run. */
  worker?: { stop(): void };
  /** On at the quiet end: no faults, no kills, no duplicated deliveries. */
  readonly quiet: { on: boolean };
  /**
   * Every answered request of the indexer, as its proxies saw them: its writes are printed when a client's
   * fields go missing, and all of them in the account of a long client lock wait.
   */
  readonly requests: IndexerRequest[];
}

/** One answered request of the indexer: when, to which key, whether it wrote, and a line saying who sent what. */
export interface IndexerRequest {
  readonly at: number;
  readonly key: string;
  readonly write: boolean;
  readonly line: string;
}

/** Copies the bundles, starts moto and the clients to it; `stopRun` takes it down whatever happens next. */
export async function startRun(options: ChaosOptions): Promise<ChaosRun> {
  const log = options.log ?? (() => undefined);
  const rng = seededRng(options.seed);
  const faults = options.faults ?? true;
  const kills = options.kills ?? true;
  if (!existsSync(CLI) || !existsSync(BUNDLE)) throw new Error('dist/ is missing: run `npm run bundle` first');
  const own = join(ROOT, 'dist', `.chaos-${process.pid}-${options.seed}`);
  mkdirSync(own, { recursive: true });
  const cli = join(own, 'cli.js');
  const bundle = join(own, 'index.js');
  copyFileSync(CLI, cli);
  copyFileSync(BUNDLE, bundle);
  useLocalAwsEnv();

  const moto = await startSerialMoto();
  const direct = new S3Store(
    createS3Client({ endpoint: moto.endpoint, forcePathStyle: true, region: 'us-east-1' }),
    `chaos-${options.seed}`,
  );
  const sqs = new SQSClient({ endpoint: moto.endpoint, region: 'us-east-1' });
  return {
    options,
    log,
    rng,
    faults,
    kills,
    own,
    cli,
    bundle,
    moto,
    direct,
    sqs,
    report: emptyReport(options),
    proxies: [],
    children: new Set(),
    quiet: { on: false },
    requests: [],
  };
}

/** Kills what still runs, closes the proxies and clients, stops moto and removes the run's bundles. */
export async function stopRun(run: ChaosRun): Promise<void> {
  for (const c of run.children) c.kill('SIGKILL');
  run.worker?.stop();
  await Promise.all(run.proxies.map((p) => p.close()));
  run.direct.client.destroy();
  run.sqs.destroy();
  run.moto.stop();
  rmSync(run.own, { recursive: true, force: true });
}

/** Creates the bucket and the queue its notifications go to; returns the queue's URL. */
export async function prepareBucket(run: ChaosRun): Promise<string> {
  const { direct, sqs, options } = run;
  await direct.client.send(new CreateBucketCommand({ Bucket: direct.bucket }));
  const { url } = await notifyQueue(direct.client, sqs, direct.bucket, `chaos-${options.seed}`);
  // The layouts clients gave each root: dual-write and shard-first start with their manifest.
  await direct.put(`dual/${SHARD_META_KEY}`, JSON.stringify({ version: 1, partitions: [] }));
  await direct.put(`shard/${SHARD_META_KEY}`, JSON.stringify({ version: 2, partitions: [], commitSeq: 0 }));
  return url;
}

/** Who acts during a run, and the seeded generators of faults, kills and deliveries. */
export interface Cast {
  readonly stats: ClientStats;
  /** What clients published and nobody deleted since, by `root/rel`. */
  readonly published: Map<string, Published>;
  /** Every partition a root's manifest was seen to list, by root: none may ever be dropped. */
  readonly listedPartitions: Map<string, Set<string>>;
  readonly clients: SwampClient[];
  readonly oob: OutOfBandWriter;
  readonly faultRng: Rng;
  readonly killer: Killer;
  readonly deliveryRng: Rng;
}

/** The cast, each member seeded from the run's generator in a fixed order, so that a seed replays. */
export function castOf(run: ChaosRun): Cast {
  const { direct, rng } = run;
  const stats = emptyClientStats();
  const published = new Map<string, Published>();
  const clients: SwampClient[] = [];
  for (const root of ROOTS) {
    const { locked, lockless } = KINDS_OF[root];
    for (let i = 0; i < (run.options.clientsPerRoot ?? 2); i++)
      clients.push(new SwampClient(direct, root, LAYOUT_OF[root], `${root}${i}`, seededRng(rng.int(2 ** 31)), stats, published, locked));
    for (let i = 0; i < lockless; i++)
      clients.push(
        new SwampClient(direct, root, LAYOUT_OF[root], `${root}-free${i}`, seededRng(rng.int(2 ** 31)), stats, published, 'lockless'),
      );
  }
  const oob = new OutOfBandWriter(direct, ROOTS, seededRng(rng.int(2 ** 31)), stats);
  const faultRng = seededRng(rng.int(2 ** 31));
  const killRng = seededRng(rng.int(2 ** 31));
  const deliveryRng = seededRng(rng.int(2 ** 31));
  const killer = new Killer(killRng, run.kills, run.quiet, run.report);
  const listedPartitions = new Map(ROOTS.map((root) => [root, new Set<string>()]));
  return { stats, published, listedPartitions, clients, oob, faultRng, killer, deliveryRng };
}

/** A fault proxy to moto for one of the indexer's processes (`who`), its requests traced, closed at the end of the run. */
export async function startProxy(run: ChaosRun, faultRng: Rng, who: string): Promise<FaultProxy> {
  const proxy = await startFaultProxy(run.moto.endpoint, faultRng, run.faults ? FAULT_RATES : NO_FAULTS);
  proxy.onRequest = run.options.onIndexerRequest;
  proxy.onSeen = (r) => {
    const at = Date.now();
    const line = `${new Date(at).toISOString()} ${who} ${r.method} ${r.key} ${r.status}`;
    run.requests.push({ at, key: r.key, write: r.method !== 'GET' && r.method !== 'HEAD', line });
  };
  run.proxies.push(proxy);
  return proxy;
}
