/**
 * The direct path: the high-volume requests (ListObjectsV2 pages, GetObject bodies, HeadObject) sent over
 * connections of its own (`s3-http.ts`), signed as the SDK signs them (`s3-sign.ts`) with the SDK's
 * credentials provider and endpoint rules, without its per-request middleware stack, which costs more CPU
 * than the request itself. Everything else stays on the SDK client.
 */
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { sleep } from './concurrency';
import { UnexpectedError } from './errors';
import { type BucketEndpoint, escapeUri, resolveBucketEndpoint } from './s3-endpoint';
import { CONNECTION_CODES, TIMEOUT_CODES } from './s3-errors';
import type { HttpPool } from './s3-http';
import { type CredentialSource, RequestSigner, canonicalQuery } from './s3-sign';

/** How the client that allows the direct path sends its requests (set by `createS3Client`). */
export interface DirectSettings {
  /** The connections it sends on, with their timeouts. */
  readonly pool: HttpPool;
  /** The account that must own the bucket, sent (and signed) as `x-amz-expected-bucket-owner`; S3 answers 403 to any other. */
  readonly expectedBucketOwner?: string;
}

const allowed = new WeakMap<S3Client, DirectSettings>();

/** Lets `S3Store` send a client's high-volume requests directly; only for clients whose transport is the default one. */
export function allowDirect(client: S3Client, settings: DirectSettings): void {
  allowed.set(client, settings);
}

/** The operations the direct path sends. */
export type DirectOperation = 'ListObjectsV2' | 'GetObject' | 'HeadObject';

/** Watches each attempt: called as it is sent; what it returns is called once the answer is read (a stream's headers), or the attempt failed. */
export type RequestObserver = (op: string, input: Readonly<Record<string, string | undefined>>) => (() => void) | undefined;

/**
 * An answer whose status is not 2xx, shaped as the SDK's service errors are (named by the S3 code), so
 * `s3-errors.ts` turns both into the same typed errors; never seen outside the seam.
 */
class DirectServiceError extends Error {
  readonly Code: string | undefined;
  readonly $metadata: { httpStatusCode: number; requestId?: string; attempts: number };
  readonly $response: { statusCode: number; headers: Record<string, string | undefined> };

  constructor(status: number, code: string | undefined, message: string, headers: Record<string, string | undefined>, attempts: number) {
    super(message);
    this.name = code ?? 'Unknown';
    this.Code = code;
    this.$metadata = { httpStatusCode: status, requestId: headers['x-amz-request-id'], attempts };
    this.$response = { statusCode: status, headers };
  }
}

const THROTTLING = new Set([
  'BandwidthLimitExceeded',
  'RequestLimitExceeded',
  'RequestThrottled',
  'RequestThrottledException',
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
]);

/** Whether the SDK's standard retry strategy would retry this failure, and whether it counts as throttling. */
export function retryKind(err: unknown): 'throttling' | 'transient' | undefined {
  const e = err as { name?: string; code?: string; $metadata?: { httpStatusCode?: number }; errors?: unknown[] };
  const status = e?.$metadata?.httpStatusCode;
  if (status === 429 || THROTTLING.has(e?.name ?? '')) return 'throttling';
  if (TIMEOUT_CODES.has(e?.name ?? '') || CONNECTION_CODES.has(e?.code ?? '')) return 'transient';
  if (status !== undefined && status >= 500 && status <= 599) return 'transient';
  // A refused connection to a name with several addresses fails with one error per address.
  if (Array.isArray(e?.errors) && e.errors.length > 0) return retryKind(e.errors[0]);
  return undefined;
}

/** The SDK's backoff: a random wait under an exponential cap (base 100 ms, 500 ms when throttled, at most 20 s). */
export function backoffMs(retry: number, kind: 'throttling' | 'transient', random = Math.random): number {
  return Math.floor(random() * Math.min((kind === 'throttling' ? 500 : 100) * 2 ** retry, 20_000));
}

/** The answer of one direct request: status, headers and either the body read whole or the stream itself. */
export interface DirectAnswer {
  readonly status: number;
  readonly headers: Record<string, string | undefined>;
  readonly body?: Buffer;
  readonly stream?: Readable;
}

/** One request, before signing. */
export interface DirectRequest {
  readonly op: DirectOperation;
  readonly method: 'GET' | 'HEAD';
  /** The object key, or undefined for a bucket request (a listing). */
  readonly key?: string;
  readonly query?: Record<string, string>;
  /** Hand a 2xx answer's body longer than this many bytes (or of a length not announced) over as a stream rather than read it whole. */
  readonly streamOver?: number;
  /** What an observer sees of it (`Prefix`, `Key`, …). */
  readonly input: Readonly<Record<string, string | undefined>>;
}

/** Sends a client's direct requests for one bucket: signed, retried and timed out as the SDK client would. */
export class DirectRequests {
  private endpoint?: Promise<BucketEndpoint | undefined>;
  private signer?: RequestSigner;
  private maxAttempts?: Promise<number>;

  private constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly settings: DirectSettings,
    private readonly onAttempt: (op: string, input: Readonly<Record<string, string | undefined>>) => (() => void) | undefined,
  ) {}

  /** The direct path of `client` for `bucket`, or undefined when the client's transport is not the default (a test's fault injector). */
  static of(
    client: S3Client,
    bucket: string,
    onAttempt: (op: string, input: Readonly<Record<string, string | undefined>>) => (() => void) | undefined,
  ): DirectRequests | undefined {
    const settings = allowed.get(client);
    return settings ? new DirectRequests(client, bucket, settings, onAttempt) : undefined;
  }

  /** The bucket's endpoint, resolved once; undefined means the SDK must send (another auth scheme). */
  usable(): Promise<BucketEndpoint | undefined> {
    this.endpoint ??= resolveBucketEndpoint(this.client, this.bucket);
    return this.endpoint;
  }

  /** Sends `request` with the client's retries; non-2xx answers are thrown as `DirectServiceError`. */
  async send(request: DirectRequest): Promise<DirectAnswer> {
    const endpoint = await this.usable();
    if (!endpoint) {
      throw new UnexpectedError(`a direct ${request.op}`, {
        name: 'DirectPathUnusable',
        message: 'the direct path is not usable for this bucket',
      });
    }
    this.maxAttempts ??= (this.client.config.maxAttempts as () => Promise<number>)().then((n) => Number(n) || 3);
    const maxAttempts = await this.maxAttempts;
    for (let attempt = 1; ; attempt++) {
      const end = this.onAttempt(request.op, request.input);
      let ended = false;
      const done = (): void => {
        if (!ended) end?.();
        ended = true;
      };
      try {
        const answer = await this.attempt(endpoint, request, attempt, done);
        return answer;
      } catch (err) {
        done();
        const kind = this.correctedClock(err) ? 'transient' : retryKind(err);
        if (kind === undefined || attempt >= maxAttempts) {
          if (err && typeof err === 'object' && !('$metadata' in err)) Object.assign(err, { $metadata: { attempts: attempt } });
          throw err;
        }
        await sleep(backoffMs(attempt - 1, kind));
      }
    }
  }

  /**
   * Whether an error answer's Date header shows this machine's clock five minutes or more off S3's: then the
   * client's clock offset is corrected, as the SDK does, and the request is worth another attempt.
   */
  private correctedClock(err: unknown): boolean {
    const date = (err as { $response?: { headers?: Record<string, string | undefined> } })?.$response?.headers?.date;
    const server = date ? Date.parse(date) : NaN;
    const config = this.client.config as { systemClockOffset?: number };
    if (Number.isNaN(server) || Math.abs(Date.now() + (config.systemClockOffset ?? 0) - server) < 300_000) return false;
    config.systemClockOffset = server - Date.now();
    return true;
  }

  private async attempt(endpoint: BucketEndpoint, request: DirectRequest, attempt: number, done: () => void): Promise<DirectAnswer> {
    const path = `${endpoint.basePath}/${request.key === undefined ? '' : request.key.split('/').map(escapeUri).join('/')}`;
    const query = request.query ?? {};
    const offset = Number((this.client.config as { systemClockOffset?: number }).systemClockOffset ?? 0);
    const owner = this.settings.expectedBucketOwner;
    const headers = { ...endpoint.headers, host: endpoint.host, ...(owner ? { 'x-amz-expected-bucket-owner': owner } : {}) };
    this.signer ??= new RequestSigner(this.client.config.credentials as CredentialSource, endpoint.signingRegion, 's3', headers);
    const signedHeaders = await this.signer.sign(request.method, path, canonicalQuery(query), Date.now() + offset);
    const search = Object.keys(query)
      .map((k) => `${escapeUri(k)}=${escapeUri(query[k])}`)
      .join('&');
    const answer = await this.settings.pool.send(endpoint, {
      method: request.method,
      path: search ? `${path}?${search}` : path,
      headers: signedHeaders,
      streamOver: request.streamOver,
    });
    // A streamed body is read after this; the connection's idle timeout guards it, and its failure reaches the stream's reader.
    done();
    if (answer.status >= 200 && answer.status < 300) return answer;
    throw serviceError(answer.status, answer.headers, answer.body ?? Buffer.alloc(0), request.method, attempt);
  }
}

/** The `<Code>` and `<Message>` of an S3 XML error body; an empty body (a HEAD) is named as the SDK names it. */
export function serviceError(
  status: number,
  headers: Record<string, string | undefined>,
  body: Buffer,
  method: string,
  attempts: number,
): Error {
  const text = body.length > 0 && body.length < 65_536 ? body.toString('utf8') : '';
  const field = (name: string): string | undefined => {
    const m = new RegExp(`<${name}>([^<]*)</${name}>`).exec(text);
    return m
      ? m[1]
          .replace(/&lt;/g, '<')
          .replace(/&gt;/g, '>')
          .replace(/&quot;/g, '"')
          .replace(/&apos;/g, "'")
          .replace(/&amp;/g, '&')
      : undefined;
  };
  const code = field('Code') ?? (status === 404 ? 'NotFound' : undefined);
  const message = field('Message') ?? (method === 'HEAD' || !text ? 'UnknownError' : text.slice(0, 200));
  return new DirectServiceError(status, code, message, headers, attempts);
}
