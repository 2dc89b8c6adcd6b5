/**
 * The S3 operations themselves, on the in-memory store. Each runs
 * synchronously from start to end, so a conditional write's check and its
 * write cannot interleave with another request (as on S3).
 */
import { findChecksum, md5Hex, verifyBody } from './checksum';
import { decodeAwsChunked } from './chunked';
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
import type { ParsedRequest, S3Operation } from './routing';
import { StoredObject, type Bucket, type ResumePoint, type Store, type StoredChecksum } from './store';
import { syntheticBody } from './synthetic';
import { listBucketResultXml } from './xml';

const MAX_LIST_KEYS = 1000;
const OWNER = { id: '75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a', name: 'webfile' };

/** The key of an object-level request (routing sends only those here). */
function keyOf(req: ParsedRequest): string {
  if (req.key === null) throw new S3Error(500, 'InternalError', 'object operation without a key');
  return req.key;
}

/** A response before it is written: the latency wait sits between handling and writing. */
export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer | string;
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

export class Handlers {
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
    const key = keyOf(req);
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
    const key = keyOf(req);
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
    const etag = `"${md5Hex(body)}"`;
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
    const key = keyOf(req);
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
      throw new S3Error(409, 'BucketNotEmpty', 'The bucket you tried to delete is not empty', [['BucketName', req.bucket]]);
    }
    this.store.deleteBucket(req.bucket);
    return { status: 204, headers: {}, body: '' };
  }
}
