/** The one seam to S3: every request the indexer makes goes through `S3Store`. */
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import {
  AccessDeniedError,
  BucketNotFoundError,
  ConfigError,
  CredentialsError,
  IndexerError,
  NotAListingError,
  S3UnavailableError,
  UnexpectedError,
} from './errors';
import { isoTime, parseListObjectsV2, type ListObjectsPage } from './list-xml';
import { type S3Settings, checkRegion } from './root';

/** An object's metadata; `etag` without quotes. */
export interface ObjectInfo {
  readonly size: number;
  readonly etag: string;
  readonly lastModified: Date;
}

/** An object's bytes and metadata. */
export interface StoredObject extends ObjectInfo {
  readonly body: Buffer;
  /** Set (with an empty body) when the read was conditional (`ifNoneMatch`) and the object still has that ETag. */
  readonly notModified?: true;
}

/** One ListObjectsV2 page: objects with full keys and `toISOString` times, and common prefixes when a delimiter was given. */
export interface ListPage {
  readonly objects: { key: string; size: number; lastModified: string; etag: string }[];
  readonly prefixes: string[];
  /** True when more pages follow (set by `S3Store.listPages`). */
  readonly truncated?: boolean;
}

/** Create only (`If-None-Match: *`) or replace only that version (`If-Match`). */
export type WriteCondition = { readonly ifNoneMatch: '*' } | { readonly ifMatch: string };

/** A conditional write either lands or loses its race (412). */
export type WriteResult = { readonly status: 'written'; readonly etag: string } | { readonly status: 'conflict' };

/** The store answered a conditional request with "not implemented": fall back to the lock alone. */
export class ConditionalWritesUnsupportedError extends IndexerError {
  override name = 'ConditionalWritesUnsupportedError';
}

/** Options of a read. */
export interface GetOptions {
  readonly ifNoneMatch?: string;
  readonly abortSignal?: AbortSignal;
}

/** Options of a listing. */
export interface ListOptions {
  readonly prefix: string;
  readonly startAfter?: string;
  readonly delimiter?: string;
  readonly maxKeys?: number;
}

/** Strips the double quotes S3 puts around ETags. */
export function unquoteEtag(etag: string | undefined): string {
  return (etag ?? '').replace(/^W\//, '').replace(/^"|"$/g, '');
}

interface AwsError {
  name?: string;
  Code?: string;
  code?: string;
  message?: string;
  errors?: unknown[];
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string | undefined> };
}

function statusOf(err: unknown): number | undefined {
  return (err as AwsError)?.$metadata?.httpStatusCode;
}

function codeOf(err: unknown): string {
  const e = err as AwsError;
  return e?.Code ?? e?.name ?? '';
}

function isNotFound(err: unknown): boolean {
  const code = codeOf(err);
  return (statusOf(err) === 404 && code !== 'NoSuchBucket') || code === 'NoSuchKey' || code === 'NotFound';
}

/** True for a lost conditional write: 412, or 409 when S3 saw two conditional writes at once. */
function isConflict(err: unknown): boolean {
  const code = codeOf(err);
  return statusOf(err) === 412 || code === 'PreconditionFailed' || code === 'ConditionalRequestConflict';
}

function isUnsupported(err: unknown): boolean {
  const code = codeOf(err);
  return statusOf(err) === 501 || code === 'NotImplemented';
}

/** Codes of an answer that never came: the network or the endpoint failed, as the SDK's retries see it. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
]);

/** The Node system error code of a failed connection (`ECONNREFUSED`), also inside an AggregateError (one per address tried). */
function networkCodeOf(err: unknown): string | undefined {
  const e = err as AwsError;
  for (const code of [e?.code, e?.name, e?.Code]) if (code && NETWORK_CODES.has(code)) return code;
  // The SDK wraps what is not an `Error` of its own realm (as under jest's VM) as "AWS SDK error wrapper for Error: connect ECONNREFUSED …".
  const named = /\b(E[A-Z_]+)\b/.exec(e?.message ?? '')?.[1];
  if (named && NETWORK_CODES.has(named) && e?.message?.startsWith('AWS SDK error wrapper')) return named;
  const first = Array.isArray(e?.errors) ? e.errors[0] : undefined;
  return first === undefined ? undefined : networkCodeOf(first);
}

/** Credential providers failed: no credentials were found, so none were sent. */
const CREDENTIALS_MISSING = new Set(['CredentialsProviderError', 'ProviderError', 'TokenProviderError']);

/** S3 read the credentials that were sent and refused them. */
const CREDENTIALS_REJECTED = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
]);

/** Turns an SDK error into one of ours, with what the user can do about it. */
export function translateError(err: unknown, operation: string, bucket: string, key?: string): Error {
  if (err instanceof IndexerError) return err;
  const code = codeOf(err);
  const status = statusOf(err);
  const where = key === undefined ? `s3://${bucket}` : `s3://${bucket}/${key}`;
  const detail = (err as AwsError)?.message ?? String(err);
  if (code === 'NoSuchBucket') {
    return new BucketNotFoundError(`Bucket "${bucket}" does not exist`, 'Check the bucket name, region and endpoint', { cause: err });
  }
  if (CREDENTIALS_MISSING.has(code)) {
    const profile = process.env.AWS_PROFILE;
    return profile
      ? new CredentialsError(
          `No AWS credentials were found for profile "${profile}" (AWS_PROFILE), so nothing was sent to S3 for ${operation} on ${where}`,
          `Check that profile "${profile}" is in ~/.aws/config or ~/.aws/credentials (aws configure list-profiles), or unset AWS_PROFILE; DATASTORE_INDEXER_DEBUG=1 shows what the SDK tried`,
          { cause: err },
        )
      : new CredentialsError(
          `No AWS credentials were found, so nothing was sent to S3 for ${operation} on ${where}`,
          'Set AWS_PROFILE to a profile in ~/.aws/config, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; DATASTORE_INDEXER_DEBUG=1 shows what the SDK tried',
          { cause: err },
        );
  }
  if (CREDENTIALS_REJECTED.has(code)) {
    return new CredentialsError(
      `S3 rejected the credentials for ${operation} on ${where} (${code})`,
      'Check AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or refresh your session',
      { cause: err },
    );
  }
  if (status === 301 || status === 307 || code === 'PermanentRedirect' || code === 'AuthorizationHeaderMalformed') {
    const region = (err as AwsError)?.$response?.headers?.['x-amz-bucket-region'];
    if (region || status === 301 || code === 'PermanentRedirect') {
      return new ConfigError(
        region
          ? `Bucket "${bucket}" is in region ${region}, not the region this request was signed for (${operation} on ${where})`
          : `Bucket "${bucket}" is in another region than the one configured (${operation} on ${where}: ${detail})`,
        region
          ? `Pass --region ${region} (or set "region" in the datastore config)`
          : 'Pass the bucket\'s region with --region (or "region" in the datastore config)',
        { cause: err },
      );
    }
  }
  if (code === 'AccessDenied' || code === 'AllAccessDisabled' || status === 403) {
    return new AccessDeniedError(`Access denied: ${operation} on ${where}`, `Grant this identity s3:${operation} on that resource`, {
      cause: err,
    });
  }
  const network = networkCodeOf(err);
  if (network !== undefined) {
    // The detail names the endpoint (a refused address, or the silent endpoint of a request timeout).
    return new S3UnavailableError(
      `Could not reach S3 for ${operation} on ${where} (${network}) after every retry: ${detail}`,
      'Check the endpoint and network, then retry',
      {
        cause: err,
      },
    );
  }
  if (status !== undefined && (status >= 500 || code === 'SlowDown')) {
    return new S3UnavailableError(`S3 kept failing on ${operation} ${where}: ${detail}`, 'Retry later; check the endpoint and network', {
      cause: err,
    });
  }
  if (status === undefined) {
    // No answer from S3 and no network failure: a bug or an unexpected runtime error, not an outage.
    const e = err instanceof Error ? err : new Error(String(err));
    return new UnexpectedError(`${operation} on ${where}`, { name: e.name, message: e.message }, { cause: err });
  }
  return new IndexerError(`S3 ${operation} on ${where} failed: ${code || status} ${detail}`, undefined, { cause: err });
}

function notAListing(request: unknown, bytes: Buffer): NotAListingError {
  const r = request as { protocol?: string; hostname?: string; port?: number; path?: string };
  const endpoint = `${r.protocol ?? 'https:'}//${r.hostname ?? '?'}${r.port ? `:${r.port}` : ''}${r.path ?? ''}`;
  const start = JSON.stringify(bytes.subarray(0, 60).toString('utf8'));
  return new NotAListingError(
    `The endpoint ${endpoint} answered ListObjectsV2 with something that is not an S3 listing (it starts ${start}); nothing was written`,
    'Check --endpoint (and --force-path-style): it must be the S3 API itself, not a web console or a proxy page',
  );
}

/** What the SDK reads when the fast reader already parsed a listing. */
const EMPTY_LIST_RESULT = new TextEncoder().encode('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult></ListBucketResult>');

/** Reads a response body (a Node stream, or bytes already) whole. */
async function collectBody(body: unknown): Promise<Buffer> {
  if (body === undefined || body === null) return Buffer.alloc(0);
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  const chunks: Buffer[] = [];
  for await (const chunk of body as AsyncIterable<Uint8Array | string>)
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** How long a request may wait for an answer's headers before it fails (and is retried). */
export const REQUEST_TIMEOUT_MS = 30_000;

/**
 * Builds an S3 client from swamp's settings; the SDK's adaptive retries absorb throttling, 5xx and timeouts.
 * A request that gets no answer within `requestTimeoutMs` fails (the SDK only warns unless told to throw),
 * and the final error names the endpoint that kept silent.
 */
export function createS3Client(
  settings: S3Settings,
  overrides: Partial<S3ClientConfig> = {},
  requestTimeoutMs = REQUEST_TIMEOUT_MS,
): S3Client {
  const region = settings.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const source = settings.region !== undefined ? 'The region' : process.env.AWS_REGION !== undefined ? 'AWS_REGION' : 'AWS_DEFAULT_REGION';
  checkRegion(region, source);
  const client = new S3Client({
    region,
    endpoint: settings.endpoint,
    forcePathStyle: settings.forcePathStyle,
    maxAttempts: 6,
    retryMode: 'adaptive',
    // S3-compatible stores vary in checksum support; S3 itself needs none for these small requests.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      connectionTimeout: 5_000,
      requestTimeout: requestTimeoutMs,
      throwOnRequestTimeout: true,
      httpAgent: { maxSockets: 64 },
      httpsAgent: { maxSockets: 64 },
    },
    ...overrides,
  });
  const where = settings.endpoint ?? 'S3';
  client.middlewareStack.add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (err) {
        const e = err as { name?: string; message?: string };
        if (e?.name === 'TimeoutError' && typeof e.message === 'string' && !e.message.includes(where)) {
          e.message = `no answer from ${where} within ${requestTimeoutMs} ms (${e.message})`;
        }
        throw err;
      }
    },
    { step: 'initialize', name: 'datastoreIndexerTimeoutEndpoint', override: true },
  );
  return client;
}

/** Bucket-scoped S3 operations with typed errors and per-operation request counts. */
export class S3Store {
  /** HTTP requests sent, by operation (retries count). */
  readonly requests: Record<string, number> = {};

  constructor(
    readonly client: S3Client,
    readonly bucket: string,
  ) {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const op = (context.commandName ?? 'Unknown').replace(/Command$/, '');
        this.requests[op] = (this.requests[op] ?? 0) + 1;
        return next(args);
      },
      { step: 'deserialize', name: 'datastoreIndexerRequestCounter', override: true },
    );
  }

  /** A store for a bucket reached with swamp's settings. */
  static connect(settings: S3Settings, bucket: string): S3Store {
    return new S3Store(createS3Client(settings), bucket);
  }

  /** Total requests sent so far. */
  requestTotal(): number {
    return Object.values(this.requests).reduce((a, b) => a + b, 0);
  }

  /**
   * How ListObjectsV2 answers are read: `fast` reads them with `parseListObjectsV2` (falling back to the
   * SDK for anything it does not recognise), `sdk` always uses the SDK's deserialiser. @default 'fast'
   */
  listParser: 'fast' | 'sdk' = 'fast';

  /** Streams ListObjectsV2 pages, one request at a time, until the listing ends. */
  async *listPages(options: ListOptions): AsyncGenerator<ListPage> {
    let token: string | undefined;
    do {
      const command = new ListObjectsV2Command({
        Bucket: this.bucket,
        Prefix: options.prefix || undefined,
        Delimiter: options.delimiter,
        StartAfter: token ? undefined : options.startAfter,
        ContinuationToken: token,
        MaxKeys: options.maxKeys,
      });
      let fast: ListObjectsPage | undefined;
      if (this.listParser === 'fast') {
        command.middlewareStack.add(
          (next) => async (args) => {
            fast = undefined;
            const result = await next(args);
            const response = result.response as { statusCode?: number; body?: unknown };
            if (response.statusCode !== undefined && response.statusCode >= 200 && response.statusCode < 300) {
              const bytes = await collectBody(response.body);
              fast = parseListObjectsV2(bytes);
              // A web page or a proxy's answer with status 200 is no listing: never read it as an empty bucket.
              if (!fast && !bytes.includes('<ListBucketResult')) throw notAListing(args.request, bytes);
              // Parsed: the SDK gets an empty result to read. Not recognised: it gets the bytes back.
              response.body = fast ? EMPTY_LIST_RESULT : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
            }
            return result;
          },
          // Below the SDK's deserialiser: this sees the raw answer of each attempt (retries included).
          { step: 'deserialize', priority: 'low', name: 'datastoreIndexerFastListParse', override: true },
        );
      }
      let out: ListObjectsV2CommandOutput;
      try {
        out = await this.client.send(command);
      } catch (err) {
        throw translateError(err, 'ListBucket', this.bucket, options.prefix);
      }
      if (fast) {
        yield { objects: fast.objects, prefixes: fast.prefixes, truncated: fast.isTruncated };
        token = fast.isTruncated ? fast.nextContinuationToken : undefined;
        continue;
      }
      yield {
        objects: (out.Contents ?? []).map((o) => ({
          key: o.Key ?? '',
          size: o.Size ?? 0,
          lastModified: isoTime(o.LastModified ?? new Date(0)),
          etag: unquoteEtag(o.ETag),
        })),
        prefixes: (out.CommonPrefixes ?? []).map((p) => p.Prefix ?? ''),
        truncated: !!(out.IsTruncated && out.NextContinuationToken),
      };
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }

  /**
   * Reads an object whole, or undefined when it does not exist. With `ifNoneMatch` (an ETag without
   * quotes), an object that still has that ETag is not sent again: the answer says `notModified`.
   * `abortSignal` stops the request (and the download of its body); the read then fails.
   */
  async get(key: string, options: GetOptions = {}): Promise<StoredObject | undefined> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, IfNoneMatch: options.ifNoneMatch ? `"${options.ifNoneMatch}"` : undefined }),
        options.abortSignal ? { abortSignal: options.abortSignal } : undefined,
      );
      // A view of the bytes the SDK collected, not a copy: an index can be a hundred megabytes.
      const bytes = await out.Body!.transformToByteArray();
      const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return { body, size: body.length, etag: unquoteEtag(out.ETag), lastModified: out.LastModified ?? new Date(0) };
    } catch (err) {
      if (options.ifNoneMatch && statusOf(err) === 304) {
        return { body: Buffer.alloc(0), size: 0, etag: options.ifNoneMatch, lastModified: new Date(0), notModified: true };
      }
      return this.absentOrThrow(err, 'GetObject', key);
    }
  }

  /** GetObject's middleware as resolved for the first `open`; see there. */
  private openHandler?: ReturnType<GetObjectCommand['resolveMiddleware']>;

  /**
   * Opens an object as a stream, or undefined when it does not exist. Made for many calls (a hydrate makes
   * thousands): the client's middleware is resolved once, on the first call, rather than on each `send`
   * (what the SDK's `cacheMiddleware` does, for this command only); middleware added to the client later
   * does not apply to `open`.
   */
  async open(key: string): Promise<{ stream: Readable; info: ObjectInfo } | undefined> {
    try {
      const command = new GetObjectCommand({ Bucket: this.bucket, Key: key });
      this.openHandler ??= command.resolveMiddleware(this.client.middlewareStack, this.client.config, undefined);
      const { output: out } = await this.openHandler(command);
      return {
        stream: out.Body as Readable,
        info: { size: out.ContentLength ?? 0, etag: unquoteEtag(out.ETag), lastModified: out.LastModified ?? new Date(0) },
      };
    } catch (err) {
      return this.absentOrThrow(err, 'GetObject', key);
    }
  }

  /** An object's metadata, or undefined when it does not exist. */
  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: out.ContentLength ?? 0, etag: unquoteEtag(out.ETag), lastModified: out.LastModified ?? new Date(0) };
    } catch (err) {
      return this.absentOrThrow(err, 'HeadObject', key);
    }
  }

  /**
   * Undefined when `err` says the key does not exist. S3 answers 403, not 404, for a missing key when
   * ListBucket is granted only on prefixes (as the deployed policy does), so a 403 is settled with a
   * one-key listing, which that policy allows.
   */
  private async absentOrThrow(err: unknown, operation: string, key: string): Promise<undefined> {
    if (isNotFound(err)) return undefined;
    if (statusOf(err) === 403 && codeOf(err) === 'AccessDenied' && (await this.isListedAbsent(key))) return undefined;
    throw translateError(err, operation, this.bucket, key);
  }

  private async isListedAbsent(key: string): Promise<boolean> {
    try {
      for await (const page of this.listPages({ prefix: key, maxKeys: 1 })) return !page.objects.some((o) => o.key === key);
      return true;
    } catch {
      return false;
    }
  }

  /** Writes an object, optionally only if the condition holds; a lost race is a result, not an error. */
  async put(key: string, body: Buffer | string, condition?: WriteCondition, contentType = 'application/json'): Promise<WriteResult> {
    try {
      const out = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: contentType,
          IfNoneMatch: condition && 'ifNoneMatch' in condition ? '*' : undefined,
          IfMatch: condition && 'ifMatch' in condition ? `"${condition.ifMatch}"` : undefined,
        }),
      );
      return { status: 'written', etag: unquoteEtag(out.ETag) };
    } catch (err) {
      if (condition && isConflict(err)) return { status: 'conflict' };
      // If-Match on a key deleted since it was read answers 404 (S3, moto): that version is gone, a lost race too.
      if (condition && 'ifMatch' in condition && isNotFound(err)) return { status: 'conflict' };
      if (condition && isUnsupported(err)) {
        throw new ConditionalWritesUnsupportedError(`The store does not implement conditional writes (PutObject ${key})`, undefined, {
          cause: err,
        });
      }
      throw translateError(err, 'PutObject', this.bucket, key);
    }
  }

  /**
   * Deletes an object, optionally only that version (`If-Match`); a lost race is a result. A store that
   * rejects conditional deletes gets a plain delete, unless `strict`: then ConditionalWritesUnsupportedError.
   */
  async delete(key: string, ifMatch?: string, strict = false): Promise<'deleted' | 'conflict'> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: ifMatch ? `"${ifMatch}"` : undefined }));
      return 'deleted';
    } catch (err) {
      if (ifMatch && isConflict(err)) return 'conflict';
      if (ifMatch && isNotFound(err)) return 'conflict';
      if (ifMatch && isUnsupported(err) && strict) {
        throw new ConditionalWritesUnsupportedError(`The store does not implement conditional deletes (DeleteObject ${key})`, undefined, {
          cause: err,
        });
      }
      if (ifMatch && isUnsupported(err)) return this.delete(key);
      throw translateError(err, 'DeleteObject', this.bucket, key);
    }
  }
}
