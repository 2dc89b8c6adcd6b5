/** The one seam to S3: every request the indexer makes goes through `S3Store`. */
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { ConditionalWritesUnsupportedError, NotAListingError } from './errors';
import { codeOf, isConflict, isNotFound, isUnsupported, notAListing, statusOf, translateError } from './s3-errors';
import type { S3Settings } from './config';
import { decodeUrlKey, isoTime, parseListObjectsV2, type ListObjectsPage } from './list-xml';
import { createS3Client } from './s3-client';

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

/** What the SDK reads when the fast reader already parsed a listing. */
/** A listed key under `encoding-type=url`, decoded; a store that encodes otherwise cannot be listed safely. */
function decodedKey(text: string, prefix: string | undefined): string {
  const key = decodeUrlKey(text);
  if (key !== undefined) return key;
  throw new NotAListingError(
    `Listing ${JSON.stringify(prefix ?? '')} gave the key ${JSON.stringify(text)}, which is not valid URL encoding although the answer says encoding-type=url; nothing was written`,
    'The endpoint does not encode keys as S3 does: check --endpoint, or report the store',
  );
}

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
        // Raw keys in XML lose characters (a CR comes back as LF); encoded ones arrive whole.
        EncodingType: 'url',
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
      // The SDK hands URL-encoded keys over as they came; a store that ignored the request sent them raw.
      const keyOf = (text: string | undefined): string =>
        out.EncodingType === 'url' ? decodedKey(text ?? '', options.prefix) : (text ?? '');
      yield {
        objects: (out.Contents ?? []).map((o) => ({
          key: keyOf(o.Key),
          size: o.Size ?? 0,
          lastModified: isoTime(o.LastModified ?? new Date(0)),
          etag: unquoteEtag(o.ETag),
        })),
        prefixes: (out.CommonPrefixes ?? []).map((p) => keyOf(p.Prefix)),
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
