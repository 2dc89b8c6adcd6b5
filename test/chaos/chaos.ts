/**
 * One seeded chaos run: three roots in one bucket (monolith, dual-write, shard-first) on a serialised moto,
 * swamp-style clients pushing under the lock, an out-of-band writer, the CLI's `repair` and the bundled
 * Lambda (fed the notifications moto really sent, duplicated, reordered, failed items delivered again),
 * the indexer's S3 calls through a seeded fault proxy, and the indexer SIGKILLed at random points or
 * right after a chosen S3 step. Invariants are checked while it runs and at a quiet end.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { LOCK_KEY, SHARD_META_KEY, S3Store, createS3Client, isInternalKey, partitionOf } from '../../lambda/lib/internal';
import { freePort } from '../../support/moto';
import { notifyQueue } from '../../support/notifications';
import { CHAOS_LAYOUTS, type ChaosLayout, OutOfBandWriter, emptyClientStats, type Published, SwampClient, readTruth } from './clients';
import { FAULT_KINDS, type FaultKind, type FaultProxy, type FaultRates, NO_FAULTS, type SeenRequest, startFaultProxy } from './fault-proxy';
import { type Rng, seededRng } from './rng';
import { sleep } from '../../support/sleep';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'cli', 'cli.js');
const BUNDLE = join(ROOT, 'dist', 'lambda', 'index.js');
const WORKER = join(__dirname, 'lambda-worker.cjs');

/** The S3 steps of a publish at which the indexer is killed right after its answer arrived. */
export const CRASH_STEPS = ['lock-taken', 'index-read', 'shard-written', 'manifest-written', 'index-written', 'lock-released'] as const;
export type CrashStep = (typeof CRASH_STEPS)[number];

function stepOf(r: SeenRequest): CrashStep | undefined {
  const last = r.key.slice(r.key.lastIndexOf('/') + 1);
  if (last === LOCK_KEY) return r.method === 'PUT' && r.status < 300 ? 'lock-taken' : r.method === 'DELETE' ? 'lock-released' : undefined;
  if (r.key.endsWith(SHARD_META_KEY))
    return r.method === 'PUT' && r.status < 300 ? 'manifest-written' : r.method === 'GET' ? 'index-read' : undefined;
  if (r.key.includes('_index/') && r.method === 'PUT' && r.status < 300) return 'shard-written';
  if (last === '.datastore-index.json')
    return r.method === 'PUT' && r.status < 300 ? 'index-written' : r.method === 'GET' ? 'index-read' : undefined;
  return undefined;
}

export interface ChaosOptions {
  readonly seed: number;
  readonly seconds: number;
  readonly faults?: boolean;
  readonly kills?: boolean;
  readonly clientsPerRoot?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  seed: number;
  seconds: number;
  layouts: ChaosLayout[];
  pushes: number;
  uploads: number;
  clientDeletes: number;
  oobOps: number;
  repairRuns: number;
  repairExits: Record<string, number>;
  lambdaBatches: number;
  lambdaRecords: number;
  itemFailures: number;
  faults: Record<FaultKind, number>;
  indexerRequests: number;
  kills: Record<string, number>;
  entriesChecked: number;
  finalEntries: number;
  maxLockWaitMs: number;
  maxLockWaitAfterKillMs: number;
  lockTimeouts: number;
  vanished: string[];
  lostFields: string[];
  finalMismatch: string[];
  leftovers: string[];
  crashesWithoutMessage: string[];
  clientErrors: string[];
  drainMs: number;
  ok: boolean;
}

/** Local credentials and region for the SDK, and no instance-metadata lookups: every request goes to loopback. */
function useLocalAwsEnv(): void {
  process.env.AWS_ACCESS_KEY_ID ??= 'testing';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'testing';
  process.env.AWS_REGION ??= 'us-east-1';
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
}

/** A moto server with its requests serialised (test/chaos/serial_moto.py). */
async function startSerialMoto(): Promise<{ endpoint: string; stop(): void }> {
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

/** A Lambda worker process (the bundle), answering one SQS event at a time. */
class LambdaWorker {
  private child!: ChildProcess;
  private pending:
    | ((answer: { ok: boolean; result?: { batchItemFailures?: { itemIdentifier: string }[] }; error?: string } | undefined) => void)
    | undefined;
  private buffer = '';
  output = '';

  constructor(
    private readonly bundle: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {
    this.start();
  }

  private start(): void {
    this.child = spawn(process.execPath, [WORKER, this.bundle], { env: this.env, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    this.buffer = '';
    const keep = (c: Buffer) => (this.output = (this.output + c.toString()).slice(-20_000));
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    (this.child.stdio[3] as NodeJS.ReadableStream).on('data', (c: Buffer) => {
      this.buffer += c.toString();
      for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        const done = this.pending;
        this.pending = undefined;
        done?.(JSON.parse(line));
      }
    });
    this.child.once('exit', () => {
      const done = this.pending;
      this.pending = undefined;
      done?.(undefined);
    });
  }

  /** The handler's answer, or undefined when the process died (killed) first. */
  invoke(
    event: unknown,
  ): Promise<{ ok: boolean; result?: { batchItemFailures?: { itemIdentifier: string }[] }; error?: string } | undefined> {
    return new Promise((resolve) => {
      this.pending = resolve;
      this.child.stdin!.write(`${JSON.stringify(event)}\n`);
    });
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }

  restartIfDead(): void {
    if (this.child.exitCode !== null || this.child.signalCode !== null) this.start();
  }

  stop(): void {
    this.child.kill('SIGKILL');
  }
}

/** A queued SQS message as the event source would deliver it. */
interface Delivery {
  readonly body: string;
  readonly id: string;
  receiveCount: number;
}

function recordOf(d: Delivery): SQSRecord {
  return {
    messageId: d.id,
    receiptHandle: `h-${d.id}`,
    body: d.body,
    attributes: {
      ApproximateReceiveCount: String(d.receiveCount),
      SentTimestamp: String(Date.now()),
      SenderId: 'chaos',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:chaos',
    awsRegion: 'us-east-1',
  };
}

const FAULT_RATES: FaultRates = { slowdown: 0.04, reset: 0.02, 'drop-answer': 0.03, delay: 0.02 };

/** Runs one seed; the report says what was done, what was checked and every violation. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => undefined);
  const rng = seededRng(options.seed);
  const faults = options.faults ?? true;
  const kills = options.kills ?? true;
  if (!existsSync(CLI) || !existsSync(BUNDLE)) throw new Error('dist/ is missing: run `npm run bundle` first');
  // A copy of the bundles for this run (beside dist/, so node_modules resolve): a rebuild meanwhile cannot tear them.
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
  const roots = ['mono', 'dual', 'shard'];
  const layoutOf: Record<string, ChaosLayout> = { mono: 'monolith', dual: 'dual-write', shard: 'shard-first' };
  const report: ChaosReport = {
    seed: options.seed,
    seconds: options.seconds,
    layouts: [...CHAOS_LAYOUTS],
    pushes: 0,
    uploads: 0,
    clientDeletes: 0,
    oobOps: 0,
    repairRuns: 0,
    repairExits: {},
    lambdaBatches: 0,
    lambdaRecords: 0,
    itemFailures: 0,
    faults: { slowdown: 0, reset: 0, 'drop-answer': 0, delay: 0 },
    indexerRequests: 0,
    kills: {},
    entriesChecked: 0,
    finalEntries: 0,
    maxLockWaitMs: 0,
    maxLockWaitAfterKillMs: 0,
    lockTimeouts: 0,
    vanished: [],
    lostFields: [],
    finalMismatch: [],
    leftovers: [],
    crashesWithoutMessage: [],
    clientErrors: [],
    drainMs: 0,
    ok: false,
  };
  const proxies: FaultProxy[] = [];
  let worker: LambdaWorker | undefined;
  const children = new Set<ChildProcess>();
  try {
    await direct.client.send(new CreateBucketCommand({ Bucket: direct.bucket }));
    const { url: QueueUrl } = await notifyQueue(direct.client, sqs, direct.bucket, `chaos-${options.seed}`);
    // The layouts clients gave each root: dual-write and shard-first start with their manifest.
    await direct.put(`dual/${SHARD_META_KEY}`, JSON.stringify({ version: 1, partitions: [] }));
    await direct.put(`shard/${SHARD_META_KEY}`, JSON.stringify({ version: 2, partitions: [], commitSeq: 0 }));

    const stats = emptyClientStats();
    const published = new Map<string, Published>();
    const clients: SwampClient[] = [];
    for (const root of roots) {
      for (let i = 0; i < (options.clientsPerRoot ?? 2); i++)
        clients.push(new SwampClient(direct, root, layoutOf[root], `${root}${i}`, seededRng(rng.int(2 ** 31)), stats, published));
    }
    const oob = new OutOfBandWriter(direct, roots, seededRng(rng.int(2 ** 31)), stats);
    const faultRng = seededRng(rng.int(2 ** 31));
    const killRng = seededRng(rng.int(2 ** 31));
    const deliveryRng = seededRng(rng.int(2 ** 31));
    let stepTurn = killRng.int(CRASH_STEPS.length);
    const newProxy = async (who: string): Promise<FaultProxy> => {
      const proxy = await startFaultProxy(moto.endpoint, faultRng, faults ? FAULT_RATES : NO_FAULTS);
      proxy.onSeen = (r) => {
        if (r.method !== 'GET' && r.method !== 'HEAD') trace.push(`${new Date().toISOString()} ${who} ${r.method} ${r.key} ${r.status}`);
      };
      proxies.push(proxy);
      return proxy;
    };
    const quiet = { on: false };
    const trace: string[] = [];
    const fieldLoss = new Set<string>();
    const killTimes: number[] = [];
    const countKill = (what: string) => {
      killTimes.push(Date.now());
      report.kills[what] = (report.kills[what] ?? 0) + 1;
    };
    /** Arms a kill of `victim`: at a chosen S3 step (seen through its proxy) or after a random time. */
    const armKill = (proxy: FaultProxy, victim: () => void, who: string): (() => void) => {
      if (!kills || quiet.on || !killRng.chance(0.35)) return () => undefined;
      if (killRng.chance(0.6)) {
        const step = CRASH_STEPS[stepTurn++ % CRASH_STEPS.length];
        proxy.onAnswered = (r) => {
          if (stepOf(r) === step) {
            proxy.onAnswered = undefined;
            countKill(`${who}@${step}`);
            victim();
          }
        };
        return () => (proxy.onAnswered = undefined);
      }
      const timer = setTimeout(() => {
        countKill(`${who}@random`);
        victim();
      }, 100 + killRng.int(3000));
      return () => clearTimeout(timer);
    };

    const stopAt = Date.now() + options.seconds * 1000;
    const running = () => Date.now() < stopAt;
    const loops: Promise<void>[] = [];
    const guard = (what: string, body: () => Promise<void>) =>
      body().catch((err: unknown) => void stats.errors.push(`${what}: ${err instanceof Error ? err.message : String(err)}`));

    // Clients and the out-of-band writer.
    for (const client of clients) {
      loops.push(
        (async () => {
          while (running()) {
            await guard(`client ${client.id}`, () => client.push());
            await sleep(200 + rng.int(800));
          }
        })(),
      );
    }
    loops.push(
      (async () => {
        while (running()) {
          await guard('out-of-band writer', () => oob.step());
          await sleep(100 + rng.int(500));
        }
      })(),
    );

    // Invariant while running (and draining): a published entry never vanishes from its root's truth, not even for a moment.
    const finished = { on: false };
    const monitor = (async () => {
      while (!finished.on) {
        for (const root of roots) {
          const started = Date.now();
          const due = [...published.values()].filter((p) => p.root === root && p.at < started);
          let truth: Awaited<ReturnType<typeof readTruth>>;
          try {
            truth = await readTruth(direct, `${root}/`, layoutOf[root]);
          } catch {
            continue;
          }
          if (truth.problem) {
            report.vanished.push(`${root}: ${truth.problem}`);
            continue;
          }
          for (const p of due) {
            report.entriesChecked++;
            const e = truth.entries.get(p.rel);
            if (!e && published.get(`${root}/${p.rel}`) === p) {
              report.vanished.push(`${root}/${p.rel} (${layoutOf[root]}) missing at ${new Date().toISOString()}`);
            }
            if (
              e &&
              e.size === p.entry.size &&
              e.sha256 !== p.entry.sha256 &&
              published.get(`${root}/${p.rel}`) === p &&
              !fieldLoss.has(p.rel)
            ) {
              fieldLoss.add(p.rel);
              log(
                `client fields of ${root}/${p.rel} gone at ${new Date().toISOString()}: ${JSON.stringify(e)} (client wrote ${JSON.stringify(p.entry)}); last indexer writes:\n    ${trace.slice(-8).join('\n    ')}`,
              );
            }
          }
        }
        await sleep(250);
      }
    })();

    // The CLI's repair, as it ships, through its own fault proxy, sometimes killed.
    const runRepair = async (root: string): Promise<void> => {
      const proxy = await newProxy(`repair-${report.repairRuns}`);
      const child = spawn(
        process.execPath,
        [
          cli,
          'repair',
          '--bucket',
          direct.bucket,
          '--prefix',
          root,
          '--endpoint',
          proxy.endpoint,
          '--force-path-style',
          '--lock-wait',
          '20',
        ],
        { env: { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.add(child);
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      child.stdout!.resume();
      const disarm = armKill(proxy, () => child.kill('SIGKILL'), 'repair');
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        child.once('exit', (c, s) => resolve([c, s])),
      );
      disarm();
      children.delete(child);
      report.repairRuns++;
      const outcome = signal ? `killed` : `exit ${code}`;
      report.repairExits[outcome] = (report.repairExits[outcome] ?? 0) + 1;
      if (!signal && code !== 0 && code !== 2) {
        const said = stderr.split('\n').some((l) => l.startsWith('datastore-indexer: '));
        if (!said || /\n\s+at /.test(stderr)) report.crashesWithoutMessage.push(`repair ${root} exit ${code}: ${stderr.slice(0, 400)}`);
        else log(`repair ${root} exit ${code}: ${stderr.trim().slice(0, 200)}`);
      }
      report.indexerRequests += proxy.requests;
      for (const k of FAULT_KINDS) report.faults[k] += proxy.faults[k];
      proxies.splice(proxies.indexOf(proxy), 1);
      await proxy.close();
    };
    loops.push(
      (async () => {
        while (running()) {
          await sleep(1000 + rng.int(3000));
          if (running()) await guard('repair', () => runRepair(rng.pick(roots)));
        }
      })(),
    );

    // The bundled Lambda, fed what moto sent to SQS: duplicated, reordered, failed items delivered again.
    const lambdaProxy = await newProxy('lambda');
    worker = new LambdaWorker(bundle, {
      ...process.env,
      DATASTORE_BUCKET: direct.bucket,
      DATASTORE_PREFIXES: roots.join(','),
      DATASTORE_QUEUE_URL: QueueUrl,
      DATASTORE_FORCE_PATH_STYLE: 'true',
      DATASTORE_RECHECK_DELAY_SECONDS: '1',
      DATASTORE_LOCK_WAIT_SECONDS: '5',
      DATASTORE_REPAIR_RESERVE_SECONDS: '60',
      AWS_ENDPOINT_URL_S3: lambdaProxy.endpoint,
      AWS_ENDPOINT_URL_SQS: moto.endpoint,
      POWERTOOLS_LOG_LEVEL: 'WARN',
    });
    const queue: Delivery[] = [];
    let lastWork = Date.now();
    const receive = async (): Promise<number> => {
      const out = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 600 }),
      );
      const messages: Message[] = out.Messages ?? [];
      if (messages.length) {
        await sqs.send(
          new DeleteMessageBatchCommand({ QueueUrl, Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })) }),
        );
        for (const m of messages) {
          const d = { body: m.Body ?? '', id: m.MessageId ?? String(Math.random()), receiveCount: 1 };
          queue.splice(deliveryRng.int(queue.length + 1), 0, d);
          if (!quiet.on && deliveryRng.chance(0.15)) queue.splice(deliveryRng.int(queue.length + 1), 0, { ...d, id: `${d.id}-dup` });
        }
      }
      return messages.length;
    };
    let deliveryId = 0;
    // Batches of 1-40 records while writers run, 100 while draining (the stack's event source batches up to 1000).
    const lambdaBatch = async (): Promise<void> => {
      const batch = queue.splice(0, quiet.on ? 100 : 1 + deliveryRng.int(40));
      if (!batch.length) return;
      lastWork = Date.now();
      const event = { Records: batch.map((d) => recordOf({ ...d, id: `${d.id}#${deliveryId++}` })) };
      const ids = new Map(event.Records.map((r, i) => [r.messageId, batch[i]]));
      worker!.restartIfDead();
      const disarm = armKill(lambdaProxy, () => worker!.kill(), 'lambda');
      const answer = await worker!.invoke(event);
      disarm();
      report.lambdaBatches++;
      report.lambdaRecords += batch.length;
      if (!answer) {
        // Killed: the whole batch comes back after its visibility timeout.
        for (const d of batch) queue.push({ ...d, receiveCount: d.receiveCount + 1 });
        return;
      }
      if (!answer.ok) {
        report.crashesWithoutMessage.push(`lambda threw: ${answer.error}`);
        for (const d of batch) queue.push({ ...d, receiveCount: d.receiveCount + 1 });
        return;
      }
      for (const f of answer.result?.batchItemFailures ?? []) {
        report.itemFailures++;
        const d = ids.get(f.itemIdentifier);
        if (d) queue.push({ ...d, receiveCount: d.receiveCount + 1 });
      }
    };
    const lambdaLoop = (async () => {
      while (running()) {
        await guard('lambda', async () => {
          while ((await receive()) === 10);
          await lambdaBatch();
        });
        await sleep(50 + rng.int(250));
      }
    })();

    await Promise.all(loops);
    await lambdaLoop;
    // Quiet end: no more writers, no faults, no kills; the Lambda alone drains the queue.
    quiet.on = true;
    for (const p of proxies) p.rates = NO_FAULTS;
    for (const c of children) c.kill('SIGKILL');
    const drainStarted = Date.now();
    let idleSince = Date.now();
    while (Date.now() - drainStarted < 900_000) {
      let got = 0;
      for (let n = 10; n === 10; got += n) n = await receive().catch(() => 0);
      if (queue.length) {
        await lambdaBatch().catch((err: unknown) => void stats.errors.push(`lambda (drain): ${String(err)}`));
        idleSince = Date.now();
      } else if (got === 0 && Date.now() - idleSince > 4000 && Date.now() - lastWork > 4000) {
        break;
      } else {
        await sleep(300);
      }
    }
    report.drainMs = Date.now() - drainStarted;
    finished.on = true;
    await monitor;
    report.indexerRequests += lambdaProxy.requests;
    for (const k of FAULT_KINDS) report.faults[k] += lambdaProxy.faults[k];

    // At the quiet end: each layout's truth equals the listing; client fields survive; nothing left behind.
    const listing = new Map<string, number>();
    for await (const page of direct.listPages({ prefix: '' })) for (const o of page.objects) listing.set(o.key, o.size);
    for (const root of roots) {
      const base = `${root}/`;
      const layout = layoutOf[root];
      const truth = await readTruth(direct, base, layout);
      if (truth.problem) report.finalMismatch.push(`${root}: ${truth.problem}`);
      const expected = new Map<string, number>();
      for (const [key, size] of listing) {
        if (!key.startsWith(base)) continue;
        const rel = key.slice(base.length);
        if (isInternalKey(rel)) continue;
        if (layout === 'shard-first' && partitionOf(rel) === undefined) continue;
        expected.set(rel, size);
      }
      for (const [rel, size] of expected) {
        const e = truth.entries.get(rel);
        if (!e) report.finalMismatch.push(`${root}/${rel}: missing from the ${layout} index`);
        else if (e.size !== size) report.finalMismatch.push(`${root}/${rel}: size ${e.size} in the index, ${size} in S3`);
      }
      for (const rel of truth.entries.keys()) if (!expected.has(rel)) report.finalMismatch.push(`${root}/${rel}: indexed but not in S3`);
      report.finalEntries += truth.entries.size;
      if (listing.has(base + LOCK_KEY)) report.leftovers.push(`${base + LOCK_KEY} still held`);
      // No half-written shard set: no publish intent left, and every partition file is one the manifest lists.
      for (const key of listing.keys())
        if (key.startsWith(`${base}_control/datastore-indexer/publishing/`)) report.leftovers.push(`${key}: a publish intent left behind`);
      // (A dual-write partition file the manifest no longer lists is harmless: the monolith is the truth there.)
      if (layout === 'shard-first') {
        const metaObj = await direct.get(base + SHARD_META_KEY);
        const listed = new Set(metaObj ? ((JSON.parse(metaObj.body.toString('utf8')) as { partitions?: string[] }).partitions ?? []) : []);
        for (const key of listing.keys()) {
          const m = key.startsWith(`${base}_index/`) ? /^([^/]+)\.json$/.exec(key.slice(base.length + '_index/'.length)) : null;
          if (m && m[1] !== '_meta' && !listed.has(m[1])) report.leftovers.push(`${key}: a partition file the manifest does not list`);
        }
      }
      if (layout === 'dual-write') {
        // A scoped pull reads the partition files: each listed one must mirror the monolith's entries.
        const metaObj = await direct.get(base + SHARD_META_KEY);
        const meta = metaObj ? (JSON.parse(metaObj.body.toString('utf8')) as { version?: number; partitions?: string[] }) : undefined;
        if (meta?.version !== 1) report.leftovers.push(`${root}: the dual-write manifest became ${JSON.stringify(meta)}`);
        for (const p of meta?.partitions ?? []) {
          const part = await direct.get(`${base}_index/${p}.json`);
          const got = part ? Object.keys((JSON.parse(part.body.toString('utf8')) as { entries?: object }).entries ?? {}).sort() : [];
          const want = [...truth.entries.keys()].filter((rel) => partitionOf(rel) === p).sort();
          if (JSON.stringify(got) !== JSON.stringify(want))
            report.finalMismatch.push(`${root}: partition ${p} mirrors ${got.length} entries, the monolith has ${want.length}`);
        }
      }
    }
    for (const p of published.values()) {
      const truth = await readTruth(direct, `${p.root}/`, p.layout);
      const e = truth.entries.get(p.rel);
      if (!e) continue; // already counted as a mismatch
      for (const field of ['sha256', 'localMtime', 'simTag'] as const) {
        if (e[field] !== p.entry[field] && e.size === p.entry.size)
          report.lostFields.push(
            `${p.root}/${p.rel}: ${field} ${JSON.stringify(e[field])}, the client wrote ${JSON.stringify(p.entry[field])}`,
          );
      }
    }
    report.pushes = stats.pushes;
    report.uploads = stats.uploads;
    report.clientDeletes = stats.deletes;
    report.oobOps = stats.oobOps;
    report.maxLockWaitMs = Math.max(0, ...stats.lockWaitsMs);
    // A wait that ended after a kill and began at most one indexer lock ttl (10 s) after it: what a killed indexer costs clients.
    report.maxLockWaitAfterKillMs = Math.max(
      0,
      ...stats.lockWaitsMs.filter((ms, i) =>
        killTimes.some((t) => t <= stats.lockWaitStarts[i] + ms && stats.lockWaitStarts[i] <= t + 10_000),
      ),
    );
    report.lockTimeouts = stats.lockTimeouts;
    report.clientErrors = stats.errors;
    report.ok = problemsOf(report).length === 0 && report.lockTimeouts === 0;
    return report;
  } finally {
    for (const c of children) c.kill('SIGKILL');
    worker?.stop();
    await Promise.all(proxies.map((p) => p.close()));
    direct.client.destroy();
    sqs.destroy();
    moto.stop();
    rmSync(own, { recursive: true, force: true });
  }
}

/** Every broken invariant a run reported, one line each (lock timeouts are counted apart). */
export function problemsOf(report: ChaosReport): string[] {
  return [
    ...report.vanished,
    ...report.lostFields,
    ...report.finalMismatch,
    ...report.leftovers,
    ...report.crashesWithoutMessage,
    ...report.clientErrors,
  ];
}

/** The command that replays a seed. */
export function replayCommand(options: ChaosOptions): string {
  const flags = [`--seed ${options.seed}`, `--seconds ${options.seconds}`];
  if (options.faults === false) flags.push('--no-faults');
  if (options.kills === false) flags.push('--no-kills');
  return `npm run chaos -- ${flags.join(' ')}`;
}

export { seededRng, type Rng };

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
        rows.push({ layout, step, killed, clientWaitMs, nextExit, healed: detail.length === 0 && nextExit === 0, detail });
        log(
          `${layout} ${step}: killed ${killed}, client waited ${(clientWaitMs / 1000).toFixed(1)} s, next run exit ${nextExit}, ${detail.length ? detail.join('; ') : 'healed'}`,
        );
      }
    }
    return rows;
  } finally {
    direct.client.destroy();
    moto.stop();
  }
}
