/**
 * The S3 model as a child process of the freshness benchmark (`bench/freshness.ts`), with what the
 * model itself does not do (see support/s3-model/README.md): it sends an S3 event notification to an SQS
 * queue (bench/sqs-model.ts, or moto) for each write under a watched root, as S3 does for a bucket whose notifications go to
 * the indexer's queue, and it keeps a log of the writes that make an index (the monolith, `_index/`
 * files), so that freshness can be measured afterwards as the model saw it.
 */
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { INDEX_KEY, SHARD_DIR, SHARD_META_KEY } from '../lambda/lib/names';
import { isInternalKey, partitionOf } from '../lambda/lib/keys';
import type { HostReply } from './host';
import { type ObjectWrite, startS3Model } from '../support/s3-model/server';
import type { SeedOptions } from '../support/s3-model/seed';
import { sleep } from '../support/sleep';

/** A request from the benchmark. */
export type EventHostRequest =
  | { readonly id: number; readonly op: 'seed'; readonly bucket: string; readonly options: SeedOptions }
  | {
      readonly id: number;
      readonly op: 'notify';
      readonly bucket: string;
      readonly prefix: string;
      readonly queueUrl: string;
      readonly sqsEndpoint: string;
    }
  | { readonly id: number; readonly op: 'reset'; readonly marker: string }
  | { readonly id: number; readonly op: 'freshness'; readonly keys: string[] }
  | { readonly id: number; readonly op: 'counts' | 'stop' };

/** What the model saw of one burst since the last reset. */
export interface WriteStats {
  readonly requests: Record<string, number>;
  /** Bytes of every PutObject body to an internal key (index, shards, lock, `_control/`): the indexer's writes. */
  readonly internalBytesWritten: number;
  readonly internalPuts: number;
  /** Notifications sent to the queue. */
  readonly notifications: number;
}

/** Per key: when its PutObject was applied, and when the first index that holds it was committed (ms since the epoch). */
export interface KeyFreshness {
  readonly key: string;
  readonly putMs?: number;
  readonly indexedMs?: number;
}

/** S3 encodes a notification's key like a form value: a space as `+`, `/` kept. */
function encodeEventKey(key: string): string {
  return encodeURIComponent(key).replace(/%20/g, '+').replace(/%2F/gi, '/');
}

let sequence = 0n;
/** S3's sequencer: hex, larger for a later event on the same key. */
const nextSequencer = (): string => (++sequence + 0x62e99a88dc407460n).toString(16).toUpperCase().padStart(18, '0');

/** The notification S3 sends for one write, as the body of one SQS message. */
export function notificationOf(write: ObjectWrite, region = 'us-east-1'): string {
  const created = write.op === 'PutObject';
  const object: Record<string, unknown> = { key: encodeEventKey(write.key) };
  if (created && write.object) {
    object.size = write.object.size;
    object.eTag = write.object.etag.replace(/"/g, '');
  }
  object.sequencer = nextSequencer();
  return JSON.stringify({
    Records: [
      {
        eventVersion: '2.1',
        eventSource: 'aws:s3',
        awsRegion: region,
        eventTime: new Date(write.timeMs).toISOString(),
        eventName: created ? 'ObjectCreated:Put' : 'ObjectRemoved:Delete',
        userIdentity: { principalId: 'AWS:AIDAEXAMPLE' },
        requestParameters: { sourceIPAddress: '127.0.0.1' },
        responseElements: { 'x-amz-request-id': 'C3D13FE58DE4C810', 'x-amz-id-2': 's3-model' },
        s3: {
          s3SchemaVersion: '1.0',
          configurationId: 'datastore-indexer',
          bucket: { name: write.bucket, ownerIdentity: { principalId: 'A3NL1KOZZKExample' }, arn: `arn:aws:s3:::${write.bucket}` },
          object,
        },
      },
    ],
  });
}

interface Watch {
  readonly bucket: string;
  /** `<prefix>/`. */
  readonly base: string;
  readonly queueUrl: string;
  readonly sqs: SQSClient;
}

async function main(): Promise<void> {
  let watch: Watch | undefined;
  const outbox: string[] = [];
  let flushing: Promise<void> | undefined;
  let stats = { internalBytesWritten: 0, internalPuts: 0, notifications: 0 };
  /**
   * Writes of index files under the watched root, in order, each with the burst's keys it holds (found
   * by a text search for the burst's marker, so that large indexes are never kept or parsed here).
   */
  let indexWrites: { key: string; timeMs: number; rels: Set<string>; meta?: Set<string> }[] = [];
  let marker: RegExp | undefined;
  let putTimes = new Map<string, number>();

  // S3 sends each event as its own message; they are batched ten to a request only to spare moto.
  const flush = async (): Promise<void> => {
    while (watch && outbox.length) {
      const chunk = outbox.splice(0, 10);
      await watch.sqs.send(
        new SendMessageBatchCommand({ QueueUrl: watch.queueUrl, Entries: chunk.map((body, i) => ({ Id: String(i), MessageBody: body })) }),
      );
    }
  };
  const schedule = (): void => {
    if (flushing) return;
    flushing = sleep(10)
      .then(flush)
      .catch((err: unknown) => void process.stderr.write(`event-host: sending notifications failed: ${String(err)}\n`))
      .finally(() => {
        flushing = undefined;
        if (outbox.length) schedule();
      });
  };

  const indexWriteOf = (rel: string, timeMs: number, body: Buffer): (typeof indexWrites)[number] => {
    const text = body.toString('utf8');
    if (rel === SHARD_META_KEY) {
      const meta = JSON.parse(text) as { version?: number; partitions?: string[] };
      return { key: rel, timeMs, rels: new Set(), meta: new Set(meta.version === 2 ? (meta.partitions ?? []) : []) };
    }
    const rels = new Set<string>();
    if (marker) for (const m of text.matchAll(marker)) rels.add(m[1]);
    return { key: rel, timeMs, rels };
  };

  const onWrite = (write: ObjectWrite): void => {
    if (!watch || write.bucket !== watch.bucket || !write.key.startsWith(watch.base)) return;
    const rel = write.key.slice(watch.base.length);
    if (write.op === 'PutObject') {
      if (isInternalKey(rel)) {
        stats.internalBytesWritten += write.object?.size ?? 0;
        stats.internalPuts++;
        if ((rel === INDEX_KEY || rel.startsWith(SHARD_DIR)) && write.object?.body)
          indexWrites.push(indexWriteOf(rel, write.timeMs, write.object.body));
      } else if (!putTimes.has(rel)) {
        putTimes.set(rel, write.timeMs);
      }
    }
    outbox.push(notificationOf(write));
    stats.notifications++;
    schedule();
  };

  const model = await startS3Model({ latencyMs: Number(process.argv[2] ?? 30), onWrite });
  const send = (reply: HostReply): void => void process.send?.(reply);

  /** Replays the index writes: a monolith write commits its entries, a `_meta.json` write commits the partitions it lists. */
  const freshness = (keys: readonly string[]): KeyFreshness[] => {
    const pending = new Set(keys);
    const indexed = new Map<string, number>();
    const partitions = new Map<string, Set<string>>();
    for (const write of indexWrites) {
      if (!pending.size) break;
      let holds: (rel: string) => boolean;
      if (write.key === INDEX_KEY) holds = (rel) => write.rels.has(rel);
      else if (write.meta)
        holds = (rel) => write.meta!.has(partitionOf(rel) ?? '') && (partitions.get(partitionOf(rel) ?? '')?.has(rel) ?? false);
      else {
        partitions.set(write.key.slice(SHARD_DIR.length).replace(/\.json$/, ''), write.rels);
        continue;
      }
      for (const rel of pending) {
        if (holds(rel)) {
          indexed.set(rel, write.timeMs);
          pending.delete(rel);
        }
      }
    }
    return keys.map((key) => ({ key, putMs: putTimes.get(key), indexedMs: indexed.get(key) }));
  };

  process.on('message', (request: EventHostRequest) => {
    void (async () => {
      try {
        switch (request.op) {
          case 'seed':
            return send({ id: request.id, result: model.seed(request.bucket, request.options) });
          case 'notify':
            watch?.sqs.destroy();
            watch = {
              bucket: request.bucket,
              base: request.prefix ? `${request.prefix}/` : '',
              queueUrl: request.queueUrl,
              sqs: new SQSClient({ endpoint: request.sqsEndpoint, region: process.env.AWS_REGION ?? 'us-east-1' }),
            };
            return send({ id: request.id, result: null });
          case 'counts': {
            const result: WriteStats = { requests: model.requestCounts(), ...stats };
            return send({ id: request.id, result });
          }
          case 'reset':
            await flushing;
            model.resetCounts();
            stats = { internalBytesWritten: 0, internalPuts: 0, notifications: 0 };
            indexWrites = [];
            putTimes = new Map();
            // Keys of the burst are plain ASCII under the marker folder: no JSON escapes to undo.
            marker = new RegExp(`"(${request.marker.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^"]*)"`, 'g');
            return send({ id: request.id, result: null });
          case 'freshness':
            return send({ id: request.id, result: freshness(request.keys) });
          case 'stop':
            await model.stop();
            send({ id: request.id, result: null });
            return process.exit(0);
        }
      } catch (err) {
        send({ id: request.id, error: err instanceof Error ? err.message : String(err) });
      }
    })();
  });
  send({ id: 0, result: { endpoint: model.endpoint } });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
