/**
 * A loopback SQS model for the freshness benchmark (never used by the product): the part of the SQS
 * API (AWS JSON 1.0 protocol, as @aws-sdk/client-sqs speaks it) that S3 notifications, the emulated
 * event source and the Lambda's own re-checks use, with SQS's semantics for them: visibility timeout,
 * `ApproximateReceiveCount`, `DelaySeconds`, long polling, and a redrive policy that moves a message
 * to its dead-letter queue once it has been received `maxReceiveCount` times.
 *
 * Why not moto: moto's SQS scans and deep-copies its whole message list on every receive and delete,
 * so a queue of thousands of messages drains slowly and the benchmark would measure moto. Every request
 * here waits `latencyMs` (SQS answers in about 10 ms).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sleep } from '../support/sleep';

interface StoredMessage {
  readonly id: string;
  readonly body: string;
  readonly md5: string;
  readonly sentMs: number;
  /** When it may be received (delay, then visibility timeout). */
  visibleAtMs: number;
  receiveCount: number;
  firstReceiveMs?: number;
  /** The handle of its latest receive; older handles no longer delete it. */
  handle?: string;
}

interface QueueState {
  readonly name: string;
  readonly url: string;
  readonly arn: string;
  visibilityTimeoutS: number;
  redrive?: { deadLetterTargetArn: string; maxReceiveCount: number };
  /** In send order. */
  messages: StoredMessage[];
}

/** A running SQS model. */
export interface SqsModel {
  readonly endpoint: string;
  stop(): Promise<void>;
}

class SqsError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A request body: the fields of one SQS operation's input, as the SDK sends them. */
interface Input {
  readonly QueueUrl?: string;
  readonly QueueName?: string;
  readonly Attributes?: Record<string, string>;
  readonly AttributeNames?: string[];
  readonly MessageBody?: string;
  readonly DelaySeconds?: number;
  readonly Entries?: unknown[];
  readonly MaxNumberOfMessages?: number;
  readonly WaitTimeSeconds?: number;
  readonly VisibilityTimeout?: number;
  readonly ReceiptHandle?: string;
}

const md5 = (text: string): string => createHash('md5').update(text, 'utf8').digest('hex');

/** Starts the model on 127.0.0.1 (a free port unless `port` is given). */
export async function startSqsModel(options: { port?: number; latencyMs?: number; accountId?: string } = {}): Promise<SqsModel> {
  const latencyMs = options.latencyMs ?? 10;
  const account = options.accountId ?? '123456789012';
  const queues = new Map<string, QueueState>();
  let endpoint = '';

  const queueOf = (url: unknown): QueueState => {
    const name = typeof url === 'string' ? (url.split('/').pop() ?? '') : '';
    const queue = queues.get(name);
    if (!queue) throw new SqsError('AWS.SimpleQueueService.NonExistentQueue', `The specified queue does not exist: ${String(url)}`);
    return queue;
  };
  const byArn = (arn: string): QueueState | undefined => [...queues.values()].find((q) => q.arn === arn);

  const receive = (queue: QueueState, max: number, visibilityS: number): StoredMessage[] => {
    const now = Date.now();
    const out: StoredMessage[] = [];
    const dead: StoredMessage[] = [];
    for (const m of queue.messages) {
      if (out.length >= max) break;
      if (m.visibleAtMs > now) continue;
      if (queue.redrive && m.receiveCount >= queue.redrive.maxReceiveCount) {
        dead.push(m);
        continue;
      }
      m.receiveCount++;
      m.firstReceiveMs ??= now;
      m.visibleAtMs = now + visibilityS * 1000;
      m.handle = `${m.id}#${m.receiveCount}#${randomUUID()}`;
      out.push(m);
    }
    if (dead.length) {
      const target = byArn(queue.redrive!.deadLetterTargetArn);
      queue.messages = queue.messages.filter((m) => !dead.includes(m));
      for (const m of dead)
        target?.messages.push({ ...m, receiveCount: 0, visibleAtMs: now, handle: undefined, firstReceiveMs: undefined });
    }
    return out;
  };

  const remove = (queue: QueueState, handle: unknown): boolean => {
    const index = queue.messages.findIndex((m) => m.handle === handle);
    if (index < 0) return false;
    queue.messages.splice(index, 1);
    return true;
  };

  const send = (queue: QueueState, body: unknown, delayS: unknown): { MessageId: string; MD5OfMessageBody: string } => {
    if (typeof body !== 'string' || body === '')
      throw new SqsError('MissingParameter', 'The request must contain the parameter MessageBody.');
    const now = Date.now();
    const message: StoredMessage = {
      id: randomUUID(),
      body,
      md5: md5(body),
      sentMs: now,
      visibleAtMs: now + (Number(delayS) || 0) * 1000,
      receiveCount: 0,
    };
    queue.messages.push(message);
    return { MessageId: message.id, MD5OfMessageBody: message.md5 };
  };

  const operations: Record<string, (input: Input) => Promise<unknown> | unknown> = {
    CreateQueue(input) {
      const name = String(input.QueueName);
      let queue = queues.get(name);
      if (!queue) {
        queue = {
          name,
          url: `${endpoint}/${account}/${name}`,
          arn: `arn:aws:sqs:us-east-1:${account}:${name}`,
          visibilityTimeoutS: 30,
          messages: [],
        };
        queues.set(name, queue);
      }
      const attributes = (input.Attributes ?? {}) as Record<string, string>;
      if (attributes.VisibilityTimeout !== undefined) queue.visibilityTimeoutS = Number(attributes.VisibilityTimeout);
      if (attributes.RedrivePolicy) {
        const policy = JSON.parse(attributes.RedrivePolicy) as { deadLetterTargetArn: string; maxReceiveCount: number | string };
        queue.redrive = { deadLetterTargetArn: policy.deadLetterTargetArn, maxReceiveCount: Number(policy.maxReceiveCount) };
      }
      return { QueueUrl: queue.url };
    },
    GetQueueAttributes(input) {
      const queue = queueOf(input.QueueUrl);
      const now = Date.now();
      const visible = queue.messages.filter((m) => m.visibleAtMs <= now).length;
      const inFlight = queue.messages.filter((m) => m.visibleAtMs > now && m.receiveCount > 0).length;
      const all: Record<string, string> = {
        QueueArn: queue.arn,
        VisibilityTimeout: String(queue.visibilityTimeoutS),
        ApproximateNumberOfMessages: String(visible),
        ApproximateNumberOfMessagesNotVisible: String(inFlight),
        ApproximateNumberOfMessagesDelayed: String(queue.messages.length - visible - inFlight),
      };
      const names = (input.AttributeNames ?? ['All']) as string[];
      return { Attributes: names.includes('All') ? all : Object.fromEntries(names.filter((n) => n in all).map((n) => [n, all[n]])) };
    },
    SendMessage(input) {
      return send(queueOf(input.QueueUrl), input.MessageBody, input.DelaySeconds);
    },
    SendMessageBatch(input) {
      const queue = queueOf(input.QueueUrl);
      const entries = (input.Entries ?? []) as { Id: string; MessageBody: string; DelaySeconds?: number }[];
      return { Successful: entries.map((e) => ({ Id: e.Id, ...send(queue, e.MessageBody, e.DelaySeconds) })), Failed: [] };
    },
    async ReceiveMessage(input) {
      const queue = queueOf(input.QueueUrl);
      const max = Math.min(10, Math.max(1, Number(input.MaxNumberOfMessages ?? 1)));
      const visibilityS = input.VisibilityTimeout !== undefined ? Number(input.VisibilityTimeout) : queue.visibilityTimeoutS;
      const deadline = Date.now() + Math.min(20, Number(input.WaitTimeSeconds ?? 0)) * 1000;
      let got = receive(queue, max, visibilityS);
      while (!got.length && Date.now() < deadline) {
        await sleep(20);
        got = receive(queue, max, visibilityS);
      }
      return {
        Messages: got.map((m) => ({
          MessageId: m.id,
          ReceiptHandle: m.handle,
          MD5OfBody: m.md5,
          Body: m.body,
          Attributes: {
            ApproximateReceiveCount: String(m.receiveCount),
            SentTimestamp: String(m.sentMs),
            ApproximateFirstReceiveTimestamp: String(m.firstReceiveMs ?? m.sentMs),
            SenderId: 'AIDAEXAMPLE',
          },
        })),
      };
    },
    DeleteMessage(input) {
      remove(queueOf(input.QueueUrl), input.ReceiptHandle);
      return {};
    },
    DeleteMessageBatch(input) {
      const queue = queueOf(input.QueueUrl);
      const entries = (input.Entries ?? []) as { Id: string; ReceiptHandle: string }[];
      for (const e of entries) remove(queue, e.ReceiptHandle);
      // SQS answers success for a handle whose message is already gone.
      return { Successful: entries.map((e) => ({ Id: e.Id })), Failed: [] };
    },
    ChangeMessageVisibilityBatch(input) {
      const queue = queueOf(input.QueueUrl);
      const entries = (input.Entries ?? []) as { Id: string; ReceiptHandle: string; VisibilityTimeout: number }[];
      for (const e of entries) {
        const m = queue.messages.find((x) => x.handle === e.ReceiptHandle);
        if (m) m.visibleAtMs = Date.now() + Number(e.VisibilityTimeout) * 1000;
      }
      return { Successful: entries.map((e) => ({ Id: e.Id })), Failed: [] };
    },
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (latencyMs > 0) await sleep(latencyMs);
    const target = String(req.headers['x-amz-target'] ?? '');
    const op = operations[target.replace(/^AmazonSQS\./, '')];
    let status = 200;
    let body: unknown;
    try {
      if (!op) throw new SqsError('UnsupportedOperation', `${target || req.method} is not modelled`);
      body = await op(chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Input) : {});
    } catch (err) {
      status = 400;
      const e = err instanceof SqsError ? err : new SqsError('InternalError', String(err));
      body = { __type: `com.amazonaws.sqs#${e.code}`, message: e.message };
    }
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/x-amz-json-1.0',
      'content-length': Buffer.byteLength(text),
      'x-amzn-requestid': randomUUID(),
    });
    res.end(text);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))));
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    endpoint,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
