/**
 * A loopback HTTP server speaking the part of the S3 REST API a heal uses,
 * path-style only, for the benchmark: listings cost O(log n + page) at any
 * bucket size, every request waits a fixed latency (like a network round
 * trip to S3) and requests are never serialised, so concurrency pays off as
 * it does against real S3. Authorization is not checked.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { md5Hex } from './checksum';
import { S3Error } from './errors';
import { Handlers, type Answer } from './handlers';
import { S3_OPERATIONS, operationOf, parseTarget, type RequestCounts } from './routing';
import { seedBucket, type SeedOptions, type SeedResult } from './seed';
import { Store, type StoredObject } from './store';
import { errorXml } from './xml';
import { sleep } from '../sleep';

export { S3_OPERATIONS, type RequestCounts, type S3Operation } from './routing';
export type { SeedLayout, SeedOptions, SeedResult } from './seed';

export interface S3ModelOptions {
  /** 0 (the default) picks a free port. The server binds 127.0.0.1 only. */
  readonly port?: number;
  /** Delay before every answer, in ms; default 30, about a same-region S3 round trip. */
  readonly latencyMs?: number;
  /** Called after every PutObject and DeleteObject that succeeded, as S3 would then send an event. */
  readonly onWrite?: (write: ObjectWrite) => void;
}

/** A write the model applied: what an S3 event notification describes. */
export interface ObjectWrite {
  readonly op: 'PutObject' | 'DeleteObject';
  readonly bucket: string;
  readonly key: string;
  /** When it was applied (ms since the epoch). */
  readonly timeMs: number;
  /** The stored object (a PutObject's), body included. */
  readonly object?: StoredObject;
}

export interface S3Model {
  /** `http://127.0.0.1:<port>`, for an S3 client with `forcePathStyle: true`. */
  readonly endpoint: string;
  readonly latencyMs: number;
  /** Adds synthetic objects to `bucket`, creating the bucket if needed. Synchronous. */
  seed(bucket: string, options: SeedOptions): SeedResult;
  /** Requests answered (or failed) per operation since start or the last reset. */
  requestCounts(): RequestCounts;
  resetCounts(): void;
  /** The most requests that were waiting out their latency at one time, since start. */
  peakWaiting(): number;
  stop(): Promise<void>;
}

/** Bodies are held in memory; anything bigger is not what this model is for. */
const MAX_BODY_BYTES = 256 * 1024 * 1024;
const HOST_ID = 's3-model';
/** Operations that change nothing: answered from the state at their arrival. */
const READS: ReadonlySet<string> = new Set(['ListObjectsV2', 'GetObject', 'HeadObject', 'HeadBucket']);

/** Runs `work` now; what it returned, or threw, comes out of the function it returns. */
function attempt<T>(work: () => T): () => T {
  try {
    const value = work();
    return () => value;
  } catch (error) {
    return () => {
      throw error;
    };
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new S3Error(400, 'EntityTooLarge', 'Your proposed upload exceeds the maximum allowed size'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

export async function startS3Model(options: S3ModelOptions = {}): Promise<S3Model> {
  const latencyMs = Math.max(0, options.latencyMs ?? 30);
  const store = new Store();
  const handlers = new Handlers(store);
  const zeroCounts = (): RequestCounts => Object.fromEntries(S3_OPERATIONS.map((op) => [op, 0])) as RequestCounts;
  let counts = zeroCounts();
  let requestSeq = 0;
  let waiting = 0;
  let peakWaiting = 0;
  /** Waits `ms` as one of the requests waiting out their latency. */
  const wait = async (ms: number): Promise<void> => {
    peakWaiting = Math.max(peakWaiting, ++waiting);
    try {
      if (ms > 0) await sleep(ms);
    } finally {
      waiting--;
    }
  };

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const requestId = (++requestSeq).toString(16).toUpperCase().padStart(16, '0');
    const method = req.method ?? 'GET';
    let answer: Answer;
    try {
      const { bucket, key, query } = parseTarget(req.url ?? '/');
      const op = bucket === '' ? 'Unsupported' : operationOf(method, key, query);
      counts[op]++;
      const body = await readBody(req);
      const parsed = { method, bucket, key, query, headers: req.headers, body };
      // Every request waits the same fixed time, concurrently with all others: a timer, never a queue,
      // so N parallel requests take one latency, not N. A read is answered from the state it arrived
      // to, its answer built while it waits, so building many pages at once does not queue them
      // behind one another; a write takes effect when its wait ends, its body hashed while it waits.
      const arrived = performance.now();
      const built = READS.has(op) ? attempt(() => handlers.handle(op, parsed)) : undefined;
      if (op === 'PutObject') md5Hex(body);
      await wait(latencyMs - (performance.now() - arrived));
      answer = built ? built() : handlers.handle(op, parsed);
      if (options.onWrite && key !== null && answer.status < 300 && (op === 'PutObject' || op === 'DeleteObject')) {
        options.onWrite({ op, bucket, key, timeMs: Date.now(), object: op === 'PutObject' ? store.bucket(bucket)?.get(key) : undefined });
      }
    } catch (error) {
      const e = error instanceof S3Error ? error : new S3Error(500, 'InternalError', String(error));
      answer = {
        status: e.status,
        headers: { 'content-type': 'application/xml' },
        body: errorXml(e.code, e.message, e.fields, requestId, HOST_ID),
      };
    }
    const body = typeof answer.body === 'string' ? Buffer.from(answer.body, 'utf8') : answer.body;
    res.statusCode = answer.status;
    for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('x-amz-id-2', HOST_ID);
    res.setHeader('server', 'AmazonS3');
    // HEAD answers carry the object's length but never a body, errors included (as S3).
    if (!res.hasHeader('content-length')) res.setHeader('content-length', method === 'HEAD' ? 0 : body.length);
    res.end(method === 'HEAD' ? undefined : body);
  };

  const server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      res.destroy(error instanceof Error ? error : new Error(String(error)));
    });
  });
  // Longer than the SDK keeps idle sockets, so a reused socket is never closed under a request.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    latencyMs,
    seed(bucketName: string, seedOptions: SeedOptions): SeedResult {
      return seedBucket(store.createBucket(bucketName, Date.now()), seedOptions);
    },
    requestCounts: () => ({ ...counts }),
    peakWaiting: () => peakWaiting,
    resetCounts: () => {
      counts = zeroCounts();
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
