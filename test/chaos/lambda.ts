/**
 * The bundled Lambda in a chaos run: one worker process, fed what moto sent to SQS as the event source
 * would deliver it, but duplicated, reordered, and with failed items (or a killed batch) delivered again.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { DeleteMessageBatchCommand, type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { FaultProxy } from './fault-proxy';
import type { Killer } from './kills';
import type { Rng } from './rng';
import { noteIndexerError } from './report';
import { type Cast, type ChaosRun, ROOTS, startProxy } from './setup';

const WORKER = join(__dirname, 'lambda-worker.cjs');

/** The handler's answer to one event. */
type WorkerAnswer = { ok: boolean; result?: { batchItemFailures?: { itemIdentifier: string }[] }; error?: string };

/** A Lambda worker process (the bundle), answering one SQS event at a time. */
export class LambdaWorker {
  private child!: ChildProcess;
  private pending: ((answer: WorkerAnswer | undefined) => void) | undefined;
  private buffer = '';
  output = '';

  /**
   * @param onError hears the error of each log line that carries one (a failed root's, a failed
   * invocation's), by the name the handler logged.
   */
  constructor(
    private readonly bundle: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly onError: (name: string, message: string) => void = () => undefined,
  ) {
    this.start();
  }

  private start(): void {
    this.child = spawn(process.execPath, [WORKER, this.bundle], { env: this.env, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    this.buffer = '';
    const keep = (c: Buffer) => (this.output = (this.output + c.toString()).slice(-20_000));
    // Powertools writes warnings and errors to stderr, metrics to stdout: read both, a partial line per stream.
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      let partial = '';
      stream.on('data', (c: Buffer) => {
        keep(c);
        partial = this.readLog(partial + c.toString());
      });
    }
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

  /** Reads the handler's complete JSON log lines in `text` for the errors they carry; returns the partial last line. */
  private readLog(text: string): string {
    const lines = text.split('\n');
    const partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      let entry: { error?: { name?: unknown; message?: unknown } };
      try {
        entry = JSON.parse(line);
      } catch {
        continue;
      }
      if (typeof entry.error?.name === 'string') this.onError(entry.error.name, String(entry.error.message));
    }
    return partial;
  }

  /** The handler's answer, or undefined when the process died (killed) first. */
  invoke(event: unknown): Promise<WorkerAnswer | undefined> {
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

/** Moves what moto sent to SQS into a local delivery queue and hands it to the worker in batches. */
export class LambdaFeeder {
  /** Deliveries not yet handed to the Lambda, in the order it gets them. */
  readonly queue: Delivery[] = [];
  /** When the Lambda last got a batch. */
  lastWork = Date.now();
  private deliveryId = 0;

  constructor(
    private readonly run: ChaosRun,
    private readonly worker: LambdaWorker,
    /** The fault proxy the Lambda's S3 requests go through. */
    readonly proxy: FaultProxy,
    private readonly queueUrl: string,
    private readonly rng: Rng,
    private readonly killer: Killer,
  ) {}

  /** Receives up to 10 messages and queues them at random places (some twice, while writers run); returns how many. */
  async receive(): Promise<number> {
    const { sqs, quiet } = this.run;
    const QueueUrl = this.queueUrl;
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
        this.queue.splice(this.rng.int(this.queue.length + 1), 0, d);
        if (!quiet.on && this.rng.chance(0.15)) this.queue.splice(this.rng.int(this.queue.length + 1), 0, { ...d, id: `${d.id}-dup` });
      }
    }
    return messages.length;
  }

  /**
   * Hands the Lambda one batch, sometimes killing it meanwhile: 1-40 records while writers run, 100 while
   * draining (the stack's event source batches up to 1000). Failed items and a killed batch are queued again.
   */
  async batch(): Promise<void> {
    const { report, quiet } = this.run;
    const batch = this.queue.splice(0, quiet.on ? 100 : 1 + this.rng.int(40));
    if (!batch.length) return;
    this.lastWork = Date.now();
    const event = { Records: batch.map((d) => recordOf({ ...d, id: `${d.id}#${this.deliveryId++}` })) };
    const ids = new Map(event.Records.map((r, i) => [r.messageId, batch[i]]));
    this.worker.restartIfDead();
    const disarm = this.killer.arm(this.proxy, () => this.worker.kill(), 'lambda');
    const answer = await this.worker.invoke(event);
    disarm();
    report.lambdaBatches++;
    report.lambdaRecords += batch.length;
    if (!answer) {
      // Killed: the whole batch comes back after its visibility timeout.
      for (const d of batch) this.queue.push({ ...d, receiveCount: d.receiveCount + 1 });
      return;
    }
    if (!answer.ok) {
      report.crashesWithoutMessage.push(`lambda threw: ${answer.error}`);
      for (const d of batch) this.queue.push({ ...d, receiveCount: d.receiveCount + 1 });
      return;
    }
    for (const f of answer.result?.batchItemFailures ?? []) {
      report.itemFailures++;
      const d = ids.get(f.itemIdentifier);
      if (d) this.queue.push({ ...d, receiveCount: d.receiveCount + 1 });
    }
  }
}

/** Starts the bundled Lambda as the stack configures it, its S3 requests through a fault proxy of its own, and its feeder. */
export async function startLambda(run: ChaosRun, cast: Cast, queueUrl: string): Promise<LambdaFeeder> {
  const proxy = await startProxy(run, cast.faultRng, 'lambda');
  const worker = new LambdaWorker(
    run.bundle,
    {
      ...process.env,
      DATASTORE_BUCKET: run.direct.bucket,
      DATASTORE_PREFIXES: ROOTS.join(','),
      DATASTORE_QUEUE_URL: queueUrl,
      DATASTORE_FORCE_PATH_STYLE: 'true',
      DATASTORE_RECHECK_DELAY_SECONDS: '1',
      DATASTORE_FINISH_DELAY_SECONDS: '1',
      DATASTORE_LOCK_WAIT_SECONDS: '5',
      DATASTORE_REPAIR_RESERVE_SECONDS: '60',
      AWS_ENDPOINT_URL_S3: proxy.endpoint,
      AWS_ENDPOINT_URL_SQS: run.moto.endpoint,
      POWERTOOLS_LOG_LEVEL: 'WARN',
    },
    (name, message) => noteIndexerError(run.report, 'lambda', name, message),
  );
  run.worker = worker;
  return new LambdaFeeder(run, worker, proxy, queueUrl, cast.deliveryRng, cast.killer);
}
