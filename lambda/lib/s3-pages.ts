/** One ListObjectsV2 page for `S3Store.listPages`: sent directly (`s3-direct.ts`) or through the SDK, read by `list-xml.ts`. */
import { ListObjectsV2Command, type ListObjectsV2CommandOutput, type S3Client } from '@aws-sdk/client-s3';
import { NotAListingError } from './errors';
import { decodeUrlKey, isoTime, type ListObjectsPage, parseListObjectsV2 } from './list-xml';
import type { ListOptions, ListPage } from './s3-types';
import type { DirectRequests } from './s3-direct';
import { isWebPage, notAListing, statusOf, translateError } from './s3-errors';

/** Strips the double quotes S3 puts around ETags. */
export function unquoteEtag(etag: string | undefined): string {
  return (etag ?? '').replace(/^W\//, '').replace(/^"|"$/g, '');
}

/** A page and the continuation token of the next one (undefined at the end). */
export interface PageRead {
  readonly page: ListPage;
  readonly token: string | undefined;
}

/** A listed key under `encoding-type=url`, decoded; a store that encodes otherwise cannot be listed safely. */
function decodedKey(text: string, prefix: string | undefined): string {
  const key = decodeUrlKey(text);
  if (key !== undefined) return key;
  throw new NotAListingError(
    `Listing ${JSON.stringify(prefix ?? '')} gave the key ${JSON.stringify(text)}, which is not valid URL encoding although the answer says encoding-type=url; nothing was written`,
    'The endpoint does not encode keys as S3 does: check --endpoint, or report the store',
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

function fromFast(fast: ListObjectsPage): PageRead {
  return {
    page: { objects: fast.objects, prefixes: fast.prefixes, truncated: fast.isTruncated },
    token: fast.isTruncated ? fast.nextContinuationToken : undefined,
  };
}

/** One page sent directly and read by `parseListObjectsV2`; undefined leaves the page to the SDK (no direct path, or an answer the reader does not know). */
export async function directPage(
  direct: DirectRequests | undefined,
  bucket: string,
  options: ListOptions,
  token: string | undefined,
): Promise<PageRead | undefined> {
  const endpoint = await direct?.usable();
  if (!endpoint) return undefined;
  const query: Record<string, string> = { 'list-type': '2', 'encoding-type': 'url' };
  if (options.prefix) query.prefix = options.prefix;
  if (options.delimiter !== undefined) query.delimiter = options.delimiter;
  if (token) query['continuation-token'] = token;
  else if (options.startAfter) query['start-after'] = options.startAfter;
  if (options.maxKeys !== undefined) query['max-keys'] = String(options.maxKeys);
  let body: Buffer;
  try {
    const input = { Prefix: options.prefix, Delimiter: options.delimiter, StartAfter: token ? undefined : options.startAfter };
    body = (await direct!.send({ op: 'ListObjectsV2', method: 'GET', query, input })).body!;
  } catch (err) {
    // A web server's error page is no S3 error: name the endpoint that sent it.
    if (isWebPage(err)) {
      const request = { protocol: endpoint.protocol, hostname: endpoint.host, path: `${endpoint.basePath}/` };
      throw notAListing(request, Buffer.from((err as Error).message), statusOf(err));
    }
    throw translateError(err, 'ListBucket', bucket, options.prefix);
  }
  const page = parseListObjectsV2(body, options.etags !== false);
  if (page) return fromFast(page);
  // A web page or a proxy's answer with status 200 is no listing: never read it as an empty bucket.
  if (!body.includes('<ListBucketResult') && !body.includes('<Error>')) {
    throw notAListing({ protocol: endpoint.protocol, hostname: endpoint.host, path: `${endpoint.basePath}/` }, body);
  }
  return undefined;
}

/** One page through the SDK; with `fast`, its answer is still read by `parseListObjectsV2` when that knows it. */
export async function sdkPage(
  client: S3Client,
  bucket: string,
  options: ListOptions,
  token: string | undefined,
  listParser: 'fast' | 'sdk',
): Promise<PageRead> {
  const command = new ListObjectsV2Command({
    Bucket: bucket,
    Prefix: options.prefix || undefined,
    Delimiter: options.delimiter,
    StartAfter: token ? undefined : options.startAfter,
    ContinuationToken: token,
    MaxKeys: options.maxKeys,
    // Raw keys in XML lose characters (a CR comes back as LF); encoded ones arrive whole.
    EncodingType: 'url',
  });
  let fast: ListObjectsPage | undefined;
  if (listParser === 'fast') {
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
    out = await client.send(command);
  } catch (err) {
    throw translateError(err, 'ListBucket', bucket, options.prefix);
  }
  if (fast) return fromFast(fast);
  // The SDK hands URL-encoded keys over as they came; a store that ignored the request sent them raw.
  const keyOf = (text: string | undefined): string => (out.EncodingType === 'url' ? decodedKey(text ?? '', options.prefix) : (text ?? ''));
  const page: ListPage = {
    objects: (out.Contents ?? []).map((o) => ({
      key: keyOf(o.Key),
      size: o.Size ?? 0,
      lastModified: isoTime(o.LastModified ?? new Date(0)),
      etag: unquoteEtag(o.ETag),
    })),
    prefixes: (out.CommonPrefixes ?? []).map((p) => keyOf(p.Prefix)),
    truncated: !!(out.IsTruncated && out.NextContinuationToken),
  };
  return { page, token: out.IsTruncated ? out.NextContinuationToken : undefined };
}
