/**
 * A loopback HTTP server speaking the part of the S3 REST API a heal uses,
 * path-style only, for the benchmark: listings cost O(log n + page) at any
 * bucket size, every request waits a fixed latency (like a network round
 * trip to S3) and requests are never serialised, so concurrency pays off as
 * it does against real S3. Authorization is not checked.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeAwsChunked } from './chunked';
import { findChecksum, verifyBody } from './checksum';
import {
  S3Error,
  invalidArgument,
  invalidBucketName,
  invalidRange,
  noSuchBucket,
  noSuchKey,
  notImplemented,
  preconditionFailed,
} from './errors';
import { seedBucket, type SeedOptions, type SeedResult } from './seed';
import { Store, StoredObject, type Bucket, type ResumePoint, type StoredChecksum } from './store';
import { syntheticBody } from './synthetic';
import { errorXml, listBucketResultXml } from './xml';

/** The operations the model counts; anything else it answers 501 and counts as Unsupported. */
export const S3_OPERATIONS = [
  'ListObjectsV2',
  'GetObject',
  'HeadObject',
  'PutObject',
  'DeleteObject',
  'CreateBucket',
  'HeadBucket',
  'DeleteBucket',
  'Unsupported',
] as const;
export type S3Operation = (typeof S3_OPERATIONS)[number];
export type RequestCounts = Record<S3Operation, number>;

export interface S3ModelOptions {
  /** 0 (the default) picks a free port. The server binds 127.0.0.1 only. */
  readonly port?: number;
  /** Delay before every answer, in ms; default 30, about a same-region S3 round trip. */
  readonly latencyMs?: number;
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
  stop(): Promise<void>;
}

const MAX_LIST_KEYS = 1000;
/** Bodies are held in memory; anything bigger is not what this model is for. */
const MAX_BODY_BYTES = 256 * 1024 * 1024;
const HOST_ID = 's3-model';
const OWNER = { id: '75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a', name: 'webfile' };

/** The parts of a request the handlers need, parsed once. */
interface ParsedRequest {
  readonly method: string;
  readonly bucket: string;
  /** Null for bucket-level requests. */
  readonly key: string | null;
  readonly query: ReadonlyMap<string, string>;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

/** A response before it is written: the latency wait sits between handling and writing. */
interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer | string;
}

/**
 * Splits the query by hand: URLSearchParams would turn `+` into a space, but
 * S3 reads `+` in a query literally and the SDK sends a space as `%20`.
 */
function parseQuery(raw: string): Map<string, string> {
  const query = new Map<string, string>();
  for (const part of raw.split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const name = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    query.set(name, eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1)));
  }
  return query;
}

function parseTarget(url: string): { bucket: string; key: string | null; query: Map<string, string> } {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  try {
    const query = parseQuery(q < 0 ? '' : url.slice(q + 1));
    const rest = path.slice(1);
    const slash = rest.indexOf('/');
    if (slash < 0) return { bucket: decodeURIComponent(rest), key: null, query };
    const key = decodeURIComponent(rest.slice(slash + 1));
    return { bucket: decodeURIComponent(rest.slice(0, slash)), key: key === '' ? null : key, query };
  } catch {
    throw new S3Error(400, 'InvalidURI', "Couldn't parse the specified URI.", [['URI', url]]);
  }
}

function operationOf(method: string, key: string | null, query: ReadonlyMap<string, string>): S3Operation {
  // Sub-resources (?acl, ?uploads, ?tagging, ?versionId, ...) are other operations.
  const plain = [...query.keys()].every((k) => k === 'x-id');
  if (key === null) {
    if (method === 'GET' && query.get('list-type') === '2') return 'ListObjectsV2';
    if (!plain) return 'Unsupported';
    if (method === 'PUT') return 'CreateBucket';
    if (method === 'HEAD') return 'HeadBucket';
    if (method === 'DELETE') return 'DeleteBucket';
    return 'Unsupported';
  }
  if (!plain) return 'Unsupported';
  switch (method) {
    case 'GET':
      return 'GetObject';
    case 'HEAD':
      return 'HeadObject';
    case 'PUT':
      return 'PutObject';
    case 'DELETE':
      return 'DeleteObject';
    default:
      return 'Unsupported';
  }
}

const header = (req: ParsedRequest, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(',') : value;
};

const unquote = (etag: string): string => etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');

/** True if any ETag in an If-Match / If-None-Match list names this object (or the list is `*`). */
function etagListMatches(list: string, object: StoredObject): boolean {
  const mine = unquote(object.etag);
  return list.split(',').some((tag) => tag.trim() === '*' || unquote(tag) === mine);
}

function objectHeaders(object: StoredObject): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': object.contentType,
    etag: object.etag,
    'last-modified': new Date(object.lastModifiedMs).toUTCString(),
    'accept-ranges': 'bytes',
  };
  for (const [name, value] of Object.entries(object.metadata ?? {})) headers[`x-amz-meta-${name}`] = value;
  return headers;
}

/** Parses a single `bytes=` range; null means "serve the whole object", as S3 does for ranges it cannot parse. */
function parseRange(range: string | undefined, size: number): { start: number; end: number } | null {
  const m = range?.match(/^bytes=(\d*)-(\d*)$/);
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) throw invalidRange(range ?? '', size);
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) throw invalidRange(range ?? '', size);
  if (end < start) return null;
  return { start, end };
}

function isValidBucketName(name: string): boolean {
  return /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) && !name.includes('..') && !/^\d+\.\d+\.\d+\.\d+$/.test(name);
}

/** Continuation tokens carry their resume point, so the server keeps no paging state. */
function encodeToken(point: ResumePoint): string {
  return Buffer.from(`${point.isCommonPrefix ? 'p' : 'k'}${point.value}`, 'utf8').toString('base64');
}

function decodeToken(token: string): ResumePoint {
  const text = Buffer.from(token, 'base64').toString('utf8');
  if (!token || !/^[A-Za-z0-9+/]+=*$/.test(token) || (text[0] !== 'p' && text[0] !== 'k')) {
    throw new S3Error(400, 'InvalidArgument', 'The continuation token provided is incorrect');
  }
  return { value: text.slice(1), isCommonPrefix: text[0] === 'p' };
}

class Handlers {
  constructor(private readonly store: Store) {}

  private bucketOf(req: ParsedRequest): Bucket {
    const bucket = this.store.bucket(req.bucket);
    if (!bucket) throw noSuchBucket(req.bucket);
    return bucket;
  }

  handle(op: S3Operation, req: ParsedRequest): Answer {
    switch (op) {
      case 'ListObjectsV2':
        return this.listObjectsV2(req);
      case 'GetObject':
        return this.getObject(req, false);
      case 'HeadObject':
        return this.getObject(req, true);
      case 'PutObject':
        return this.putObject(req);
      case 'DeleteObject':
        return this.deleteObject(req);
      case 'CreateBucket':
        return this.createBucket(req);
      case 'HeadBucket':
        this.bucketOf(req);
        return { status: 200, headers: { 'x-amz-bucket-region': 'us-east-1' }, body: '' };
      case 'DeleteBucket':
        return this.deleteBucket(req);
      case 'Unsupported':
        throw notImplemented(`${req.method} with ${[...req.query.keys()].join(', ') || 'this path'}`);
    }
  }

  private listObjectsV2(req: ParsedRequest): Answer {
    const bucket = this.bucketOf(req);
    const q = req.query;
    const maxKeysText = q.get('max-keys');
    const maxKeys = maxKeysText === undefined ? MAX_LIST_KEYS : Number(maxKeysText);
    if (!Number.isInteger(maxKeys) || maxKeys < 0 || maxKeys > 2147483647 || !/^\d+$/.test(maxKeysText ?? '0')) {
      throw invalidArgument('Provided max-keys not an integer or within integer range', 'max-keys', maxKeysText ?? '');
    }
    const encodingType = q.get('encoding-type');
    if (encodingType !== undefined && encodingType !== 'url') {
      throw invalidArgument('Invalid Encoding Method specified in Request', 'encoding-type', encodingType);
    }
    const token = q.get('continuation-token');
    const startAfter = q.get('start-after') || null;
    // A continuation token wins over start-after: it already lies past it.
    const after = token !== undefined ? decodeToken(token) : startAfter ? { value: startAfter, isCommonPrefix: false } : null;
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const page = bucket.list({ prefix, delimiter, after, maxKeys: Math.min(maxKeys, MAX_LIST_KEYS) });
    const xml = listBucketResultXml({
      bucket: bucket.name,
      prefix,
      delimiter,
      maxKeys,
      // S3 echoes StartAfter on the first page; moto (our reference) omits it once paging by token.
      startAfter: token === undefined ? startAfter : null,
      continuationToken: token ?? null,
      nextContinuationToken: page.resumeAfter ? encodeToken(page.resumeAfter) : null,
      encodingType: encodingType === 'url' ? 'url' : null,
      owner: q.get('fetch-owner') === 'true' ? OWNER : null,
      page,
    });
    return { status: 200, headers: { 'content-type': 'application/xml' }, body: xml };
  }

  private getObject(req: ParsedRequest, headOnly: boolean): Answer {
    const bucket = this.bucketOf(req);
    const key = req.key as string;
    const object = bucket.get(key);
    if (!object) throw noSuchKey(key);
    // RFC 7232 order, which S3 follows: If-Match before If-Unmodified-Since, If-None-Match before If-Modified-Since.
    const ifMatch = header(req, 'if-match');
    const ifUnmodifiedSince = header(req, 'if-unmodified-since');
    const ifNoneMatch = header(req, 'if-none-match');
    const ifModifiedSince = header(req, 'if-modified-since');
    if (ifMatch !== undefined) {
      if (!etagListMatches(ifMatch, object)) throw preconditionFailed('If-Match');
    } else if (ifUnmodifiedSince !== undefined && object.lastModifiedMs > Date.parse(ifUnmodifiedSince)) {
      throw new S3Error(412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', [
        ['Condition', 'If-Unmodified-Since'],
      ]);
    }
    const notModified =
      ifNoneMatch !== undefined
        ? etagListMatches(ifNoneMatch, object)
        : ifModifiedSince !== undefined && object.lastModifiedMs <= Date.parse(ifModifiedSince);
    if (notModified) {
      const { etag, 'last-modified': lastModified } = objectHeaders(object);
      return { status: 304, headers: { etag, 'last-modified': lastModified }, body: '' };
    }
    const headers = objectHeaders(object);
    const range = headOnly ? null : parseRange(header(req, 'range'), object.size);
    if (range) {
      const body = (object.body ?? syntheticBody(object.size)).subarray(range.start, range.end + 1);
      headers['content-range'] = `bytes ${range.start}-${range.end}/${object.size}`;
      headers['content-length'] = String(body.length);
      return { status: 206, headers, body };
    }
    // The SDK asks for checksums on GetObject and then verifies them against the body.
    if (object.checksum && header(req, 'x-amz-checksum-mode')?.toUpperCase() === 'ENABLED') {
      headers[`x-amz-checksum-${object.checksum.algorithm.toLowerCase()}`] = object.checksum.value;
    }
    headers['content-length'] = String(object.size);
    if (headOnly) return { status: 200, headers, body: '' };
    return { status: 200, headers, body: object.body ?? syntheticBody(object.size) };
  }

  private putObject(req: ParsedRequest): Answer {
    const bucket = this.bucketOf(req);
    const key = req.key as string;
    if (header(req, 'x-amz-copy-source') !== undefined) throw notImplemented('CopyObject');
    const contentEncoding = header(req, 'content-encoding') ?? '';
    const streaming = (header(req, 'x-amz-content-sha256') ?? '').startsWith('STREAMING-');
    let body = req.body;
    let trailers: ReadonlyMap<string, string> = new Map();
    if (streaming || /(^|,)\s*aws-chunked\s*(,|$)/.test(contentEncoding)) {
      const decodedLength = header(req, 'x-amz-decoded-content-length');
      ({ body, trailers } = decodeAwsChunked(req.body, decodedLength === undefined ? null : Number(decodedLength)));
    }
    const checksum: StoredChecksum | null = findChecksum(req.headers, trailers);
    verifyBody(body, checksum, header(req, 'content-md5'));

    // Conditions are checked and the write applied in one synchronous step,
    // so two racing conditional writes cannot both win (as on S3).
    const existing = bucket.get(key);
    const ifNoneMatch = header(req, 'if-none-match');
    if (ifNoneMatch !== undefined) {
      if (ifNoneMatch.trim() !== '*') throw notImplemented('If-None-Match other than * on PutObject');
      if (existing) throw preconditionFailed('If-None-Match');
    }
    const ifMatch = header(req, 'if-match');
    if (ifMatch !== undefined) {
      if (!existing) throw noSuchKey();
      if (!etagListMatches(ifMatch, existing)) throw preconditionFailed('If-Match');
    }
    const metadata: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (name.startsWith('x-amz-meta-') && typeof value === 'string') metadata[name.slice(11)] = value;
    }
    const etag = `"${createHash('md5').update(body).digest('hex')}"`;
    const object = new StoredObject(
      body.length,
      etag,
      Math.floor(Date.now() / 1000) * 1000,
      header(req, 'content-type') ?? 'binary/octet-stream',
      body,
      checksum,
      Object.keys(metadata).length ? metadata : null,
    );
    bucket.put(key, object);
    const headers: Record<string, string> = { etag };
    if (checksum) headers[`x-amz-checksum-${checksum.algorithm.toLowerCase()}`] = checksum.value;
    return { status: 200, headers, body: '' };
  }

  private deleteObject(req: ParsedRequest): Answer {
    const bucket = this.bucketOf(req);
    const key = req.key as string;
    const ifMatch = header(req, 'if-match');
    if (ifMatch !== undefined) {
      const existing = bucket.get(key);
      if (!existing) throw noSuchKey();
      if (!etagListMatches(ifMatch, existing)) throw preconditionFailed('If-Match');
    }
    bucket.delete(key);
    // S3 answers 204 whether or not the key existed.
    return { status: 204, headers: {}, body: '' };
  }

  private createBucket(req: ParsedRequest): Answer {
    if (!isValidBucketName(req.bucket)) throw invalidBucketName();
    this.store.createBucket(req.bucket, Date.now());
    return { status: 200, headers: { location: `/${req.bucket}` }, body: '' };
  }

  private deleteBucket(req: ParsedRequest): Answer {
    const bucket = this.bucketOf(req);
    if (bucket.size > 0) {
      throw new S3Error(409, 'BucketNotEmpty', 'The bucket you tried to delete is not empty', [
        ['BucketName', req.bucket],
      ]);
    }
    this.store.deleteBucket(req.bucket);
    return { status: 204, headers: {}, body: '' };
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
  const zeroCounts = (): RequestCounts =>
    Object.fromEntries(S3_OPERATIONS.map((op) => [op, 0])) as RequestCounts;
  let counts = zeroCounts();
  let requestSeq = 0;

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const requestId = (++requestSeq).toString(16).toUpperCase().padStart(16, '0');
    const method = req.method ?? 'GET';
    let answer: Answer;
    try {
      const { bucket, key, query } = parseTarget(req.url ?? '/');
      const op = bucket === '' ? 'Unsupported' : operationOf(method, key, query);
      counts[op]++;
      const body = await readBody(req);
      // Every request waits the same fixed time, concurrently with all others:
      // a timer, never a queue, so N parallel requests take one latency, not N.
      if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs));
      answer = handlers.handle(op, { method, bucket, key, query, headers: req.headers, body });
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
