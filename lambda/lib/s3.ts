/** The one seam to S3: every request the indexer makes goes through `S3Store`. */
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ArchivedObjectError, ConditionalWritesUnsupportedError } from './errors';
import { codeOf, isConflict, isNotFound, isUnsupported, statusOf, translateError } from './s3-errors';
import type { S3Settings } from './config';
import { createS3Client } from './s3-client';
import { type DirectAnswer, DirectRequests, type RequestObserver } from './s3-direct';
import { directPage, sdkPage, unquoteEtag } from './s3-pages';
import type { GetOptions, ListOptions, ListPage, ObjectInfo, OpenedObject, StoredObject, WriteCondition, WriteResult } from './s3-types';
import type { Layout } from './layouts/types';

export type { GetOptions, ListOptions, ListPage, ObjectInfo, OpenedObject, StoredObject, WriteCondition, WriteResult } from './s3-types';
export { unquoteEtag };

/** An object's metadata from the headers of a GetObject or HeadObject answer. */
function infoOf(answer: DirectAnswer): ObjectInfo {
  const modified = answer.headers['last-modified'];
  return {
    size: Number(answer.headers['content-length'] ?? 0),
    etag: unquoteEtag(answer.headers.etag),
    lastModified: modified ? new Date(modified) : new Date(0),
  };
}

/** Bucket-scoped S3 operations with typed errors and per-operation request counts. */
export class S3Store {
  /** HTTP requests sent, by operation (retries count). */
  readonly requests: Record<string, number> = {};

  /**
   * The layout each scope had when `readLiveIndex` last read it through this store, by manifest key: a hint
   * that spares a shard-first scope the speculative monolith read, never what decides the layout.
   */
  readonly layoutsSeen = new Map<string, Layout>();

  /** Listing pages, object streams and HEADs bypass the SDK's middleware when the client allows it (`s3-direct.ts`). */
  private readonly direct: DirectRequests | undefined;
  private readonly observers: RequestObserver[] = [];

  constructor(
    readonly client: S3Client,
    readonly bucket: string,
  ) {
    this.direct = DirectRequests.of(client, bucket, (op, input) => {
      this.requests[op] = (this.requests[op] ?? 0) + 1;
      if (this.observers.length === 0) return undefined;
      const ends = this.observers.map((o) => o(op, input));
      return () => {
        for (const end of ends) end?.();
      };
    });
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

  /**
   * Watches every attempt of the requests sent without the SDK (ListObjectsV2, streamed GetObject, HeadObject
   * on a client from `createS3Client`); the SDK's requests are seen through the client's middleware stack.
   */
  observe(observer: RequestObserver): void {
    this.observers.push(observer);
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
      const page =
        (this.listParser === 'fast' ? await directPage(this.direct, this.bucket, options, token) : undefined) ??
        (await sdkPage(this.client, this.bucket, options, token, this.listParser));
      yield page.page;
      token = page.token;
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
      if (options.beforeBody) {
        try {
          options.beforeBody(out.ContentLength ?? 0);
        } catch (err) {
          // The body is left unread: closed, so its connection is not held open.
          (out.Body as { destroy?: () => void } | undefined)?.destroy?.();
          throw err;
        }
      }
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

  /** GetObject's middleware as resolved for the first `open` the SDK sends; see there. */
  private openHandler?: ReturnType<GetObjectCommand['resolveMiddleware']>;

  /**
   * Opens an object, or undefined when it does not exist: a body of at most `wholeUpTo` bytes is read whole
   * when sent directly, any other is a stream. Made for many calls (a hydrate makes thousands): sent
   * directly where the client allows it; otherwise the client's middleware is resolved once, on the first
   * call, rather than on each `send` (what the SDK's `cacheMiddleware` does, for this command only), and
   * middleware added to the client later does not apply to `open`.
   */
  async open(key: string, wholeUpTo = -1): Promise<OpenedObject | undefined> {
    try {
      if (await this.direct?.usable()) {
        const answer = await this.direct!.send({ op: 'GetObject', method: 'GET', key, streamOver: wholeUpTo, input: { Key: key } });
        const info = infoOf(answer);
        return answer.stream ? { info, stream: answer.stream } : { info, body: answer.body ?? Buffer.alloc(0) };
      }
      const command = new GetObjectCommand({ Bucket: this.bucket, Key: key });
      this.openHandler ??= command.resolveMiddleware(this.client.middlewareStack, this.client.config, undefined);
      const { output: out } = await this.openHandler(command);
      return {
        stream: out.Body as Readable,
        info: { size: out.ContentLength ?? 0, etag: unquoteEtag(out.ETag), lastModified: out.LastModified ?? new Date(0) },
      };
    } catch (err) {
      if (codeOf(err) === 'InvalidObjectState') throw await this.archived(err, key);
      return this.absentOrThrow(err, 'GetObject', key);
    }
  }

  /** The error of an archived object, saying whether a restore is under way (a HEAD's `x-amz-restore` tells). */
  private async archived(err: unknown, key: string): Promise<Error> {
    const said = translateError(err, 'GetObject', this.bucket, key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      const restoring = /ongoing-request\s*=\s*"true"/.test(out.Restore ?? '');
      return new ArchivedObjectError(this.bucket, key, out.StorageClass ?? (said as ArchivedObjectError).storageClass, restoring, {
        cause: err,
      });
    } catch {
      return said;
    }
  }

  /** An object's metadata, or undefined when it does not exist. */
  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      if (await this.direct?.usable())
        return infoOf(await this.direct!.send({ op: 'HeadObject', method: 'HEAD', key, input: { Key: key } }));
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
